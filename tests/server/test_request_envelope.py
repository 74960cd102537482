"""What a request carries besides its arguments, and a request too large: a JSON-RPC error a client can read.

A real ``rimthan-mcp serve`` over Streamable HTTP (raw sockets, plain POSTs and
the SDK's own client) and over stdio (raw lines to the console script):

- a body past ``MAX_REQUEST_BODY_BYTES``, declared by ``Content-Length`` or
  grown past it in chunks, gets 413 with a JSON-RPC ``Invalid Request`` naming
  the bound (it was a bare ``text/plain`` 413, which the SDK client reported
  as "Server returned an error response");
- a stdio line past the bound is answered the same way, for its id, and the
  next request served; the server reads no more of it than the bound (its
  peak memory grows by less than twice the bound for a line four times it: it
  read the line whole);
- a ``tools/call`` whose string id or ``_meta`` is past its bound
  (``MAX_REQUEST_ID_CHARS``, ``MAX_REQUEST_META_BYTES``) is refused on both
  transports; one at its bound is served.
"""

from __future__ import annotations

import http.client
import json
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError
from rimthan_workflow_mcp.request_envelope import ID_TOO_LONG, META_TOO_LARGE, META_UNREADABLE
from rimthan_workflow_registry.limits import MAX_REQUEST_BODY_BYTES, MAX_REQUEST_ID_CHARS, MAX_REQUEST_META_BYTES
from rimthan_workflow_registry.protocol_names import START_WORKFLOW
from support.processes import HttpServer
from support.raw_stdio import RawStdio, raw_stdio_server
from support.servers import RIMTHAN_MCP, ServerWorld, build_world, http_client_for, http_server, serve_args

WAIT = 60.0
HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-11-25",
}
TOO_LARGE_WORDS = f"past the {MAX_REQUEST_BODY_BYTES} "


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("envelope-world"))


