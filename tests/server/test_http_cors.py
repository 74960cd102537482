"""Streamable HTTP: a browser page at an origin the operator allowed can call the server (CORS).

Raw HTTP against a real ``rimthan-mcp serve --transport http --allowed-host app.example:3000`` process:
the preflight a browser sends before a JSON ``POST`` is answered 204 with what it may send, and each
answer names the origin that may read it and exposes the MCP headers. Before, the preflight was 405 and
no answer carried ``Access-Control-Allow-Origin``, so a page the docs say is served could read nothing.
An origin the DNS-rebinding protection refuses gets no CORS header, and its preflight stays 405.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from support.servers import HttpServer, ServerWorld, build_world, http_server, serve_args
from test_server_http import INITIALIZE, _post

PAGE = "http://app.example:3000"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    world: ServerWorld = build_world(tmp_path_factory.mktemp("cors-world"))
    extra = ["--allowed-host", "app.example:3000", "--allowed-host", "any-port.example"]
    args = serve_args(world, world.built["1.2.0"], state_dir=tmp_path_factory.mktemp("cors-state"), extra=extra)
    with http_server(args) as running:
        yield running


def _preflight(url: str, origin: str) -> tuple[int, dict[str, str]]:
    asks = {"Origin": origin, "Access-Control-Request-Method": "POST"}
    asks["Access-Control-Request-Headers"] = "content-type,mcp-protocol-version"
    request = urllib.request.Request(url, method="OPTIONS", headers=asks)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, {k.lower(): v for k, v in response.headers.items()}
    except urllib.error.HTTPError as error:
        return error.code, {k.lower(): v for k, v in error.headers.items()}


def test_a_preflight_from_an_allowed_origin_is_answered_with_what_the_page_may_send(server: HttpServer) -> None:
    status, headers = _preflight(server.url, PAGE)
    assert status == 204
    assert headers["access-control-allow-origin"] == PAGE and headers["vary"] == "origin"
    assert headers["access-control-allow-methods"] == "POST"
    allowed = {h.strip() for h in headers["access-control-allow-headers"].split(",")}
    assert {"content-type", "accept", "mcp-protocol-version", "mcp-session-id"} <= allowed
    assert _preflight(server.url, "http://any-port.example:8443")[0] == 204  # a bare --allowed-host: any port


def test_an_answer_to_an_allowed_origin_says_the_page_may_read_it(server: HttpServer) -> None:
    status, headers, body = _post(server.url, INITIALIZE, {"Origin": PAGE})
    low = {k.lower(): v for k, v in headers.items()}
    assert status == 200 and json.loads(body)["result"]["serverInfo"]["name"] == "rimthan-workflow-mcp"
    assert low["access-control-allow-origin"] == PAGE
    assert {h.strip() for h in low["access-control-expose-headers"].split(",")} == {
        "mcp-session-id",
        "mcp-protocol-version",
    }


def test_an_origin_the_protection_refuses_gets_no_cors_header(server: HttpServer) -> None:
    status, headers = _preflight(server.url, "http://evil.example:3000")
    assert status == 405 and "access-control-allow-origin" not in headers
    status, headers, body = _post(server.url, INITIALIZE, {"Origin": "http://evil.example:3000"})
    assert status == 403 and "access-control-allow-origin" not in {k.lower() for k in headers}
    assert json.loads(body)["error"]["code"] == -32600
    status, headers, _ = _post(server.url, INITIALIZE)  # no Origin (not a browser): no CORS header either
    assert status == 200 and "access-control-allow-origin" not in {k.lower() for k in headers}
