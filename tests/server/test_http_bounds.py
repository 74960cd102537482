"""HTTP clients that do not play fair: what one client can hold on a real server, and the bounds on it.

Each test drives a real ``rimthan-mcp serve --transport http`` process with raw
sockets. The process starts through ``python -c`` that shortens
``http_bounds``' deadlines and cap (the same code, smaller numbers, so the
tests wait seconds, not minutes) and lowers its open-file limit to
``FD_LIMIT`` (what it would take ~20,000 connections to reach at the default).
On code without ``http_bounds`` the numbers are not set and every test but the
last fails, at a wrong answer or a bounded wait, never by hanging; the last
(session streams) guards the cap itself, which once counted them.
"""

from __future__ import annotations

import http.client
import json
import os
import select
import socket
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import mcp_types as types
import pytest
from support.processes import http_server_process
from support.servers import HttpServer, ServerWorld, build_world, serve_args, server_env
from test_server_http import INITIALIZE as INITIALIZE_REQUEST

HEAD_SECONDS, BODY_SECONDS, MAX_IN_FLIGHT, FD_LIMIT, LINGER_SECONDS = 2.0, 3.0, 4, 64, 2.0
WAIT = 20.0  # every wait in this module ends by this many seconds
LAUNCH = f"""
import importlib.util, resource, runpy
resource.setrlimit(resource.RLIMIT_NOFILE, ({FD_LIMIT}, {FD_LIMIT}))
if importlib.util.find_spec("rimthan_workflow_mcp.http_bounds"):
    import rimthan_workflow_mcp.http_bounds as bounds
    bounds.HEAD_SECONDS, bounds.BODY_SECONDS = {HEAD_SECONDS}, {BODY_SECONDS}
    bounds.MAX_REQUESTS_IN_FLIGHT = {MAX_IN_FLIGHT}
    bounds.LINGER_SECONDS = {LINGER_SECONDS}
runpy.run_module("rimthan_workflow_mcp", run_name="__main__")
"""
TOOLS_LIST = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
INITIALIZE = json.dumps(INITIALIZE_REQUEST).encode()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("bounds-world"))


@contextmanager
def _bounded_server(world: ServerWorld, state_dir: Path, *extra: str) -> Iterator[HttpServer]:
    args = serve_args(world, world.built["1.2.0"], state_dir=state_dir, extra=extra)
    assert args[:2] == ["-m", "rimthan_workflow_mcp"]
    argv = [sys.executable, "-c", LAUNCH, *args[2:], "--transport", "http", "--port", "0"]
    with http_server_process(argv, env=server_env()) as running:
        yield running


