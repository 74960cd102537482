"""``X-Forwarded-For`` / ``X-Forwarded-Proto`` are believed only from the proxies ``--forwarded-allow-ips`` names.

uvicorn's default (``proxy_headers`` on) believed them from loopback, and from whatever ``$FORWARDED_ALLOW_IPS``
named: a request from 127.0.0.1 saying ``X-Forwarded-For: 203.0.113.9`` had the verifier log 203.0.113.9 as its
``peer`` (and key a stateless client by it). The installed ``rimthan-mcp`` console script over HTTP, raw requests
from two loopback source addresses; the line each leaves is a refusal logged while the request is handled
(a ``text/plain`` body: 415), so no tool runs.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from support.processes import HttpServer, http_server_process
from support.refusals import refusal
from support.servers import RIMTHAN_MCP, ServerWorld, serve_args, server_env

WAIT = 60.0
NOT_JSON_EVENT = "request refused: not JSON"
FORWARDED = "203.0.113.9"  # TEST-NET-3: never a real client here
OTHER_HOST = "127.0.0.2"  # a loopback source address no option names


@contextmanager
def _server(world: ServerWorld, state: Path, *extra: str, env: dict[str, str] | None = None) -> Iterator[HttpServer]:
    args = serve_args(world, world.built["1.2.0"], state_dir=state)[3:]  # after "-m MODULE serve"
    argv = [RIMTHAN_MCP, "serve", *args, "--transport", "http", "--port", "0", *extra]
    with http_server_process(argv, env={**server_env(), **(env or {})}) as server:
        yield server


def _refused_line(server: HttpServer, after: int) -> dict[str, object]:
    match = server.wait_for(f'^{{.*"{NOT_JSON_EVENT}".*}}$', after=after)
    line: dict[str, object] = json.loads(match.group(0))
    return line


def _peer(server: HttpServer, source: str) -> str:
    url = urllib.parse.urlsplit(server.url)
    seen = len(server.lines)
    connection = http.client.HTTPConnection(url.hostname or "", url.port, timeout=WAIT, source_address=(source, 0))
    headers = {"Content-Type": "text/plain", "X-Forwarded-For": FORWARDED, "X-Forwarded-Proto": "https"}
    try:
        connection.request("POST", url.path, b"{}", headers)
        assert connection.getresponse().status == 415
    finally:
        connection.close()
    return str(_refused_line(server, seen)["peer"])


def test_by_default_no_forwarded_header_changes_the_peer_logged(mcp_world: ServerWorld, tmp_path: Path) -> None:
    """Not from loopback (uvicorn's default proxy), nor from what uvicorn's ``$FORWARDED_ALLOW_IPS`` names."""
    with _server(mcp_world, tmp_path / "state", env={"FORWARDED_ALLOW_IPS": "*"}) as server:
        assert "rimthan-mcp: believing X-Forwarded-For/-Proto from: no one" in "".join(server.lines)
        assert _peer(server, "127.0.0.1").split(":")[0] == "127.0.0.1"
        assert _peer(server, OTHER_HOST).split(":")[0] == OTHER_HOST


def test_the_proxies_named_are_believed_and_no_other_client(mcp_world: ServerWorld, tmp_path: Path) -> None:
    with _server(mcp_world, tmp_path / "state", "--forwarded-allow-ips", "127.0.0.1, ::1") as server:
        assert "rimthan-mcp: believing X-Forwarded-For/-Proto from: 127.0.0.1, ::1" in "".join(server.lines)
        assert _peer(server, "127.0.0.1") == f"{FORWARDED}:0"  # (the header carries no port)
        assert _peer(server, OTHER_HOST).split(":")[0] == OTHER_HOST  # no proxy named: its own address


@pytest.mark.parametrize("value", ["*", "proxy.example", "10.0.0.1/8", "10.0.0.5:8080", "10.0.0.5,", "::1,nonsense"])
def test_a_forwarded_allow_ips_value_that_names_no_proxy_is_a_usage_mistake(value: str, tmp_path: Path) -> None:
    """A name, a port or a network with host bits set would match no client (uvicorn keeps it as a literal and
    silently believes no one); ``*`` would believe every client."""
    argv = [RIMTHAN_MCP, "serve", "--transport", "http", "--forwarded-allow-ips", value]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == "", done.stderr
    said = refusal(done.stderr)  # one error line with its code, then what to do; no traceback
    assert said.error.startswith(f"error: usage: --forwarded-allow-ips {value!r}: "), said
    assert said.next.endswith("--help'"), said
