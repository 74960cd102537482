"""Hosts other than Claude Code, the real CLIs: Gemini CLI and Codex CLI load the bridge the ways docs/host-kit.md says.

Both are pinned in interop/package-lock.json (``@google/gemini-cli``, run on the Node 22 binary;
``@openai/codex``, the native binary of its ``codex-linux-x64`` package). Each runs in a throwaway HOME and a
throwaway project holding the freshly signed release (``releases/``) and its trust directory (``keys/local``).
No account is needed: where a host would reach its model, it is pointed at a stand-in on a loopback port
(interop/model_standin.py), which keeps the request the model would get.

Gemini CLI: ``gemini mcp add rimthan rimthan-host serve`` writes the documented ``.gemini/settings.json``; once
the person trusts the folder (recorded here as Gemini CLI records it, ``~/.gemini/trustedFolders.json``),
``gemini mcp list`` initializes the bridge and says it is connected; ``gemini -p`` sends the model every tool of
the bridge as a function declaration ``mcp_rimthan_<tool>`` whose ``parametersJsonSchema`` is the tool's input
schema plus Gemini's own ``wait_for_previous``; and the model's call of ``mcp_rimthan_show_step`` with that
argument set reaches the bridge, whose answer ("No run is active") goes back to the model.

Codex CLI: ``codex mcp add rimthan -- rimthan-host serve`` writes the documented ``~/.codex/config.toml``;
``codex mcp list`` shows it enabled (it reads the config and starts nothing); ``codex exec`` starts the bridge,
and the model's request carries the ``mcp__rimthan`` namespace with every tool of the bridge; then what Codex hands
the model from the bridge's ``start_run`` and ``show_step`` results (interop/codex_run.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from codex_run import run_codex_results
from model_standin import ModelStandIn, model_standin
from rimthan_host.tools import TOOLS

GEMINI_PACKAGE = "@google/gemini-cli"
CODEX_PACKAGE = "@openai/codex"
GEMINI_ADD = ["mcp", "add", "rimthan", "rimthan-host", "serve"]
CODEX_ADD = ["mcp", "add", "rimthan", "--", "rimthan-host", "serve"]
# What the add lines write, as docs/host-kit.md shows it (tests/docs/test_host_kit_other_hosts.py).
GEMINI_SETTINGS = {"mcpServers": {"rimthan": {"command": "rimthan-host", "args": ["serve"]}}}
CODEX_CONFIG = {"mcp_servers": {"rimthan": {"command": "rimthan-host", "args": ["serve"]}}}
GEMINI_CONNECTED = "✓ rimthan: rimthan-host serve (stdio) - Connected"
HINT = "wait_for_previous"  # Gemini CLI adds it to every tool (rimthan_host.tools.HOST_HINTS)
NO_RUN = "No run is active. Call start_run"
GEMINI_MODEL = "gemini-2.5-flash"  # named, so the CLI asks the model directly (no routing request first)
# ``required``: codex exec waits for the bridge before its first request (else it may send that without it).
CODEX_STANDIN = (
    "mcp_servers.rimthan.required=true",
    "model_provider=standin",
    'model="gpt-5"',
)
HOST_ENV_PREFIXES = ("npm_", "GEMINI_", "GOOGLE_", "OPENAI_", "CODEX_", "ANTHROPIC_", "CLAUDE_")
TIMEOUT = 180

Check = Callable[[bool, str, str], bool]
Run = Callable[..., subprocess.CompletedProcess[str]]


def run_other_hosts(
    modules: Path, node22: Path, work: Path, release: Path, trust: Path, bin_dir: Path, check: Check
) -> None:
    gemini = [str(node22), str(modules / "@google" / "gemini-cli" / "bundle" / "gemini.js")]
    codex = [str(modules / "@openai" / "codex-linux-x64" / "vendor" / "x86_64-unknown-linux-musl" / "bin" / "codex")]
    with model_standin() as model:
        print("\nGemini CLI: the documented gemini mcp add line", flush=True)
        run_gemini(gemini, _world(work, "gemini", release, trust, bin_dir), model, check)
        print("\nCodex CLI: the documented codex mcp add line", flush=True)
        run_codex(codex, _world(work, "codex", release, trust, bin_dir), release, model, check)


def run_gemini(command: list[str], world: tuple[Path, Path, dict[str, str]], model: ModelStandIn, check: Check) -> None:
    project, home, env = world
    gemini = _runner(command, project, env)
    settings = project / ".gemini" / "settings.json"
    _add_line(gemini, (GEMINI_PACKAGE, GEMINI_ADD), lambda: _json_or_none(settings), GEMINI_SETTINGS, check)
    (home / ".gemini" / "trustedFolders.json").write_text(json.dumps({str(project): "TRUST_FOLDER"}), "utf-8")
    listed = gemini("mcp", "list")
    check(
        GEMINI_CONNECTED in listed.stdout + listed.stderr,
        "gemini mcp list: the bridge is connected (folder trusted)",
        _last(listed),
    )
    (home / ".gemini" / "settings.json").write_text(
        json.dumps({"security": {"auth": {"selectedType": "gemini-api-key"}}}), "utf-8"
    )
    model.gemini_calls.append(("mcp_rimthan_show_step", {HINT: True}))
    asked = gemini(
        "-m", GEMINI_MODEL, "--approval-mode", "yolo", "-p", "where is my run?",
        extra_env={"GEMINI_API_KEY": "stand-in", "GOOGLE_GEMINI_BASE_URL": model.url},
    )  # fmt: skip
    bodies = model.bodies(f"/models/{GEMINI_MODEL}:")
    _gemini_declarations(bodies, asked, check)
    said = [
        json.dumps(part["functionResponse"])
        for body in bodies[1:]
        for content in body.get("contents", [])
        for part in content.get("parts", [])
        if "functionResponse" in part
    ]
    check(
        len(said) == 1 and NO_RUN in said[0] and "unknown argument" not in said[0],
        f"gemini -p: the model's call of mcp_rimthan_show_step with Gemini's {HINT} reaches the bridge, "
        f'which answers it ("{NO_RUN}")',
        said[0][:300] if said else _last(asked),
    )


def _gemini_declarations(bodies: list[dict[str, Any]], asked: subprocess.CompletedProcess[str], check: Check) -> None:
    """Each bridge tool, as ``mcp_rimthan_<tool>``: its input schema, and Gemini's own ``wait_for_previous``."""
    declared = {
        fd.get("name"): fd.get("parametersJsonSchema") or {}
        for body in bodies[:1]
        for tool in body.get("tools", [])
        for fd in tool.get("functionDeclarations", [])
    }
    changed = []
    for tool in TOOLS:
        schema = dict(declared.get(f"mcp_rimthan_{tool.name}") or {})
        properties = dict(schema.get("properties") or {})
        hint = properties.pop(HINT, None)
        if hint is None or {**schema, "properties": properties} != tool.input_schema:
            changed.append(tool.name)
    check(
        asked.returncode == 0 and not changed,
        f"gemini -p: the model gets every bridge tool ({len(TOOLS)}) as mcp_rimthan_<tool>, its input schema "
        f"unchanged but for Gemini's own {HINT}",
        f"missing or changed: {', '.join(changed)}; {_last(asked)}" if changed else f"{len(TOOLS)} declared",
    )