@pytest.fixture(scope="module")
def server(world: ServerWorld, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    with _bounded_server(world, tmp_path_factory.mktemp("bounds-state")) as running:
        yield running


@pytest.fixture
def sockets() -> Iterator[list[socket.socket]]:
    """The test's raw connections, closed at its end whatever happened (a failure must not leak them)."""
    opened: list[socket.socket] = []
    yield opened
    for sock in opened:
        sock.close()


def _port(server: HttpServer) -> int:
    return int(server.url.rsplit(":", 1)[1].split("/")[0])


def _fds(server: HttpServer) -> int:
    return len(os.listdir(f"/proc/{server.pid}/fd"))


def _connect(server: HttpServer, opened: list[socket.socket], timeout: float = WAIT) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", _port(server)), timeout=timeout)
    opened.append(sock)
    return sock


def _head(server: HttpServer, method: str, length: int | None = None) -> bytes:
    lines = [
        f"{method} /mcp HTTP/1.1",
        f"Host: 127.0.0.1:{_port(server)}",
        "Accept: application/json, text/event-stream",
        "Content-Type: application/json",
        "MCP-Protocol-Version: 2025-11-25",
    ]
    lines += [] if length is None else [f"Content-Length: {length}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _answer(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body of the one answer on ``sock`` (a ``WAIT`` timeout fails the test).

    An SSE stream's body is not read: it never ends."""
    response = http.client.HTTPResponse(sock)
    response.begin()
    headers = {k.lower(): v for k, v in response.getheaders()}
    stream = headers.get("content-type", "").startswith("text/event-stream")
    return response.status, headers, b"" if stream else response.read()


def _is_json_rpc_refusal(headers: dict[str, str], body: bytes) -> bool:
    """An answer a client reads as JSON-RPC: ``Invalid Request``, ``id`` null (it was a bare text line)."""
    if headers.get("content-type") != "application/json":
        return False
    answer = json.loads(body)
    return set(answer) == {"jsonrpc", "id", "error"} and (answer["id"], answer["error"]["code"]) == (None, -32600)


def _honest_call(server: HttpServer, body: bytes = TOOLS_LIST) -> int:
    """What an honest client's ``tools/list`` (or ``body``) gets (its status), on a new connection."""
    return _honest_exchange(server, body)[0]


def _honest_exchange(server: HttpServer, body: bytes, headers: Sequence[str] = ()) -> tuple[int, dict[str, str]]:
    connection = http.client.HTTPConnection("127.0.0.1", _port(server), timeout=WAIT)
    try:
        connection.request("POST", "/mcp", body, dict(h.split(": ", 1) for h in (*_HONEST_HEADERS, *headers)))
        response = connection.getresponse()
        response.read()
        return response.status, {k.lower(): v for k, v in response.getheaders()}
    finally:
        connection.close()


_HONEST_HEADERS = (
    "Accept: application/json, text/event-stream",
    "Content-Type: application/json",
    "MCP-Protocol-Version: 2025-11-25",
)


def _closed_by_server(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def _dripped_until_closed(dripping: list[socket.socket], first: bytes = b"") -> list[socket.socket]:
    """Send ``first``, then one byte a beat on each connection (no head ever ends) until the server closes
    them all or ``WAIT`` passes; the ones still open."""
    for sock in dripping:
        sock.sendall(first)
    deadline = time.monotonic() + WAIT
    while dripping and time.monotonic() < deadline:
        for sock in list(dripping):
            try:
                sock.sendall(b"a")
            except OSError:
                dripping.remove(sock)
        time.sleep(0.5)
    return dripping


def _eventually(check: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return False


def test_stateless_get_and_delete_get_405_and_hold_no_stream(server: HttpServer, sockets: list[socket.socket]) -> None:
    """Old code: GET is answered 200 text/event-stream and the stream stays open while the client holds it."""
    assert _honest_call(server) == 200
    before = _fds(server)
    for method in ["GET", "DELETE"] * 20:  # the client keeps every connection open
        sock = _connect(server, sockets)
        sock.sendall(_head(server, method))
        status, headers, body = _answer(sock)
        assert status == 405 and headers.get("allow") == "POST", (status, headers, body)
        assert _is_json_rpc_refusal(headers, body), (headers, body)
    # the server lets them go on its own (the kept-alive connection's next head never comes)
    assert _eventually(lambda: _fds(server) <= before), f"{_fds(server)} fds open, {before} before"
    assert _honest_call(server) == 200


def test_every_method_a_stateless_server_refuses_names_the_same_allow(
    server: HttpServer, sockets: list[socket.socket]
) -> None:
    """Old code: PUT got the SDK's 405 with ``Allow: GET, POST, DELETE``, methods GET and DELETE then refuse."""
    for method in ("PUT", "PATCH", "GET", "DELETE"):
        sock = _connect(server, sockets)
        sock.sendall(_head(server, method))
        status, headers, body = _answer(sock)
        assert status == 405 and headers.get("allow") == "POST", (method, status, headers, body)
        assert _is_json_rpc_refusal(headers, body), (method, headers, body)


def test_request_heads_never_finished_past_the_open_file_limit_are_cut_off(
    server: HttpServer, sockets: list[socket.socket]
) -> None:
    """Old code: 70 heads never finished (idle, then dripped) hold every descriptor for ever; an honest call
    waits in the listen backlog and is never answered."""
    for _ in range(FD_LIMIT + 6):
        _connect(server, sockets, timeout=0.5).sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Drip: ")
    assert _honest_call(server) == 200  # answered once the heads' deadline frees descriptors
    assert _dripped_until_closed(list(sockets)) == []


def test_the_next_head_dripped_on_a_kept_alive_connection_is_cut_off(
    server: HttpServer, sockets: list[socket.socket]
) -> None:
    """Old code: uvicorn's 5 s keep-alive timer stops at the next request's first byte; then nothing ends it."""
    sock = _connect(server, sockets)
    sock.sendall(_head(server, "POST", len(TOOLS_LIST)) + TOOLS_LIST)
    assert _answer(sock)[0] == 200
    assert _dripped_until_closed([sock], b"POST /mcp HTTP/1.1\r\nX-Drip: ") == []


@pytest.mark.parametrize("how", ["stalled", "dripped"])
def test_a_body_that_does_not_arrive_in_time_gets_408(
    server: HttpServer, sockets: list[socket.socket], how: str
) -> None:
    """Old code: the server waits for the rest of the body for ever (holding the 8 MiB that came)."""
    sock = _connect(server, sockets)
    if how == "stalled":  # 8 MiB of a declared 16 MiB, then nothing: the SDK buffers what came
        sock.sendall(_head(server, "POST", 16 << 20) + b" " * (8 << 20))
    else:
        sock.sendall(_head(server, "POST", len(TOOLS_LIST)) + TOOLS_LIST[:1])
    assert _honest_call(server) == 200  # others are served meanwhile
    for byte in TOOLS_LIST[1:-1] if how == "dripped" else b"":  # one byte a beat, the last never
        if select.select([sock], [], [], 0.2)[0]:  # answered: stop before a write on a closed connection
            break
        sock.sendall(bytes([byte]))
    status, headers, body = _answer(sock)
    assert (status, headers["connection"]) == (408, "close"), body
    assert _is_json_rpc_refusal(headers, body), (headers, body)
    said = json.loads(body)["error"]["message"]  # the deadline in force (it said the one at import: 120 s)
    assert said.startswith(f"the request body did not arrive within {BODY_SECONDS:g} s of its head"), said
    assert _closed_by_server(sock)


@pytest.mark.parametrize(
    ("head", "status"),
    [
        (b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n\r\n", 431),
        (b"NOT HTTP AT ALL\r\n\r\n", 400),
    ],
    ids=["head-past-its-bound", "not-http"],
)
def test_a_head_h11_refuses_gets_a_json_rpc_error(
    server: HttpServer, sockets: list[socket.socket], head: bytes, status: int
) -> None:
    """Old code: uvicorn's bare ``text/plain`` 400 "Invalid HTTP request received.", for a head too large too."""
    sock = _connect(server, sockets)
    sock.sendall(head)
    got, headers, body = _answer(sock)
    assert (got, headers["connection"]) == (status, "close"), (headers, body)
    assert _is_json_rpc_refusal(headers, body), (headers, body)
    assert _honest_call(server) == 200


def test_the_rest_of_a_body_answered_413_is_discarded_for_a_bounded_time(
    server: HttpServer, sockets: list[socket.socket]
) -> None:
    """Old code: after the 413 uvicorn reads and discards what the client still sends, for as long as it sends."""
    sock = _connect(server, sockets)
    sock.sendall(_head(server, "POST", 64 << 20))  # past the body bound: answered before any of it is read
    status, headers, body = _answer(sock)
    assert (status, headers["content-type"]) == (413, "application/json"), body
    assert _dripped_until_closed([sock]) == []  # the body dripped after the answer: cut off
    assert _honest_call(server) == 200


def test_requests_beyond_the_cap_in_flight_get_503_unread(server: HttpServer, sockets: list[socket.socket]) -> None:
    """Old code: no cap: every request's body is buffered (up to 16.5 MiB each) and waited on for ever."""
    for _ in range(MAX_IN_FLIGHT):  # each holds a slot until its body's deadline
        _connect(server, sockets).sendall(_head(server, "POST", 16 << 20) + b" " * 65536)
    held = list(sockets)
    time.sleep(0.5)
    over = _connect(server, sockets)
    over.sendall(_head(server, "POST", 16 << 20))
    status, headers, body = _answer(over)
    assert (status, headers["retry-after"], headers["connection"]) == (503, "1", "close")
    assert _is_json_rpc_refusal(headers, body), (headers, body)
    assert [_answer(sock)[0] for sock in held] == [408] * MAX_IN_FLIGHT  # the deadline frees the slots
    assert _honest_call(server) == 200


def test_session_streams_held_open_take_no_slot_from_calls(
    world: ServerWorld, tmp_path: Path, sockets: list[socket.socket]
) -> None:
    """With ``--http-sessions`` a GET stream lives as long as its client wants: counted, more than the cap
    of them held open would leave every call a 503."""
    with _bounded_server(world, tmp_path, "--http-sessions") as sessions:
        for _ in range(MAX_IN_FLIGHT + 1):
            status, headers = _honest_exchange(sessions, INITIALIZE)
            assert status == 200, headers
            stream = _connect(sessions, sockets)
            stream.sendall(
                _head(sessions, "GET")[:-2] + f"Mcp-Session-Id: {headers['mcp-session-id']}\r\n\r\n".encode()
            )
            status, headers, _ = _answer(stream)
            assert (status, headers["content-type"].split(";")[0]) == (200, "text/event-stream")
        assert _honest_call(sessions, INITIALIZE) == 200


def test_a_session_stream_asked_with_a_protocol_version_not_served_is_refused_as_a_post_is(
    world: ServerWorld, tmp_path: Path, sockets: list[socket.socket]
) -> None:
    """With ``--http-sessions`` a GET went to the SDK before the header checks: an unknown
    MCP-Protocol-Version took its 2026-07-28 path (a 400 about ``params._meta``), not the version refusal."""
    with _bounded_server(world, tmp_path, "--http-sessions") as sessions:
        status, headers = _honest_exchange(sessions, INITIALIZE)
        assert status == 200, headers
        stream = _connect(sessions, sockets)
        head = _head(sessions, "GET").replace(b"MCP-Protocol-Version: 2025-11-25", b"MCP-Protocol-Version: 1999-01-01")
        stream.sendall(head[:-2] + f"Mcp-Session-Id: {headers['mcp-session-id']}\r\n\r\n".encode())
        status, answer_headers, body = _answer(stream)
        assert (status, answer_headers["content-type"]) == (400, "application/json"), (status, answer_headers)
        error = json.loads(body)["error"]
        assert error["code"] == types.UNSUPPORTED_PROTOCOL_VERSION and error["data"]["requested"] == "1999-01-01", error
