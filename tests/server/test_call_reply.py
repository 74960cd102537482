"""A ``tools/call`` reply reaches the SDK as the dict its model dumps to: the SDK does not dump the model again.

The SDK shapes a handler's model in two passes (a ``model_dump`` of the whole
result, then a check and dump against the era's result schema); a dict skips
the first. ``call_reply.wire_reply`` writes call_tool's one result shape as that
dump would; these tests hold it to the dump on every result of packaged runs
(steps, questions, failures, refusals) and in every era the SDK serves, and
serve a whole run through the real server object and the SDK's own runner, with
no result model dumped on the way (one per call before).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.server.connection import Connection
from mcp.server.runner import ServerRunner
from mcp.shared.direct_dispatcher import create_direct_dispatcher_pair
from mcp_types import methods
from mcp_types.version import LATEST_HANDSHAKE_VERSION
from rimthan_workflow_mcp.call_reply import wire_reply
from rimthan_workflow_mcp.server import call_tool, create_mcp_application, domain_tool_error, runtime_state
from rimthan_workflow_registry.errors import FailureCode, RegistryError
from support.servers import ServerWorld, build_world, harness

ERAS = ("2025-06-18", "2025-11-25", "2026-07-28")  # every era a tools/call reply is shaped for (handshake, modern)
DUMP: dict[str, Any] = {"by_alias": True, "mode": "json", "exclude_none": True}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("call-reply-world"))


def _assert_same_reply(result: types.CallToolResult) -> None:
    """``wire_reply`` is the model's dump, and the SDK sends the same for either in every era."""
    reply = wire_reply(result)
    assert reply == result.model_dump(**DUMP)
    for era in ERAS:
        sent = methods.serialize_server_result("tools/call", era, reply)
        assert sent == methods.serialize_server_result("tools/call", era, result.model_dump(**DUMP)), era


@pytest.mark.parametrize(
    ("route", "fail_once"), [("desk-research", frozenset({"decision-critic"})), ("experiment", frozenset())]
)
def test_every_reply_of_a_packaged_run_is_the_models_dump(
    world: ServerWorld, tmp_path: Path, route: str, fail_once: frozenset[str]
) -> None:
    state = runtime_state(world.provider("1.2.0"))
    statuses: list[str] = []

    async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = call_tool(state, name, dict(arguments))
        _assert_same_reply(result)
        structured: dict[str, Any] = result.structured_content
        statuses.append(structured["status"])
        return structured

    async def go() -> None:
        run = harness(call, tmp_path / "project", route, fail_once)
        await run.run(await run.start("research", initial_version="1.2.0"))

    anyio.run(go)
    assert statuses[-1] == "completed"
    assert ("validation_failed" in statuses) == bool(fail_once)
    _assert_same_reply(call_tool(state, "rimthan.continue_workflow", {"checkpoint": "x.y.z", "confirmed_state": {}}))
    _assert_same_reply(domain_tool_error(RegistryError(FailureCode.INTERNAL_ERROR, "boom")))


@pytest.mark.parametrize(
    "result",
    [
        types.CallToolResult(
            content=[types.TextContent(text="a")], structured_content={"k": (1, None)}, _meta={"m": 1}
        ),
        types.CallToolResult(content=[types.TextContent(text="a"), types.TextContent(text="b")]),
        types.CallToolResult(content=[]),
        types.CallToolResult(content=[types.TextContent(text="a", annotations=types.Annotations(priority=0.5))]),
        types.CallToolResult(content=[types.TextContent(text="a", _meta={"m": 1})], is_error=True),
        types.CallToolResult(content=[types.TextContent(text="a")], structured_content=None),
    ],
    ids=["meta", "two-texts", "no-content", "annotated", "content-meta", "no-structured"],
)
def test_any_other_shape_is_the_models_dump_too(result: types.CallToolResult) -> None:
    assert wire_reply(result) == result.model_dump(**DUMP)


def test_a_served_run_dumps_no_result_model(
    world: ServerWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A packaged run and a refusal through the real server object and the SDK's runner: the replies the client
    reads are the tools' results, and no ``CallToolResult`` was dumped to make them (one dump per call before)."""
    dumped: list[str] = []
    model_dump = types.CallToolResult.model_dump

    def counted(self: types.CallToolResult, **options: Any) -> dict[str, Any]:
        dumped.append("CallToolResult")
        return model_dump(self, **options)

    monkeypatch.setattr(types.CallToolResult, "model_dump", counted)
    app = create_mcp_application(world.provider("1.2.0", state_dir=tmp_path / "state"))
    replies: list[dict[str, Any]] = []

    async def serve_run() -> None:
        client, server = create_direct_dispatcher_pair()
        runner = ServerRunner(app, Connection.for_loop(server), None)

        async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
            reply = await client.send_raw_request("tools/call", {"name": name, "arguments": arguments})
            replies.append(reply)
            structured: dict[str, Any] = reply["structuredContent"]
            return structured

        async with anyio.create_task_group() as tg:
            await tg.start(server.run, runner.on_request, runner.on_notify)
            await tg.start(client.run, _refuse_request, _drop_notification)
            hello = {"protocolVersion": LATEST_HANDSHAKE_VERSION, "capabilities": {}, "clientInfo": _CLIENT}
            await client.send_raw_request("initialize", hello)
            run = harness(call, tmp_path / "project")
            await run.run(await run.start("research", initial_version="1.2.0"))
            await call("rimthan.continue_workflow", {"checkpoint": "x.y.z", "confirmed_state": {}})
            client.close()
            server.close()

    anyio.run(serve_run)
    assert replies[-2]["structuredContent"]["status"] == "completed"
    assert replies[-1]["isError"] is True
    assert replies[-1]["structuredContent"]["error"]["code"] == "invalid_arguments"
    assert all(reply["content"][0]["text"] for reply in replies)
    assert dumped == []


_CLIENT = {"name": "call-reply-test", "version": "0"}


async def _refuse_request(*_: Any) -> dict[str, Any]:
    raise AssertionError("the server sent the client a request")


async def _drop_notification(*_: Any) -> None:
    return None
