"""The real Claude Code CLI installs the rimthan-host bridge the ways docs/host-kit.md says.

Pinned in interop/package-lock.json (``@anthropic-ai/claude-code``); with
``npm ci --ignore-scripts`` its install script does not run, so the CLI is
the native binary of its ``claude-code-linux-x64`` package, run directly.
Everything happens in a throwaway HOME and a throwaway project that holds the
freshly signed release (``releases/``) and its trust directory
(``keys/local``), the bridge's defaults. No account is needed for these
commands; ``claude mcp list`` starts each server and reports it connected
only if it answers MCP's initialize (Claude Code's health check).

1. ``claude plugin marketplace add host/claude-plugin`` and
   ``claude plugin install rimthan@rimthan`` (``claude plugin validate`` passes
   the marketplace and the plugin, and a copy of the plugin folder outside the
   repository draws no ``README_MISSING``: the folder has its own README.md);
   ``claude mcp list`` shows the plugin's
   bridge connected, and with the plugin's ``require_elicitation`` option set
   (``claude plugin configure --values-stdin``) the bridge it starts says on
   stderr that ``--require-elicitation`` is on (Claude Code keeps a server's
   stderr in its log, ``~/.cache/claude-cli-nodejs/<project>/mcp-logs-<server>/``).
2. The documented ``claude mcp add --scope project rimthan -- rimthan-host serve``
   writes the ``.mcp.json`` the docs show; after the approval a person gives
   when they first run ``claude`` there (trusting the folder, enabling the
   project's server, recorded here as Claude Code records it), ``claude mcp
   list`` shows it connected.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rimthan_host.serve import REQUIRING_ELICITATION

CLAUDE_PACKAGE = "@anthropic-ai/claude-code"
PLUGIN_MARKETPLACE = "host/claude-plugin"
PLUGIN = "rimthan@rimthan"
PLUGIN_DIR = "host/claude-plugin/rimthan"
PLUGIN_SERVER_LOGS = "mcp-logs-plugin-rimthan-rimthan"
OPTION = "require_elicitation"
README_MISSING = "README_MISSING"  # the plugin directory check's code for a plugin folder without a README.md
MCP_ADD = ["mcp", "add", "--scope", "project", "rimthan", "--", "rimthan-host", "serve"]
# What MCP_ADD writes to .mcp.json, as docs/host-kit.md shows it (tests/docs/test_host_kit_mcp_json.py).
MCP_JSON = {"mcpServers": {"rimthan": {"type": "stdio", "command": "rimthan-host", "args": ["serve"], "env": {}}}}
TIMEOUT = 120

Check = Callable[[bool, str, str], bool]


def claude_binary(modules: Path) -> Path:
    """The pinned CLI's native binary (what its skipped install script would have linked)."""
    return modules / "@anthropic-ai" / "claude-code-linux-x64" / "claude"


