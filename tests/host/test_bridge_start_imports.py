"""``rimthan-host serve`` answers ``tools/list`` before it imports what only a tool call needs.

A host checks a bridge is up by listing its tools (Claude Code with a time
limit, while the bridge's child verifier starts beside it on the same cores).
The real console script runs under ``python -X importtime`` (only the bridge:
its child, ``rimthan-mcp serve``, starts without the flag), with a real
verifier on a signed packaged release; the modules it imported are read from
its stderr once ``tools/list`` was answered, and again after its first call.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from support.bridge import TOOL_NAMES, bridge_params
from support.servers import ServerWorld, build_world

# Only a tool call checks arguments against a schema (Python jsonschema, with attrs, referencing and rpds).
_FIRST_CALL_ONLY = {"jsonschema", "referencing", "attrs", "rpds", "rimthan_workflow_registry.jsonschema_formats"}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("bridge-start-world"))


def _imported(errlog: Path) -> set[str]:
    """Every module the bridge imported so far (``import time: self | cumulative | name`` lines)."""
    lines = errlog.read_text("utf-8", "replace").splitlines()
    rows = [line.split("|") for line in lines if line.startswith("import time:") and line.count("|") == 2]
    return {row[2].strip() for row in rows if row[2].strip() != "imported package"}


def _under_importtime(world: ServerWorld, tmp_path: Path) -> StdioServerParameters:
    (tmp_path / "project").mkdir()
    bridge = bridge_params(tmp_path / "project", world, tmp_path / "state")
    return StdioServerParameters(command=sys.executable, args=["-X", "importtime", bridge.command, *bridge.args])


def test_a_bridge_lists_its_tools_without_jsonschema_and_its_first_call_loads_it(
    world: ServerWorld, tmp_path: Path
) -> None:
    errlog = tmp_path / "bridge.err"

    async def go() -> tuple[set[str], set[str]]:
        with errlog.open("w") as err:
            async with Client(stdio_client(_under_importtime(world, tmp_path), errlog=err), mode="legacy") as client:
                listed = await client.list_tools()
                assert tuple(t.name for t in listed.tools) == TOOL_NAMES
                at_list = _imported(errlog)
                shown = await client.call_tool("show_step", {})  # (no run yet: it names the workflows to start)
                assert (shown.structured_content or {}).get("status") == "no_run", shown
                return at_list, _imported(errlog)

    at_list, after_call = anyio.run(go)
    assert {"rimthan_host.bridge", "rimthan_host.link", "rimthan_host.tools", "mcp"} <= at_list  # the control
    assert not {m.split(".")[0] for m in at_list} & _FIRST_CALL_ONLY, sorted(at_list & _FIRST_CALL_ONLY)
    assert "rimthan_workflow_registry.jsonschema_formats" not in at_list
    assert {"jsonschema", "rimthan_workflow_registry.jsonschema_formats"} <= after_call  # a call checks its arguments
