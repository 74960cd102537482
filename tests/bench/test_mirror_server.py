"""The mirror floor server (benchmarks/mirror_server.py): our tool list, and exactly the result it was loaded with.

``make bench`` reads "ours over the mirror" as our server's own work per call,
so the mirror must list the tools it was given (the client checks results
against their output schemas), return the loaded result byte for byte, once,
and refuse a call it has nothing loaded for. A real SDK client drives the
real server process over stdio and over HTTP.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the benchmarks are a package at the repository root
from benchmarks.mirror_server import LOAD  # noqa: E402
from benchmarks.servers import mirror_server, session  # noqa: E402

TOOL = {
    "name": "demo.start",
    "description": "A tool with an output schema, as ours have.",
    "inputSchema": {"type": "object", "properties": {"workflow": {"type": "string"}}, "required": ["workflow"]},
    "outputSchema": {
        "type": "object",
        "properties": {"status": {"enum": ["active", "completed"]}, "step": {"type": "string"}},
        "required": ["status", "step"],
        "additionalProperties": False,
    },
}
RESULT = {"status": "active", "step": "setup-workspace"}
TEXT = json.dumps(RESULT, separators=(",", ":"), sort_keys=True)


async def _exercise(tools: Path, log: Path, transport: str) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    async with session(mirror_server(tools, log), transport) as client:
        listed = (await client.list_tools()).tools
        seen["listed"] = {t.name: t.output_schema for t in listed}
        seen["unloaded"] = await client.call_tool("demo.start", {"workflow": "research"})
        loaded = {"content": [{"type": "text", "text": TEXT}], "structuredContent": RESULT, "isError": False}
        seen["load"] = await client.call_tool(LOAD, {"result": loaded})
        seen["mirrored"] = await client.call_tool("demo.start", {"workflow": "anything"})
        seen["again"] = await client.call_tool("demo.start", {"workflow": "research"})
        seen["unknown"] = await client.call_tool("demo.other", {})
    return seen


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_the_mirror_lists_the_given_tools_and_returns_the_loaded_result_once(tmp_path: Path, transport: str) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([TOOL]), "utf-8")
    seen = anyio.run(_exercise, tools, tmp_path / "mirror.log", transport)

    assert seen["listed"] == {"demo.start": TOOL["outputSchema"], LOAD: None}
    assert seen["unloaded"].is_error
    assert "nothing loaded" in seen["unloaded"].content[0].text
    assert not seen["load"].is_error
    mirrored = seen["mirrored"]
    assert not mirrored.is_error
    assert [c.text for c in mirrored.content] == [TEXT]
    assert mirrored.structured_content == RESULT
    assert seen["again"].is_error  # one load, one reply: a stale result is never returned twice
    assert seen["unknown"].is_error and "no tool 'demo.other'" in seen["unknown"].content[0].text