@pytest.fixture(scope="module")
def server(world: ServerWorld, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    with http_server(serve_args(world, world.built["1.2.0"], state_dir=tmp_path_factory.mktemp("state"))) as running:
        yield running


@pytest.fixture(scope="module")
def raw(world: ServerWorld, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RawStdio]:
    """``rimthan-mcp serve`` over stdio pipes, initialised by hand."""
    args = serve_args(world, world.built["1.2.0"], state_dir=tmp_path_factory.mktemp("stdio-state"))
    with raw_stdio_server([RIMTHAN_MCP, *args[2:]], WAIT) as client:
        yield client


def _port(server: HttpServer) -> int:
    return int(server.url.rsplit(":", 1)[1].split("/")[0])


def _head(server: HttpServer, framing: str) -> bytes:
    lines = ["POST /mcp HTTP/1.1", f"Host: 127.0.0.1:{_port(server)}", *(f"{k}: {v}" for k, v in HEADERS.items())]
    return ("\r\n".join([*lines, framing]) + "\r\n\r\n").encode()


def _answer(sock: socket.socket) -> tuple[int, dict[str, str], dict[str, Any]]:
    response = http.client.HTTPResponse(sock)
    response.begin()
    return response.status, {k.lower(): v for k, v in response.getheaders()}, json.loads(response.read())


def _assert_too_large(status: int, headers: dict[str, str], answer: dict[str, Any]) -> None:
    assert (status, headers["content-type"]) == (413, "application/json"), answer
    assert answer["id"] is None and answer["error"]["code"] == types.INVALID_REQUEST, answer
    assert TOO_LARGE_WORDS in answer["error"]["message"] and "\n" not in answer["error"]["message"]


def test_a_body_declared_past_the_bound_gets_a_json_rpc_error_unread(server: HttpServer) -> None:
    with socket.create_connection(("127.0.0.1", _port(server)), timeout=WAIT) as sock:
        sock.sendall(_head(server, f"Content-Length: {MAX_REQUEST_BODY_BYTES + 1}"))  # and not one byte of it
        _assert_too_large(*_answer(sock))


def test_a_chunked_body_growing_past_the_bound_gets_a_json_rpc_error(server: HttpServer) -> None:
    chunk = b" " * (1024 * 1024)
    with socket.create_connection(("127.0.0.1", _port(server)), timeout=WAIT) as sock:
        sock.sendall(_head(server, "Transfer-Encoding: chunked"))
        for _ in range(MAX_REQUEST_BODY_BYTES // len(chunk) + 1):  # past the bound, never the last chunk
            sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        _assert_too_large(*_answer(sock))


def test_the_sdk_client_hears_why_its_call_was_too_large(server: HttpServer) -> None:
    """The SDK client reads a JSON-RPC error at a 4xx; a bare 413 it reported as an internal error."""

    async def call() -> MCPError:
        async with http_client_for(server.url) as client:
            with pytest.raises(MCPError) as refused:
                await client.call_tool(START_WORKFLOW, {"workflow": "w" * MAX_REQUEST_BODY_BYTES})
            return refused.value

    error = anyio.run(call)
    assert error.code == types.INVALID_REQUEST and TOO_LARGE_WORDS in error.message, error


def test_a_stdio_line_past_the_bound_is_answered_for_its_id_and_read_no_further(raw: RawStdio) -> None:
    peak = _peak_rss(raw.process.pid)
    arguments = '{"workflow":"' + "w" * (4 * MAX_REQUEST_BODY_BYTES) + '"}'
    answer = raw.call(7, START_WORKFLOW, arguments, WAIT)
    assert answer is not None and answer["error"]["code"] == types.INVALID_REQUEST, answer
    assert f"past the {MAX_REQUEST_BODY_BYTES} characters one line may take" in answer["error"]["message"]
    assert _peak_rss(raw.process.pid) - peak < 2 * MAX_REQUEST_BODY_BYTES  # the line is 4x the bound
    served = raw.call(8, START_WORKFLOW, '{"workflow":"nope"}', WAIT)  # the next line is read from its start
    assert served is not None and "result" in served, served


def _peak_rss(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        (line,) = [line for line in status if line.startswith("VmHWM:")]
    return int(line.split()[1]) * 1024


# --------------------------------------------------------------------------- the id and _meta


def _meta_of(size: int) -> dict[str, Any]:
    meta = {"progressToken": ""}
    meta["progressToken"] = "m" * (size - len(json.dumps(meta, separators=(",", ":"))))
    return meta


Refusal = tuple[int, str] | None  # the JSON-RPC error's code and message, or None: served
ENVELOPES: dict[str, tuple[int | str, dict[str, Any] | None, Refusal]] = {
    "id-at-bound": ("i" * MAX_REQUEST_ID_CHARS, None, None),
    "id-past-bound": (
        "i" * (MAX_REQUEST_ID_CHARS + 1),
        None,
        (types.INVALID_REQUEST, ID_TOO_LONG.format(chars=MAX_REQUEST_ID_CHARS + 1, bound=MAX_REQUEST_ID_CHARS)),
    ),
    "meta-at-bound": (5, _meta_of(MAX_REQUEST_META_BYTES), None),
    "meta-past-bound": (
        6,
        _meta_of(MAX_REQUEST_META_BYTES + 1),
        (types.INVALID_PARAMS, META_TOO_LARGE.format(size=MAX_REQUEST_META_BYTES + 1, bound=MAX_REQUEST_META_BYTES)),
    ),
    "meta-not-json": (7, {"progressToken": 1, "n": float("nan")}, (types.INVALID_PARAMS, META_UNREADABLE)),
}


def _request(request_id: int | str, meta: dict[str, Any] | None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": START_WORKFLOW, "arguments": {"workflow": "nope"}}
    if meta is not None:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def _over_http(server: HttpServer, request: dict[str, Any]) -> dict[str, Any]:
    posted = urllib.request.Request(server.url, data=json.dumps(request).encode(), method="POST", headers=HEADERS)
    try:
        with urllib.request.urlopen(posted, timeout=WAIT) as response:
            answer: dict[str, Any] = json.loads(response.read())
    except urllib.error.HTTPError as error:
        answer = json.loads(error.read())
    return answer


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("case", list(ENVELOPES))
def test_an_id_or_meta_past_its_bound_is_refused_on_every_transport(
    server: HttpServer, raw: RawStdio, transport: str, case: str
) -> None:
    request_id, meta, refusal = ENVELOPES[case]
    request = _request(request_id, meta)
    if transport == "http":
        answer = _over_http(server, request)
    else:
        raw.send(json.dumps(request) + "\n")
        answer = raw.call_answer(request_id, WAIT) or {}
    assert answer.get("id") == request_id, answer
    if refusal is None:  # served: the tool judged the arguments (no confirmed_state)
        assert answer["result"]["structuredContent"]["error"]["code"] == "invalid_arguments", answer
    else:
        assert answer["error"] == {"code": refusal[0], "message": refusal[1]}, answer
