"""``GET /healthz`` for a load balancer, against the installed ``rimthan-mcp serve --transport http``.

A balancer's health check asks with ``GET``: the server answered every path but ``POST /mcp`` with 405, so a
replica could not be told healthy (nor one serving from one that is not) without speaking MCP. A replica listens
only once it holds a verified release, so the check says it serves and which release, as a refresh changes it.
"""

from __future__ import annotations

import json
import shutil
import signal
import urllib.error
import urllib.request
from pathlib import Path

from support.processes import http_server_process
from support.releases import build_release, make_keypair, packaged_source, trust_dir
from support.servers import RIMTHAN_MCP, server_env


def _get(url: str, host: str | None = None, method: str = "GET") -> tuple[int, str, str]:
    request = urllib.request.Request(url, method=method, headers={"Host": host} if host else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.headers.get("content-type", ""), answer.read().decode("utf-8")
    except urllib.error.HTTPError as refused:
        return refused.code, refused.headers.get("content-type", ""), refused.read().decode("utf-8")


def test_healthz_says_a_replica_serves_and_which_release_and_keeps_the_host_check(tmp_path: Path) -> None:
    signer = make_keypair(tmp_path / "keys", "ops")
    trust, releases = trust_dir(tmp_path / "trust", signer), tmp_path / "releases"
    build_release(packaged_source("1.2.0"), releases, [signer])
    newer = build_release(packaged_source("1.3.0"), tmp_path / "later", [signer])
    args = ["serve", "--releases-dir", str(releases), "--trust", str(trust), "--state-dir", str(tmp_path / "state")]
    with http_server_process([RIMTHAN_MCP, *args, "--transport", "http", "--port", "0"], env=server_env()) as server:
        health = server.url.replace("/mcp", "/healthz")
        first = _get(health)
        head = _get(health, method="HEAD")
        foreign = _get(health, host="attacker.example")
        shutil.copytree(newer, releases / newer.name)
        seen = len(server.lines)
        server.process.send_signal(signal.SIGHUP)
        server.wait_for('"refresh done"', after=seen)
        after = _get(health)
    assert first[:2] == (200, "application/json"), first
    assert json.loads(first[2]) == {"status": "serving", "active": ["research-decision@1.2.0"]}
    assert head[0] == 200 and head[2] == "", head
    assert foreign[0] == 421 and "research-decision" not in foreign[2], foreign
    assert json.loads(after[2])["active"] == ["research-decision@1.3.0"], after