def run_codex(
    command: list[str], world: tuple[Path, Path, dict[str, str]], release: Path, model: ModelStandIn, check: Check
) -> None:
    project, home, env = world
    codex = _runner(command, project, env)
    config = home / ".codex" / "config.toml"
    _add_line(codex, (CODEX_PACKAGE, CODEX_ADD), lambda: _toml_or_none(config), CODEX_CONFIG, check)
    listed = codex("mcp", "list")
    row = next((line.split() for line in listed.stdout.splitlines() if line.startswith("rimthan ")), [])
    check(
        row[:4] == ["rimthan", "rimthan-host", "serve", "-"] and "enabled" in row,
        "codex mcp list: the bridge is configured and enabled (codex starts nothing to list)",
        _last(listed),
    )
    provider = (
        f'model_providers.standin={{name="standin",base_url="{model.url}/v1",env_key="STANDIN_KEY",'
        'wire_api="responses"}'
    )
    overrides = [arg for value in (*CODEX_STANDIN, provider) for arg in ("-c", value)]
    asked = codex("exec", "--skip-git-repo-check", *overrides, "hello", extra_env={"STANDIN_KEY": "stand-in"})
    namespaces = [
        tool
        for body in model.bodies("/responses")
        for tool in body.get("tools", [])
        if tool.get("name") == "mcp__rimthan"
    ]
    offered = {tool.get("name") for space in namespaces for tool in space.get("tools", [])}
    wanted = {tool.name for tool in TOOLS}
    check(
        asked.returncode == 0 and offered == wanted,
        f"codex exec: the model gets the mcp__rimthan namespace with every bridge tool ({len(wanted)})",
        f"offered {sorted(offered)}; {_last(asked)}",
    )
    run_codex_results(codex, model, overrides, (release, project), check)


def _world(work: Path, host: str, release: Path, trust: Path, bin_dir: Path) -> tuple[Path, Path, dict[str, str]]:
    """A project as the bridge expects by default, a throwaway HOME, and the environment the CLI runs in."""
    project, home = work / f"{host}-project", work / f"{host}-home"
    shutil.copytree(release, project / "releases" / release.name)
    shutil.copytree(trust, project / "keys" / "local")
    (home / f".{host}").mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(HOST_ENV_PREFIXES)}
    env.update(HOME=str(home), PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", NO_COLOR="1")
    return project, home, env


def _runner(command: list[str], project: Path, env: dict[str, str]) -> Run:
    def host(*args: str, extra_env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*command, *args], cwd=project, env={**env, **(extra_env or {})}, stdin=subprocess.DEVNULL,
            capture_output=True, text=True, timeout=TIMEOUT, check=False,
        )  # fmt: skip

    return host


def _add_line(
    host: Run, line: tuple[str, list[str]], written: Callable[[], dict[str, Any] | None], shown: object, check: Check
) -> None:
    """The CLI runs, and its documented ``mcp add`` line writes what docs/host-kit.md shows."""
    package, add = line
    version = host("--version")
    check(version.returncode == 0, f"{package} runs", version.stdout.strip() or _last(version))
    added = host(*add)
    got = written()
    check(
        added.returncode == 0 and got == shown,
        f"{package}: {' '.join(add)} writes the documented config",
        json.dumps(got) if got is not None else _last(added),
    )


def _json_or_none(path: Path) -> dict[str, Any] | None:
    try:
        loaded = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return loaded if isinstance(loaded, dict) else None


def _toml_or_none(path: Path) -> dict[str, Any] | None:
    try:
        return tomllib.loads(path.read_text("utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return None


def _last(done: subprocess.CompletedProcess[str]) -> str:
    text = (done.stdout.strip() + "\n" + done.stderr.strip()).strip()
    return " | ".join(line for line in text.splitlines()[-3:])
