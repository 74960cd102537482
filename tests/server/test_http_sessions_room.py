"""``--http-sessions`` with its session table full: one client's abandoned sessions lock no one else out.

A real ``rimthan-mcp serve --transport http --http-sessions`` process, its
session cap lowered to ``CAP`` (``session_room.MAX_SESSIONS``, set before the
server starts: the same code, a smaller number). Before ``session_room``, a
client that sent ``CAP`` initialize requests and walked away had every other
client refused with 503 "Too many open sessions" until the sessions' half hour
of idleness ran out (measured at the default cap: 10,000 initializes from one
connection, then every new client 503).
"""

from __future__ import annotations

import http.client
import json
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import pytest
from support.processes import HttpServer, http_server_process
from support.servers import ServerWorld, build_world, http_client_for, serve_args, server_env
from test_http_bounds import (
    _HONEST_HEADERS,
    INITIALIZE,
    TOOLS_LIST,
    WAIT,
    _answer,
    _connect,
    _head,
    _honest_exchange,
)

CAP = 3
LAUNCH = f"""
import runpy
import rimthan_workflow_mcp.session_room as room
room.MAX_SESSIONS = {CAP}
runpy.run_module("rimthan_workflow_mcp", run_name="__main__")
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("room-world"))


@contextmanager
def closing_all() -> Iterator[list[socket.socket]]:
    opened: list[socket.socket] = []
    try:
        yield opened
    finally:
        for sock in opened:
            sock.close()


@contextmanager
def _sessions_server(world: ServerWorld, state_dir: Path) -> Iterator[HttpServer]:
    args = serve_args(world, world.built["1.2.0"], state_dir=state_dir, extra=("--http-sessions",))
    argv = [sys.executable, "-c", LAUNCH, *args[2:], "--transport", "http", "--port", "0"]
    with http_server_process(argv, env=server_env()) as running:
        yield running


def _open_session(server: HttpServer) -> str:
    status, headers = _honest_exchange(server, INITIALIZE)
    assert status == 200, (status, headers)
    return headers["mcp-session-id"]


def _list_in(server: HttpServer, session: str) -> int:
    return _honest_exchange(server, TOOLS_LIST, (f"Mcp-Session-Id: {session}",))[0]


async def _real_client_lists_tools(url: str, mode: str = "auto") -> list[str]:
    async with http_client_for(url, mode=mode) as client:
        return [tool.name for tool in (await client.list_tools()).tools]


def test_a_full_table_closes_the_longest_idle_session_for_a_new_client(world: ServerWorld, tmp_path: Path) -> None:
    with _sessions_server(world, tmp_path) as server:
        abandoned = [_open_session(server) for _ in range(CAP)]  # initialize, then never come back
        assert _list_in(server, abandoned[1]) == 200  # used since: the first is now idle the longest
        newcomer = _open_session(server)  # was 503 "Too many open sessions"
        assert _list_in(server, abandoned[0]) == 404  # its client is told to initialize again
        assert _list_in(server, abandoned[1]) == 200 and _list_in(server, newcomer) == 200
        assert "rimthan.start_workflow" in anyio.run(_real_client_lists_tools, server.url)
        assert '"session closed to make room"' in server.stderr() and "Traceback" not in server.stderr()


def test_a_full_table_of_busy_sessions_still_refuses_a_new_one_in_one_json_rpc_line(
    world: ServerWorld, tmp_path: Path
) -> None:
    """A session with a stream open holds a connection: none is closed for a newcomer, who gets 503 until
    one is idle."""
    with _sessions_server(world, tmp_path) as server, closing_all() as sockets:
        streams = []
        for session in [_open_session(server) for _ in range(CAP)]:
            stream = _connect(server, sockets)
            stream.sendall(_head(server, "GET")[:-2] + f"Mcp-Session-Id: {session}\r\n\r\n".encode())
            assert _answer(stream)[0] == 200
            streams.append(stream)
        status, headers = _honest_exchange(server, INITIALIZE)
        assert (status, headers["content-type"]) == (503, "application/json")
        streams[0].close()  # that session is idle once the server sees the stream gone
        for _ in range(200):
            status, _ = _honest_exchange(server, INITIALIZE)
            if status == 200:
                break
            anyio.run(anyio.sleep, 0.05)
        assert status == 200
        assert "Traceback" not in server.stderr()


def _id_7_or_quoted(n: int) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": 7 if n % 2 else "7", "method": "resources/list"})


def _first_id_new_last_7(n: int) -> str:
    """A body whose ``id`` key stands twice: first an id of its own, then 7."""
    return json.dumps({"jsonrpc": "2.0", "id": 100 + n}).removesuffix("}") + ', "id": 7, "method": "resources/list"}'


def _same_id_at_once(
    server: HttpServer, session: str, count: int, body_of: Callable[[int], str] = _id_7_or_quoted
) -> list[tuple[int, bytes]]:
    """``count`` ``resources/list`` requests in ``session`` at once, the ``n``th ``body_of(n)`` (by default half
    with id 7, half with id "7")."""
    answers: list[tuple[int, bytes]] = []

    def one(n: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", urlsplit(server.url).port, timeout=WAIT)
        body = body_of(n)
        headers = dict(h.split(": ", 1) for h in (*_HONEST_HEADERS, f"Mcp-Session-Id: {session}"))
        try:
            connection.request("POST", "/mcp", body, headers)
            response = connection.getresponse()
            answers.append((response.status, response.read()))
        except TimeoutError:
            answers.append((0, b"unanswered"))
        finally:
            connection.close()

    threads = [threading.Thread(target=one, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def test_a_request_whose_id_is_still_being_answered_in_its_session_is_refused_never_left_waiting(
    world: ServerWorld, tmp_path: Path
) -> None:
    """The SDK gave the second request the first one's answer slot: all but a few waited for ever, each
    holding a slot of the requests in flight."""
    with _sessions_server(world, tmp_path) as server:
        session = _open_session(server)
        answers = _same_id_at_once(server, session, 20)
        assert all(status in (200, 400) for status, _ in answers), answers
        for status, body in answers:
            if status == 400:
                error = json.loads(body)
                assert error["id"] is None and error["error"]["code"] == -32600, error
                assert error["error"]["message"].startswith('a request with id "7" is still being answered'), error
        assert _list_in(server, session) == 200  # the session goes on, and so do others
        assert "rimthan.start_workflow" in anyio.run(_real_client_lists_tools, server.url)
        assert "Traceback" not in server.stderr()


def test_an_id_key_written_twice_is_read_as_the_sdk_reads_it_its_last_value(world: ServerWorld, tmp_path: Path) -> None:
    """A body whose ``id`` key stands twice, the first a new id each time, the last 7: the SDK keys its answer by
    the last, the id check read the first, so every such request got past it onto one answer slot, and waited."""
    with _sessions_server(world, tmp_path) as server:
        session = _open_session(server)
        answers = _same_id_at_once(server, session, 20, _first_id_new_last_7)
        assert all(status in (200, 400) for status, _ in answers), answers
        for status, body in answers:
            if status == 400:
                message = json.loads(body)["error"]["message"]
                assert message.startswith('a request with id "7" is still being answered'), message
        assert _list_in(server, session) == 200
        assert "Traceback" not in server.stderr()


def _without_session(server: HttpServer, method: str, body: bytes | None) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", urlsplit(server.url).port, timeout=WAIT)
    try:
        connection.request(method, "/mcp", body, dict(h.split(": ", 1) for h in _HONEST_HEADERS))
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


_NOT_AN_INITIALIZE = [
    ("POST", TOOLS_LIST),
    ("POST", b""),
    ("POST", b"not json {"),
    ("POST", json.dumps([json.loads(TOOLS_LIST)]).encode()),
    ("GET", None),
    ("DELETE", None),
]


def test_a_request_without_a_session_id_that_is_no_initialize_holds_no_session_and_closes_none(
    world: ServerWorld, tmp_path: Path
) -> None:
    """With the table full of idle sessions, requests without an ``Mcp-Session-Id`` that are no initialize are
    refused 400 with no session id, and close no one's session to make room: only an initialize opens one."""
    with _sessions_server(world, tmp_path) as server:
        held = [_open_session(server) for _ in range(CAP)]
        for _ in range(CAP + 2):
            for method, body in _NOT_AN_INITIALIZE:
                status, headers, answer = _without_session(server, method, body)
                assert status == 400 and "mcp-session-id" not in headers, (method, body, status, headers, answer)
                assert json.loads(answer)["error"]["code"] in (-32600, -32700), answer
        assert [_list_in(server, session) for session in held] == [200] * CAP  # none closed for them
        assert "rimthan.start_workflow" in anyio.run(_real_client_lists_tools, server.url, "legacy")  # 2025-11-25
        closed = [json.loads(line) for line in server.lines if '"session closed to make room"' in line]
        assert [line["sessions"] for line in closed] == [CAP]  # the real client's initialize, at a table of CAP
        assert "Traceback" not in server.stderr()
