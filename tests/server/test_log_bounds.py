"""What a peer can make the server log: one JSON line each, of bounded length, never a traceback.

Each test drives a real ``rimthan-mcp serve --transport http`` process (the
launcher of ``test_http_bounds``: short deadlines, an open-file limit of
``FD_LIMIT``) with raw sockets and reads what it wrote to stderr. On the old
code a client gone mid-body and the open-file limit each logged a traceback
(the latter up to 128 times at once, every second), and a client's ``Host``,
``Origin`` or tool name went into the log whole (60 KiB and more per line).
"""

from __future__ import annotations

import errno
import json
import logging
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from rimthan_workflow_mcp.logs import JsonFormatter
from rimthan_workflow_registry.errors import QUOTE_MAX_CHARS
from starlette.requests import ClientDisconnect
from support.servers import HttpServer, ServerWorld, build_world, serve_args, server_env
from test_http_bounds import FD_LIMIT, WAIT, _bounded_server, _connect, _head, _honest_call, _honest_exchange, _port
from test_http_bounds import sockets as sockets  # the fixture: raw connections closed at the test's end
from test_server_http import INITIALIZE

MAX_LINE = 4096  # every stderr line stays under this (the longest, the start-up "loaded" record, is ~1.2 KB)
LONG = "h" * 60_000 + "\x1b[2J"  # a header line just under uvicorn's limit, ending in a terminal escape


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("log-world"))


@pytest.fixture(scope="module")
def server(world: ServerWorld, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    with _bounded_server(world, tmp_path_factory.mktemp("log-state")) as running:
        yield running


def _records(server: HttpServer, event: str) -> list[dict[str, Any]]:
    lines = [line for line in list(server.lines) if line.startswith("{")]
    return [record for record in map(json.loads, lines) if event in record["event"]]


def _record(server: HttpServer, event: str) -> dict[str, Any]:
    """The first JSON record whose event holds ``event`` (waits up to ``WAIT`` s for it)."""
    deadline = time.monotonic() + WAIT
    while not _records(server, event) and time.monotonic() < deadline:
        time.sleep(0.05)
    found = _records(server, event)
    assert found, f"no record {event!r}:\n{server.stderr()[:4000]}"
    return found[0]


def _assert_bounded(server: HttpServer) -> None:
    assert "Traceback" not in server.stderr(), server.stderr()[:4000]
    long = [line[:200] for line in server.lines if len(line) > MAX_LINE]
    assert long == [], long


def test_a_client_gone_mid_body_is_one_line_naming_it(server: HttpServer, sockets: list[socket.socket]) -> None:
    """Old code: "Error handling POST request" with the whole ClientDisconnect traceback under ``exc``."""
    sock = _connect(server, sockets)
    sock.sendall(_head(server, "POST", 100) + b'{"jsonrpc"')
    host, port = sock.getsockname()[:2]
    time.sleep(0.2)  # let the server take the head before the client leaves
    sock.close()
    record = _record(server, "Error handling POST request")
    assert record["exc"] == "ClientDisconnect: " and record.get("peer") == f"{host}:{port}", record
    _assert_bounded(server)


def test_the_open_file_limit_is_logged_at_most_once_a_second(server: HttpServer, sockets: list[socket.socket]) -> None:
    """Old code: asyncio's "accept() out of system resource" with its traceback, once per connection waiting
    (up to the listen backlog at once), again every second while the limit holds."""
    for _ in range(FD_LIMIT + 6):
        _connect(server, sockets, timeout=0.5)
    assert _record(server, "out of system resource")["exc"] == "OSError: [Errno 24] Too many open files"
    for sock in sockets:
        sock.close()
    assert _honest_call(server) == 200
    times = [_at(record) for record in _records(server, "out of system resource")]
    # one record a second at most (``ts`` is cut to the millisecond: 0.99 leaves room for that)
    assert all(later - earlier >= 0.99 for earlier, later in zip(times, times[1:], strict=False)), times
    _assert_bounded(server)


def _at(record: dict[str, Any]) -> float:
    return datetime.strptime(record["ts"], "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()


@pytest.mark.parametrize(("header", "event"), [("Host", "Invalid Host header"), ("Origin", "Invalid Origin header")])
def test_a_long_host_or_origin_is_logged_cut(
    server: HttpServer, sockets: list[socket.socket], header: str, event: str
) -> None:
    """Old code: the SDK's warning quoted the whole header: a 60 KiB log line per request."""
    head = _head(server, "POST", 2).decode()
    if header == "Host":
        head = head.replace(f"Host: 127.0.0.1:{_port(server)}", f"Host: {LONG}")
    else:
        head = head.replace("\r\n\r\n", f"\r\nOrigin: http://{LONG}\r\n\r\n")
    sock = _connect(server, sockets)
    sock.sendall(head.encode() + b"{}")
    assert sock.recv(12) in (b"HTTP/1.1 421", b"HTTP/1.1 403")
    record = _record(server, event)
    assert record["event"].endswith(" chars, cut]") and len(record["event"]) < 2 * QUOTE_MAX_CHARS, record
    assert "peer" in record
    _assert_bounded(server)


def test_a_long_tool_name_is_logged_cut(server: HttpServer) -> None:
    """Old code: "tool refused" quoted the client's tool name whole (here 100,000 characters)."""
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "y" * 100_000, "arguments": {}}}
    status, _ = _honest_exchange(server, json.dumps(call).encode())
    assert status == 200
    record = _record(server, "tool refused")
    assert record["tool"].endswith("[100000 chars, cut]") and len(record["tool"]) < 2 * QUOTE_MAX_CHARS, record
    _assert_bounded(server)


def test_a_long_tool_name_over_stdio_is_logged_cut(world: ServerWorld, tmp_path: Path) -> None:
    """The same over stdio (the client's own process would read the 100,000 characters from its stderr)."""
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "y" * 100_000, "arguments": {}}}
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    wire = "".join(json.dumps(message) + "\n" for message in (INITIALIZE, initialized, call))
    args = serve_args(world, world.built["1.2.0"], state_dir=tmp_path / "state")
    done = subprocess.run(
        [sys.executable, *args, "--transport", "stdio"], input=wire, capture_output=True, text=True,
        env=server_env(), timeout=WAIT, check=False,
    )  # fmt: skip
    records = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    refused = [record for record in records if record["event"] == "tool refused"]
    assert refused and refused[0]["tool"].endswith("[100000 chars, cut]"), done.stderr[:3000]
    assert max(map(len, done.stderr.splitlines())) < MAX_LINE and "Traceback" not in done.stderr


def _formatted(exc: BaseException) -> dict[str, Any]:
    try:
        raise exc
    except BaseException:
        record = logging.getLogger("rimthan.mcp.test").makeRecord(
            "rimthan.mcp.test", logging.ERROR, __file__, 1, "failed", (), sys.exc_info()
        )
    return dict(json.loads(JsonFormatter().format(record)))


def test_a_fault_of_ours_keeps_its_frames_and_a_peer_s_gets_none() -> None:
    """The operator still learns where a bug of ours happened; a client gone mid-request is its name only."""
    ours = _formatted(ValueError("v" * 10_000))
    assert ours["exc"].endswith("[10012 chars, cut]") and "in _formatted" in ours["trace"], ours
    assert "Traceback" not in ours["trace"] and "v" * 300 not in ours["trace"]
    theirs = _formatted(ClientDisconnect())
    assert theirs["exc"] == "ClientDisconnect: " and "trace" not in theirs, theirs
    assert "trace" not in _formatted(OSError(errno.EMFILE, "Too many open files"))
