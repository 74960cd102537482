"""A release directory refused as untrusted, then deleted: a run pinned to it is told to put it back.

A restarted server remembers a directory it refused for its signatures alone, so a run pinned to it is refused as
untrusted ("co-sign it"). Once the directory is deleted that advice is wrong; the first refresh after forgets it.
Real keys, real signed releases, the installed ``rimthan-mcp serve`` over HTTP, and ``kill -HUP``.
"""

from __future__ import annotations

import shutil
import signal
from pathlib import Path
from typing import Any

import anyio
from rimthan_host.harness import client_caller
from support.processes import HttpServer, http_server_process
from support.releases import build_release, make_keypair, packaged_source, trust_dir
from support.servers import RIMTHAN_MCP, harness, http_client_for, server_env


def _serve(tmp_path: Path, trust: Path) -> Any:
    args = ["serve", "--releases-dir", str(tmp_path / "releases"), "--trust", str(trust)]
    args += ["--state-dir", str(tmp_path / "state"), "--transport", "http", "--port", "0"]
    return http_server_process([RIMTHAN_MCP, *args], env=server_env())


def _refresh(server: HttpServer) -> None:
    seen = len(server.lines)
    server.process.send_signal(signal.SIGHUP)
    server.wait_for('"refresh done"', after=seen)


async def _continue(server: HttpServer, call: dict[str, Any]) -> dict[str, Any]:
    async with http_client_for(server.url) as client:
        refused = await client.call_tool("rimthan.continue_workflow", call)
    error: dict[str, Any] = refused.structured_content["error"]
    return error


def test_a_run_pinned_to_an_untrusted_directory_since_deleted_is_told_to_put_it_back(tmp_path: Path) -> None:
    keys, releases = tmp_path / "keys", tmp_path / "releases"
    old, new = make_keypair(keys, "old"), make_keypair(keys, "new")
    pinned = build_release(packaged_source("1.2.0"), releases, [old])
    trust = trust_dir(tmp_path / "trust", old)
    call: dict[str, Any] = {}

    async def start(server: HttpServer) -> None:
        async with http_client_for(server.url) as client:
            run = harness(client_caller(client), tmp_path / "project")
            result = await run.run(await run.start("research", initial_version="1.2.0"), until_step="interview")
        call.update(checkpoint=result.wire["checkpoint"], confirmed_state=run.state.projection())

    with _serve(tmp_path, trust) as server:
        anyio.run(start, server)
    build_release(packaged_source("1.3.0"), releases, [new])
    trust_dir(trust, new)
    (trust / old.public_path.name).unlink()
    with _serve(tmp_path, trust) as server:  # 1.3.0 active; 1.2.0 refused for its signer alone
        untrusted = anyio.run(_continue, server, call)
        shutil.rmtree(pinned)
        _refresh(server)
        gone = anyio.run(_continue, server, call)
    assert untrusted["details"].get("untrusted") is True, untrusted
    assert gone["code"] == "pinned_release_unavailable" and "untrusted" not in gone["details"], gone
    assert "put it back in the releases directory" in gone["message"], gone