def claude_env(home: Path, bin_dir: Path) -> dict[str, str]:
    """A throwaway HOME, the workspace's console scripts first on PATH, no update checks or telemetry."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("npm_", "ANTHROPIC_", "CLAUDE_"))}
    env.update(
        HOME=str(home),
        PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        NO_COLOR="1",
        DISABLE_AUTOUPDATER="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
    )
    return env


def make_project(work: Path, release: Path, trust: Path) -> Path:
    """A project as the bridge expects by default: ``releases/<release>`` and ``keys/local``."""
    project = work / "claude-project"
    shutil.copytree(release, project / "releases" / release.name)
    shutil.copytree(trust, project / "keys" / "local")
    return project


def run_claude_code(
    modules: Path, repo: Path, work: Path, release: Path, trust: Path, bin_dir: Path, check: Check
) -> None:
    binary = claude_binary(modules)
    home = work / "claude-home"
    home.mkdir()
    project = make_project(work, release, trust)
    env = claude_env(home, bin_dir)

    def claude(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(binary), *args], cwd=project, env=env, input=stdin if stdin is not None else "",
            capture_output=True, text=True, timeout=TIMEOUT, check=False,
        )  # fmt: skip

    version = claude("--version")
    check(version.returncode == 0, f"{CLAUDE_PACKAGE} runs", version.stdout.strip() or version.stderr.strip())
    added = claude("plugin", "marketplace", "add", str(repo / PLUGIN_MARKETPLACE))
    check(added.returncode == 0, f"claude plugin marketplace add {PLUGIN_MARKETPLACE}", _last(added))
    installed = claude("plugin", "install", PLUGIN)
    check(installed.returncode == 0, f"claude plugin install {PLUGIN}", _last(installed))
    for path in (PLUGIN_MARKETPLACE, PLUGIN_DIR):
        valid = claude("plugin", "validate", str(repo / path))
        check(valid.returncode == 0, f"claude plugin validate {path}", _last(valid))
    _plugin_readme(claude, repo, work, check)
    _plugin_bridge(claude, home, check)

    mcp_add = claude(*MCP_ADD)
    written = _json_or_none(project / ".mcp.json")
    check(
        mcp_add.returncode == 0 and written == MCP_JSON,
        f"claude {' '.join(MCP_ADD)} writes the documented .mcp.json (docs/host-kit.md: every key, no other)",
        json.dumps(written) if written is not None else _last(mcp_add),
    )
    approve_project_servers(home, project, ["rimthan"])
    listed = claude("mcp", "list")
    check(
        _connected(listed.stdout, "rimthan: rimthan-host serve"),
        "claude mcp list: the .mcp.json bridge is connected (after the user's approval)",
        _last(listed),
    )


def _plugin_bridge(claude: Callable[..., subprocess.CompletedProcess[str]], home: Path, check: Check) -> None:
    """The plugin's bridge connects; its ``require_elicitation`` option, set, starts it requiring elicitation."""
    configure = claude("plugin", "configure", PLUGIN, "--json")
    options = (_json_text(configure.stdout) or {}).get("schema", {})
    check(OPTION in options, f"claude plugin configure {PLUGIN}: the {OPTION} option", _last(configure))
    for value, on in (("", False), ("true", True)):
        if value:
            configure = claude("plugin", "configure", PLUGIN, "--values-stdin", stdin=json.dumps({OPTION: value}))
            check(configure.returncode == 0, f"claude plugin configure {PLUGIN}: {OPTION}={value}", _last(configure))
        before = set(home.glob(f".cache/claude-cli-nodejs/*/{PLUGIN_SERVER_LOGS}/*"))
        listed = claude("mcp", "list")
        check(
            _connected(listed.stdout, "plugin:rimthan:rimthan: rimthan-host serve -- --migrate-to-newest - "),
            f"claude mcp list: the plugin's bridge is connected ({OPTION} {value or 'not set'})",
            _last(listed),
        )
        logs = set(home.glob(f".cache/claude-cli-nodejs/*/{PLUGIN_SERVER_LOGS}/*")) - before
        said = any(REQUIRING_ELICITATION in path.read_text("utf-8", "replace") for path in logs)
        check(
            said == on and bool(logs),
            f"the plugin's bridge {'says' if on else 'does not say'} at start that --require-elicitation is on "
            f"(Claude Code's log of its stderr; {OPTION} {value or 'not set'})",
            f"{len(logs)} new log file(s) in {home}/.cache/claude-cli-nodejs/*/{PLUGIN_SERVER_LOGS}",
        )


def _plugin_readme(
    claude: Callable[..., subprocess.CompletedProcess[str]], repo: Path, work: Path, check: Check
) -> None:
    """The plugin folder's own README.md: a copy of it outside any git repository (where the repository's README
    cannot stand in) draws no README_MISSING from ``claude plugin validate``'s plugin directory checks."""
    alone = work / "plugin-alone" / "rimthan"
    shutil.copytree(repo / PLUGIN_DIR, alone)
    valid = claude("plugin", "validate", str(alone))
    said = valid.stdout + valid.stderr
    check(
        valid.returncode == 0 and "Validating plugin manifest" in said and README_MISSING not in said,
        f"claude plugin validate {PLUGIN_DIR} copied outside the repository: its own README.md ({README_MISSING} "
        "not said)",
        _last(valid),
    )


def approve_project_servers(home: Path, project: Path, names: Sequence[str]) -> None:
    """What Claude Code records when the person trusts the folder and enables the project's servers."""
    path = home / ".claude.json"
    config = _json_or_none(path) or {}
    projects = config.setdefault("projects", {})
    entry = projects.setdefault(str(project), {})
    entry.update(hasTrustDialogAccepted=True, enabledMcpjsonServers=list(names))
    path.write_text(json.dumps(config, indent=2), "utf-8")


def _connected(listing: str, prefix: str) -> bool:
    return any(line.startswith(prefix) and "Connected" in line for line in listing.splitlines())


def _json_or_none(path: Path) -> dict[str, Any] | None:
    try:
        return _json_text(path.read_text("utf-8"))
    except OSError:
        return None


def _json_text(text: str) -> dict[str, Any] | None:
    try:
        loaded = json.loads(text)
    except ValueError:
        return None
    return loaded if isinstance(loaded, dict) else None


def _last(done: subprocess.CompletedProcess[str]) -> str:
    text = (done.stdout.strip() + "\n" + done.stderr.strip()).strip()
    return " | ".join(text.splitlines()[-3:])
