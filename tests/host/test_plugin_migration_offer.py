"""The Claude Code plugin's bridge offers a newer release published into the project's releases/.

The plugin's ``.mcp.json`` is the only command a plugin user has: they cannot pass the verifier's
migration flags. A user runs 1.2.0, publishes 1.3.0 into ``./releases`` and opens a new session (the
bridge, and so its verifier, starts again and reads the directory): the run's next move must carry the
offer, and ``migrate_run`` must take the run there. Before, the plugin started ``rimthan-mcp serve``
without ``--migrate-to-newest``, so the verifier offered no migration ("migration target: none") and a
plugin user's run could never move to a newer release.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import anyio
import pytest
from mcp.client.stdio import StdioServerParameters
from support.bridge import BIN, check_replies, stand_in
from support.checked_client import CheckedClient
from support.releases import packaged_source
from support.servers import ServerWorld, build_world

PLUGIN_MCP_JSON = Path(__file__).parents[2] / "host" / "claude-plugin" / "rimthan" / ".mcp.json"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("plugin-migration-world"))


def _plugin_params(project: Path, state: Path) -> StdioServerParameters:
    """The plugin's server, as Claude Code starts it: its command and args, in the project, on the user's PATH."""
    (server,) = json.loads(PLUGIN_MCP_JSON.read_text("utf-8"))["mcpServers"].values()
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "RIMTHAN_STATE_DIR": str(state)}
    return StdioServerParameters(command=server["command"], args=server.get("args", []), cwd=project, env=env)


def test_a_release_published_between_sessions_is_offered_and_taken(world: ServerWorld, tmp_path: Path) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    world.publish("1.2.0", project / "releases")
    shutil.copytree(world.trust, project / "keys" / "local")
    facts = json.loads((packaged_source("1.2.0") / "examples" / "confirmed-state.json").read_text("utf-8"))

    async def first_session() -> None:
        async with CheckedClient(_plugin_params(project, state), mode="legacy") as client:
            model = stand_in(client, project)
            started = await model.start(facts)
            assert started.data["step"]["id"] == "interview" and "migration" not in started.data, started.text
            check_replies(model)

    async def second_session() -> None:
        async with CheckedClient(_plugin_params(project, state), mode="legacy") as client:
            model = stand_in(client, project)
            await model.call("resume_run")
            moved = await model.call("step_done", {"step": "interview"})
            offer = moved.data.get("migration")
            assert offer is not None and offer["to_release"] == "research-decision@1.3.0", moved.text
            assert "A newer release is offered for this run: research-decision@1.3.0" in moved.text
            new_facts = {name: "medium" for name in offer["needs"]}
            preview = await model.call("migrate_run", {"confirm": False, "facts": new_facts})
            assert preview.data["status"] == "preview", preview.text
            migrated = await model.call("migrate_run", {"confirm": True, "facts": new_facts})
            assert not migrated.is_error and "Migrated run" in migrated.text, migrated.text
            assert "(1.3.0)" in migrated.text
            check_replies(model)

    anyio.run(first_session)
    world.publish("1.3.0", project / "releases")
    anyio.run(second_session)
