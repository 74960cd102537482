"""``--http-sessions``: a session id the process never issued is ``404 Session not found``, on either era's terms.

A real ``rimthan-mcp serve --transport http --http-sessions`` on one port, restarted on that port. A 2025-11-25
request naming an id this process did not issue (made up, or issued by the process before the restart) is answered
``404`` with a one-line JSON-RPC error, which the Streamable HTTP transport tells the client to answer with a fresh
``initialize``; one naming no id at all is ``400``. A 2026-07-28 request is sessionless (that era has no
``Mcp-Session-Id``): it is served whatever id it carries, so a restart is nothing to a 2026-07-28 client.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from support.bridge import BIN
from support.processes import http_server_process, serve_options
from support.registry import free_port
from support.servers import build_world, server_env

LEGACY = {"MCP-Protocol-Version": "2025-11-25"}
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
MODERN = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}},
}
TOOLS_LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
MODERN_LIST = {**TOOLS_LIST, "params": {"_meta": MODERN_META}}
NEVER_ISSUED = "0123456789abcdef0123456789abcdef"


def _post(port: int, body: Mapping[str, Any], headers: Mapping[str, str]) -> tuple[int, dict[str, str], Any]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    sent = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json", **headers}
    try:
        connection.request("POST", "/mcp", json.dumps(body).encode(), sent)
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, json.loads(response.read())
    finally:
        connection.close()


def _session(port: int) -> str:
    status, headers, _ = _post(port, INITIALIZE, LEGACY)
    assert status == 200, status
    return headers["mcp-session-id"]


def _not_found(port: int, session: str) -> None:
    status, _, body = _post(port, TOOLS_LIST, {**LEGACY, "Mcp-Session-Id": session})
    assert status == 404, (status, body)
    assert body == {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Session not found"}}


def test_an_id_this_process_never_issued_is_404_and_a_modern_request_is_served_regardless(tmp_path: Path) -> None:
    world = build_world(tmp_path / "world")
    port = free_port()  # (bound again by a second process: never a port the kernel hands to --port 0 meanwhile)
    options = serve_options(world.built["1.3.0"], world.trust, tmp_path / "state", log_level="warning")
    argv = [str(BIN / "rimthan-mcp"), "serve", *options, "--transport", "http", "--port", str(port), "--http-sessions"]
    with http_server_process(argv, env=server_env()):
        earlier = _session(port)
        assert _post(port, TOOLS_LIST, {**LEGACY, "Mcp-Session-Id": earlier})[0] == 200
        _not_found(port, NEVER_ISSUED)
    with http_server_process(argv, env=server_env()):  # the same port, a new process: the earlier id is unknown
        _not_found(port, earlier)
        _not_found(port, NEVER_ISSUED)
        status, _, body = _post(port, TOOLS_LIST, LEGACY)  # no id at all, on a server that gives them
        assert status == 400 and body["error"]["message"] == "Bad Request: Missing session ID", (status, body)
        for named in ({}, {"Mcp-Session-Id": earlier}):
            status, headers, body = _post(port, MODERN_LIST, {**MODERN, **named})
            assert status == 200 and body["result"]["tools"], (status, body)
            assert "mcp-session-id" not in headers
        fresh = _session(port)  # what the transport tells a 2025-11-25 client to do on the 404
        assert fresh != earlier and _post(port, TOOLS_LIST, {**LEGACY, "Mcp-Session-Id": fresh})[0] == 200
