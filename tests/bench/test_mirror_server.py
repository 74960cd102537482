"""The mirror floor server (benchmarks/mirror_server.py): our tool list, and exactly the result it was loaded with.

``make bench`` reads "ours over the mirror" as our server's own work per call,
so the mirror must list the tools it was given (the client checks results
against their output schemas), return the loaded result byte for byte, once,
and refuse a call it has nothing loaded for. A real SDK client drives the
real server process over stdio and over HTTP. Keyed (``--results``, P6's
mirror under load) it answers each JSON-RPC request id with the result kept
for it, to the SDK client and to the load client's replayed bytes, and
refuses an id it keeps nothing for (a failed check ends the bench).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from http.client import HTTPConnection
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the benchmarks are a package at the repository root
from benchmarks.load_client import LoadGenerator, WireCall, capture, check_reply  # noqa: E402
from benchmarks.mirror_server import LOAD, request_key  # noqa: E402
from benchmarks.servers import http_process, mirror_server, session  # noqa: E402

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


IDS = range(8)  # more than the SDK client's requests below: discovery, then one per call


def _kept(request_id: int) -> dict[str, object]:
    result = {"status": "active", "step": f"step-{request_id}"}
    return {"content": [{"type": "text", "text": json.dumps(result)}], "structuredContent": result, "isError": False}


def _post(url: str, call: WireCall) -> tuple[int, bytes]:
    where = urlsplit(url)
    http = HTTPConnection(where.hostname or "127.0.0.1", where.port)
    try:
        http.request("POST", where.path, body=call.body, headers=dict(call.headers))
        response = http.getresponse()
        return response.status, response.read()
    finally:
        http.close()


def _renumbered(call: WireCall, request_id: int | str) -> WireCall:
    body = json.dumps({**json.loads(call.body), "id": request_id}).encode()
    return dataclasses.replace(call, body=body, request_id=request_id, status=None)


def test_the_keyed_mirror_answers_each_request_id_with_its_kept_result(tmp_path: Path) -> None:
    tools, results = tmp_path / "tools.json", tmp_path / "results.json"
    tools.write_text(json.dumps([TOOL]), "utf-8")
    results.write_text(json.dumps({request_key(i): _kept(i) for i in IDS}), "utf-8")
    calls = [("demo.start", {"workflow": "research"}), ("demo.start", {"workflow": "other"})]
    with http_process(mirror_server(tools, tmp_path / "mirror.log", results)) as mirror:
        wire = anyio.run(capture, mirror.url, calls)  # the SDK client, every check on every reply
        for call in wire:
            assert json.loads(call.result)["structuredContent"]["step"] == f"step-{call.request_id}"
        with LoadGenerator(mirror.url, wire, clients=2, processes=1) as load:
            _, latencies, _ = load.round()  # the load client's replayed bytes, every reply checked
        assert len(latencies) == 2 * len(wire)
        assert isinstance(wire[0].request_id, int)
        for unknown in (99, str(wire[0].request_id)):  # no result kept: "3" is not 3
            call = _renumbered(wire[0], unknown)
            problem = check_reply(call, *_post(mirror.url, call))
            assert problem is not None and "a tool error" in problem
