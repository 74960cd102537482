"""A request sent without an id (``tools/call`` with no ``id``) is named in the server's log, once per session.

JSON-RPC reads such a message as a notification: ``rimthan-mcp serve`` over Streamable HTTP accepts it (202,
no body) and, as the spec requires, answers nothing and runs nothing. Before, nothing said so anywhere; now one
warning line (``CALL_WITHOUT_ID``, naming the method) per session, or, stateless, per client host. Over stdio
(one client) the line is said once per process (``stdio_guard.CALL_WITHOUT_ID``); it was silent there. A real
server process and raw POSTs (no SDK client sends a request without an id); a second client host
(127.0.0.2, a loopback source address) marks where the first one's line would have been.
"""

from __future__ import annotations

import http.client
import json
import re
import subprocess
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
from rimthan_workflow_mcp import stdio_guard
from rimthan_workflow_mcp.http_shape import CALL_WITHOUT_ID
from support.processes import HttpServer
from support.servers import RIMTHAN_MCP, ServerWorld, http_server, serve_args, server_env
from test_server_http import INITIALIZE

WAIT = 60.0
CALL = {"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "rimthan.start_workflow", "arguments": {}}}
HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
}
OTHER_HOST = "127.0.0.2"


def _post(
    server: HttpServer,
    message: object,
    *,
    session: str | None = None,
    source: str = "127.0.0.1",
    version: str = "2025-11-25",
) -> tuple[int, dict[str, str], bytes]:
    url = urllib.parse.urlsplit(server.url)
    connection = http.client.HTTPConnection(url.hostname or "", url.port, timeout=WAIT, source_address=(source, 0))
    headers = {**HEADERS, "MCP-Protocol-Version": version, **({"Mcp-Session-Id": session} if session else {})}
    try:
        connection.request("POST", url.path, json.dumps(message).encode(), headers)
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def _told(server: HttpServer) -> list[dict[str, object]]:
    lines = (json.loads(line) for line in server.lines if CALL_WITHOUT_ID in line)
    return [line for line in lines if line["event"] == CALL_WITHOUT_ID]


@pytest.fixture
def stateless(mcp_world: ServerWorld, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    args = serve_args(mcp_world, mcp_world.built["1.2.0"], state_dir=tmp_path_factory.mktemp("no-id-state"))
    with http_server(args) as server:
        yield server


@pytest.fixture
def sessions(mcp_world: ServerWorld, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    state = tmp_path_factory.mktemp("no-id-sessions-state")
    with http_server(serve_args(mcp_world, mcp_world.built["1.2.0"], state_dir=state, extra=("--http-sessions",))) as s:
        yield s


def _after_the_other_host_is_told(server: HttpServer, session: str | None = None) -> list[dict[str, object]]:
    """Every line telling of a request without an id, once the other host's (sent last) is in the log."""
    assert _post(server, CALL, session=session, source=OTHER_HOST)[0] == 202
    server.wait_for(re.escape(CALL_WITHOUT_ID[:40]) + rf'.*"peer": "{re.escape(OTHER_HOST)}:')
    return _told(server)


def test_stateless_a_call_without_id_is_accepted_unanswered_and_named_once_per_client(stateless: HttpServer) -> None:
    for version in ("2025-11-25", "2026-07-28", "2025-11-25"):  # both eras accept it
        status, _, body = _post(stateless, CALL, version=version)
        assert (status, body) == (202, b"")  # a notification: accepted, never answered
    assert _post(stateless, {"jsonrpc": "2.0", "method": "notifications/initialized"})[0] == 202
    told = _after_the_other_host_is_told(stateless)
    assert [(line["level"], line["method"]) for line in told] == [("warning", "tools/call")] * 2, told
    assert [str(line["peer"]).split(":")[0] for line in told] == ["127.0.0.1", OTHER_HOST]
    status, _, body = _post(stateless, {**CALL, "id": 7})  # the same call with an id is answered
    assert status == 200 and json.loads(body)["id"] == 7


def test_with_sessions_a_call_without_id_is_named_once_per_session(sessions: HttpServer) -> None:
    opened = []
    for _ in range(2):
        status, headers, _ = _post(sessions, INITIALIZE)
        assert status == 200, headers
        opened.append(headers["mcp-session-id"])
        assert _post(sessions, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session=opened[-1])[0] == 202
    for session in opened:
        for _ in range(2):
            assert _post(sessions, CALL, session=session)[:1] == (202,)
    status, headers, _ = _post(sessions, INITIALIZE, source=OTHER_HOST)
    assert status == 200, headers
    told = _after_the_other_host_is_told(sessions, headers["mcp-session-id"])
    assert [line["method"] for line in told] == ["tools/call"] * 3, told  # two sessions, and the other host's


def test_over_stdio_a_call_without_id_is_named_once_and_the_next_request_answered(
    mcp_world: ServerWorld, tmp_path: Path
) -> None:
    """The installed console script over pipes: two requests without an id (a ``tools/call``, a ``tools/list``),
    one warning naming the first; the request with an id after them is answered, and nothing else is."""
    args = serve_args(mcp_world, mcp_world.built["1.2.0"], state_dir=tmp_path / "state")[2:]  # after "-m MODULE"
    lines = [INITIALIZE, {"jsonrpc": "2.0", "method": "notifications/initialized"}, CALL]
    lines += [{"jsonrpc": "2.0", "method": "tools/list"}, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}]
    done = subprocess.run(
        [RIMTHAN_MCP, *args],
        input="".join(json.dumps(line) + "\n" for line in lines),
        capture_output=True,
        text=True,
        timeout=WAIT,
        env=server_env(),
    )
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["id"] for line in done.stdout.splitlines()] == [INITIALIZE["id"], 2]
    said = [json.loads(line) for line in done.stderr.splitlines() if stdio_guard.CALL_WITHOUT_ID in line]
    assert [(line["level"], line["method"]) for line in said] == [("warning", "tools/call")], done.stderr
