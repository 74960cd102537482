"""The Claude Code plugin's ``require_elicitation`` option turns on the bridge's ``--require-elicitation``.

A plugin's ``.mcp.json`` passes fixed arguments, so its user had no way to start the bridge requiring the user's
own confirmation short of editing the installed plugin. The plugin now declares a ``userConfig`` option and passes
it in the server's environment (``${user_config.require_elicitation}``, which the pinned Claude Code CLI fills in
with ``true`` or ``false``: interop/claude_code.py shows it with the real CLI); the bridge reads
``RIMTHAN_REQUIRE_ELICITATION``. Here the plugin's server is started as Claude Code starts it, with the option's
value filled in, and a real SDK client that declares no elicitation has its confirmation refused; with the option
off (its default) the same call is taken, as before.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.stdio import StdioServerParameters
from rimthan_host.require_option import REQUIRE_ELICITATION_ENV
from rimthan_host.serve import REQUIRING_ELICITATION
from support.bridge import BIN, stand_in
from support.checked_client import CheckedClient
from support.servers import ServerWorld, build_world

PLUGIN = Path(__file__).parents[2] / "host" / "claude-plugin" / "rimthan"
OPTION = "require_elicitation"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("plugin-require-elicitation-world"))


def _server() -> dict[str, Any]:
    (server,) = json.loads((PLUGIN / ".mcp.json").read_text("utf-8"))["mcpServers"].values()
    assert isinstance(server, dict)
    return server


def _filled(value: str, option: str) -> str:
    return re.sub(r"\$\{user_config\.(\w+)\}", lambda found: {OPTION: option}[found[1]], value)


def _as_claude_code_starts_it(project: Path, state: Path, option: str) -> StdioServerParameters:
    """The plugin's command, args and env, each ``${user_config.KEY}`` filled in with the option's value."""
    server = _server()
    filled = {key: _filled(value, option) for key, value in server["env"].items()}
    path = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {**os.environ, **filled, "PATH": path, "RIMTHAN_STATE_DIR": str(state)}
    return StdioServerParameters(command=server["command"], args=server["args"], cwd=project, env=env)


def test_the_plugin_declares_the_option_and_passes_it_in_the_bridges_environment() -> None:
    manifest = json.loads((PLUGIN / ".claude-plugin" / "plugin.json").read_text("utf-8"))
    declared = manifest["userConfig"][OPTION]
    assert declared["type"] == "boolean" and declared["default"] is False and declared["title"]
    assert _server()["env"] == {REQUIRE_ELICITATION_ENV: f"${{user_config.{OPTION}}}"}


def _project(world: ServerWorld, tmp_path: Path) -> tuple[Path, Path]:
    project, state = tmp_path / "project", tmp_path / "state"
    world.publish("1.2.0", project / "releases")
    shutil.copytree(world.trust, project / "keys" / "local")
    return project, state


@pytest.mark.parametrize("option", ["true", "false"])
def test_with_the_option_on_a_client_without_elicitation_has_its_confirmation_refused(
    world: ServerWorld, tmp_path: Path, option: str
) -> None:
    project, state = _project(world, tmp_path)

    async def session() -> None:
        async with CheckedClient(_as_claude_code_starts_it(project, state, option), mode="legacy") as client:
            started = await stand_in(client, project).start()
            refused = started.is_error and started.data.get("status") == "elicitation_required"
            assert refused == (option == "true"), started.text
            runs = project / ".rimthan" / "runs"
            assert (runs.is_dir() and any(runs.glob("*.log"))) == (option == "false")

    anyio.run(session)


def test_the_bridge_says_at_start_that_the_option_is_on(world: ServerWorld, tmp_path: Path) -> None:
    project, state = _project(world, tmp_path)
    params = _as_claude_code_starts_it(project, state, "true")
    done = subprocess.run(
        [params.command, *params.args], cwd=project, env=params.env, stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.stderr.splitlines()[0] == REQUIRING_ELICITATION and done.returncode == 0, done.stderr


@pytest.mark.parametrize("value", ["maybe", "${user_config.require_elicitation}"])
def test_a_value_the_bridge_cannot_read_is_a_usage_mistake_not_a_bridge_without_the_requirement(
    tmp_path: Path, value: str
) -> None:
    """Fail closed: a typo, or the text an older Claude Code would pass unfilled, starts no bridge."""
    env = {**os.environ, REQUIRE_ELICITATION_ENV: value}
    done = subprocess.run(
        [str(BIN / "rimthan-host"), "serve"], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    lines = done.stderr.splitlines()
    assert done.returncode == 2 and lines[0].startswith("error: usage: ") and REQUIRE_ELICITATION_ENV in lines[0]
    assert "is not a valid boolean" in lines[0] and lines[1].startswith("next: ") and "Traceback" not in done.stderr
