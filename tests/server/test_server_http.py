"""Streamable HTTP: stateless serving and the SDK's DNS-rebinding / Origin protection.

Raw HTTP requests (stdlib only) against a real ``rimthan-mcp serve --transport
http`` process, so the checks see exactly what a browser or proxy would.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from support.servers import HttpServer, ServerWorld, build_world, http_server, serve_args

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw-test", "version": "0"}},
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    world: ServerWorld = build_world(tmp_path_factory.mktemp("http-world"))
    args = serve_args(world, world.built["1.2.0"], state_dir=tmp_path_factory.mktemp("http-state"))
    with http_server(args) as running:
        yield running


def _post(url: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            **(headers or {}),
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read().decode()


def test_http_is_stateless_and_answers_plain_json(server: HttpServer) -> None:
    status, headers, body = _post(server.url, INITIALIZE)
    assert status == 200
    assert "mcp-session-id" not in {k.lower() for k in headers}
    assert json.loads(body)["result"]["serverInfo"]["name"] == "rimthan-workflow-mcp"
    # no session: a tools/list on a fresh connection is served without any handshake state
    status, _, body = _post(
        server.url, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, {"MCP-Protocol-Version": "2025-11-25"}
    )
    assert status == 200 and len(json.loads(body)["result"]["tools"]) == 4


def test_http_refuses_foreign_host_and_origin_headers(server: HttpServer) -> None:
    authority = urlsplit(server.url).netloc
    port = authority.rsplit(":", 1)[1]
    status, _, _ = _post(server.url, INITIALIZE, {"Host": f"evil.example:{port}"})
    assert status == 421
    status, _, _ = _post(server.url, INITIALIZE, {"Origin": "http://evil.example"})
    assert status == 403
    status, _, _ = _post(server.url, INITIALIZE, {"Origin": f"http://{authority}"})
    assert status == 200
    status, _, _ = _post(server.url, INITIALIZE, {"Host": f"localhost:{port}", "Origin": f"http://localhost:{port}"})
    assert status == 200
    modern = {"jsonrpc": "2.0", "id": 3, "method": "server/discover", "params": {}}
    status, _, _ = _post(server.url, modern, {"MCP-Protocol-Version": "2026-07-28", "Origin": "http://evil.example"})
    assert status == 403
