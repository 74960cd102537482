"""A call still in flight at the HTTP drain's deadline gets a JSON-RPC error a client can read (``http_stop``).

The installed ``rimthan-mcp`` serves real releases over HTTP; raw sockets hold calls in flight (a body whose
end never comes), the server gets SIGTERM, and what each call's client receives is read off the wire and
parsed as the SDK's client parses it. Before, uvicorn answered each such call with a bare ``500`` (no body).
"""

from __future__ import annotations

import json
import signal
import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import mcp_types as types
import pytest
from mcp_types import jsonrpc_message_adapter
from support.processes import http_server_process
from support.servers import RIMTHAN_MCP, ServerWorld, build_world, server_env

LIST_TOOLS = {"jsonrpc": "2.0", "id": "list-7", "method": "tools/list", "params": {}}
HEADERS = "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("http-stop"))


def _chunked_never_ended(parts: Any) -> bytes:
    """A POST whose whole JSON-RPC request comes in one chunk, and whose last chunk never comes."""
    body = json.dumps(LIST_TOOLS).encode()
    head = f"POST {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\n{HEADERS}Transfer-Encoding: chunked\r\n\r\n"
    return head.encode() + b"%x\r\n" % len(body) + body + b"\r\n"


def _half_a_body(parts: Any) -> bytes:
    """A POST that declares its length and sends half its body: its id is never read."""
    body = json.dumps({**LIST_TOOLS, "id": 8}).encode()
    head = f"POST {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\n{HEADERS}Content-Length: {len(body)}\r\n\r\n"
    return head.encode() + body[: len(body) // 2]


def _answer(sock: socket.socket) -> tuple[str, dict[str, str], bytes]:
    """The status line, headers (lower-cased names) and body the server sent before it closed the connection."""
    raw = b""
    while chunk := sock.recv(65536):
        raw += chunk
    head, _, body = raw.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
    return status, headers, body


def test_calls_cut_off_by_the_drain_get_connection_closed_for_their_id(world: ServerWorld, tmp_path: Path) -> None:
    """Both calls are still in flight at the drain's deadline. Each gets 503 with the JSON-RPC ``Connection
    closed`` error saying the server stopped and the call may be retried elsewhere: for its id when its request
    came whole, ``id`` null when it was never read. The stop line says how they were answered."""
    releases = tmp_path / "releases"
    world.publish("1.3.0", releases)
    argv = [RIMTHAN_MCP, "serve", "--releases-dir", str(releases), "--trust", str(world.trust),
            "--state-dir", str(tmp_path / "state"), "--transport", "http", "--port", "0"]  # fmt: skip
    with http_server_process(argv, env=server_env()) as server:
        parts = urlsplit(server.url)
        address = (parts.hostname, parts.port)
        with (
            socket.create_connection(address, timeout=60) as whole,
            socket.create_connection(address, timeout=60) as half,
        ):
            whole.sendall(_chunked_never_ended(parts))
            half.sendall(_half_a_body(parts))
            seen = len(server.lines)
            server.process.send_signal(signal.SIGTERM)
            server.wait_for("SIGTERM: draining calls in flight", after=seen)
            answers = [_answer(whole), _answer(half)]
        status = server.process.wait(timeout=60)
        server.wait_for("rimthan-mcp: stopped", after=seen)
    parsed = [jsonrpc_message_adapter.validate_json(body, by_name=False) for _, _, body in answers]
    assert [(line, headers["connection"], headers["content-type"]) for line, headers, _ in answers] == [
        ("HTTP/1.1 503 Service Unavailable", "close", "application/json")
    ] * 2, answers
    assert all(isinstance(p, types.JSONRPCError) for p in parsed), parsed
    errors = [(p.id, p.error.code, p.error.message) for p in parsed if isinstance(p, types.JSONRPCError)]
    closed = types.CONNECTION_CLOSED
    assert [(i, code) for i, code, _ in errors] == [("list-7", closed), (None, closed)], errors
    message = errors[0][2]
    assert message.startswith("Connection closed: the server stopped before it answered"), message
    assert "may be retried against another replica" in message, message
    assert status == 0
    stopped = [line for line in server.lines[seen:] if line.startswith("rimthan-mcp: stopped")]
    assert stopped == ["rimthan-mcp: stopped: 2 call(s) in flight still unanswered after 10 s were cancelled "
                       "(answered Connection closed, HTTP 503)\n"], server.stderr()  # fmt: skip
    assert "Traceback" not in server.stderr() and "Exception in ASGI application" not in server.stderr()
