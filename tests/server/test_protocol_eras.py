"""A client offering a revision that allows JSON-RPC batches is answered with one that does not, on both transports.

MCP 2024-11-05 and 2025-03-26 allow batches; 2025-06-18 removed them, and this
server refuses a batch. Before, an ``initialize`` offering either old revision
was answered with that revision (the client was told its batches would be
served; each was then refused), and over HTTP an ``MCP-Protocol-Version`` of
either was served. Now the offer is answered with 2025-11-25 (the lifecycle's
version negotiation: a version the server supports, its latest), a batch
is refused as in every era served, and such a header is refused unread
(-32022). A real ``rimthan-mcp serve`` over stdio pipes and over Streamable
HTTP, raw JSON-RPC in and out.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.server.connection import Connection
from mcp.server.runner import ServerRunner
from mcp.shared.direct_dispatcher import create_direct_dispatcher_pair
from rimthan_workflow_mcp.message_shape import BATCH_REFUSED
from rimthan_workflow_mcp.server import create_mcp_application
from support.processes import HttpServer
from support.raw_http import raw_post
from support.servers import RIMTHAN_MCP, ServerWorld, serve_args, server_env

WAIT = 60.0
SERVED = "2025-11-25"
BATCH = [{"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"jsonrpc": "2.0", "id": 2, "method": "ping"}]


def _initialize(offered: str) -> dict[str, Any]:
    params = {"protocolVersion": offered, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
    return {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}


def _stdio_session(world: ServerWorld, state: Path, offered: str) -> list[dict[str, Any]]:
    lines = [
        _initialize(offered),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        BATCH,
        {"jsonrpc": "2.0", "id": 3, "method": "ping"},
    ]
    command = [RIMTHAN_MCP, *serve_args(world, world.built["1.2.0"], state_dir=state)[2:]]
    done = subprocess.run(
        command,
        input="".join(json.dumps(line) + "\n" for line in lines).encode(),
        capture_output=True, timeout=WAIT, env=server_env(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return [json.loads(line) for line in done.stdout.splitlines()]


@pytest.mark.parametrize(("offered", "control"), [("2024-11-05", "2025-06-18"), ("2025-03-26", SERVED)])
def test_over_stdio_a_batch_era_offer_is_answered_with_a_served_version_and_a_batch_still_refused(
    mcp_world: ServerWorld, tmp_path: Path, offered: str, control: str
) -> None:
    """``control``: a served revision offered is answered with itself, as before."""
    for asked, answered in ((offered, SERVED), (control, control)):
        initialized, refused, pong = _stdio_session(mcp_world, tmp_path / "state", asked)
        assert initialized["id"] == 0 and initialized["result"]["protocolVersion"] == answered, initialized
        invalid = {"code": types.INVALID_REQUEST, "message": BATCH_REFUSED}
        assert refused == {"jsonrpc": "2.0", "id": None, "error": invalid}, refused
        assert pong == {"jsonrpc": "2.0", "id": 3, "result": {}}


@pytest.mark.parametrize("offered", ["2024-11-05", "2025-03-26"])
def test_over_http_a_batch_era_offer_is_answered_with_a_served_version_and_its_header_still_served(
    mcp_http: HttpServer, offered: str
) -> None:
    """The header naming a batch era is served as before: the MCP conformance suite sends
    ``MCP-Protocol-Version: 2025-03-26`` on requests inside a session it initialized at 2025-11-25."""
    for header in (SERVED, None):  # a 2025-03-26 client sends no MCP-Protocol-Version header at all
        status, answer = raw_post(mcp_http, json.dumps(_initialize(offered)), header)
        assert status == 200 and answer is not None, answer
        assert answer["result"]["protocolVersion"] == SERVED, answer
    status, answer = raw_post(mcp_http, json.dumps(BATCH[0]), offered)
    assert status == 200 and answer is not None and answer["id"] == BATCH[0]["id"] and "result" in answer, answer
    status, answer = raw_post(mcp_http, json.dumps(BATCH), SERVED)
    assert status == 400 and answer == {
        "jsonrpc": "2.0", "id": None, "error": {"code": types.INVALID_REQUEST, "message": BATCH_REFUSED}
    }, answer  # fmt: skip


@pytest.mark.parametrize("offered", ["2024-11-05", "2025-03-26"])
def test_the_version_the_handshake_commits_is_the_one_answered(
    mcp_world: ServerWorld, tmp_path: Path, offered: str
) -> None:
    """The SDK commits the version it reads from the request's own params after the middleware chain: the
    connection then serves (validates, shapes, gates logs) at that version. The real server object, in process
    (the connection's version is seen nowhere on the wire)."""

    async def handshake() -> tuple[str, str]:
        app = create_mcp_application(mcp_world.provider("1.2.0", state_dir=tmp_path / "state"))
        client, server = create_direct_dispatcher_pair()
        connection = Connection.for_loop(server)
        runner = ServerRunner(app, connection, None)
        async with anyio.create_task_group() as tg:
            await tg.start(server.run, runner.on_request, runner.on_notify)
            await tg.start(client.run, _refuse_request, _drop_notification)
            result = await client.send_raw_request("initialize", _initialize(offered)["params"])
            client.close()
            server.close()
        return result["protocolVersion"], connection.protocol_version

    assert anyio.run(handshake) == (SERVED, SERVED)


async def _refuse_request(*_: Any) -> dict[str, Any]:
    raise AssertionError("the server sent the client a request")


async def _drop_notification(*_: Any) -> None:
    return None
