"""The operator's log as an audit trail over a fleet: "which runs used release X", "who migrated what".

Two installed ``rimthan-mcp serve --transport http --migrate-to-newest`` replicas share checkpoint keys and a
releases directory; a harness sends its calls to each in turn, a run starts on 1.2.0, 1.3.0 is published, the run
migrates to it and goes on. The server wrote no line for a served call (and none for a migration), so neither
question could be answered from its logs: each call is now one ``"call served"`` record whose ``parent`` and
``checkpoint`` digests chain the run across both replicas' logs.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import anyio
from rimthan_host.harness import RunResult, client_caller
from support.processes import HttpServer, http_server_process
from support.servers import RIMTHAN_MCP, build_world, harness, http_client_for, server_env


def _records(*servers: HttpServer) -> list[dict[str, Any]]:
    lines = [line for server in servers for line in server.lines if line.startswith("{")]
    return [r for r in map(json.loads, lines) if r["event"] in ("call served", "call refused")]


def _runs(records: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Each run's served calls in order, chained by digest from its start (as an operator would, from the logs)."""
    by_parent = {r["parent"]: r for r in records if r["event"] == "call served" and r["parent"] != r["checkpoint"]}
    runs = []
    for first in (r for r in records if r.get("tool") == "rimthan.start_workflow"):
        chain = [first]
        while chain[-1]["checkpoint"] in by_parent:
            chain.append(by_parent[chain[-1]["checkpoint"]])
        runs.append(chain)
    return runs


def test_the_operator_s_log_says_which_runs_used_a_release_and_who_migrated_them(tmp_path: Path) -> None:
    world = build_world(tmp_path / "world")
    releases = tmp_path / "releases"
    world.publish("1.2.0", releases)
    shared = ("--checkpoint-keys", str(tmp_path / "checkpoint-keys.json"), "--migrate-to-newest")

    def replica(name: str) -> Any:
        args = ["serve", "--releases-dir", str(releases), "--trust", str(world.trust), "--state-dir"]
        args += [str(tmp_path / name), *shared, "--transport", "http", "--port", "0"]
        return http_server_process([RIMTHAN_MCP, *args], env=server_env())

    async def week(a: HttpServer, b: HttpServer) -> RunResult:
        async with http_client_for(a.url) as to_a, http_client_for(b.url) as to_b:
            callers, turn = [client_caller(to_a), client_caller(to_b)], [0]

            async def each_in_turn(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
                turn[0] += 1
                return await callers[turn[0] % 2](tool, arguments)

            run = harness(each_in_turn, tmp_path / "project")
            at = await run.run(await run.start("research", initial_version="1.2.0"), until_step="interview")
            world.publish("1.3.0", releases)
            for server in (a, b):
                seen = len(server.lines)
                server.process.send_signal(signal.SIGHUP)
                server.wait_for(r'"activated": \["research-decision@1.3.0"\]', after=seen)
            moved = await run.migrate(at, "research-decision@1.3.0", "1.3.0", confirm=True)
            return await run.run(moved, until_step="interview")

    with replica("a") as a, replica("b") as b:
        ended = anyio.run(week, a, b)
        records = _records(a, b)
        assert _records(a) and _records(b)  # the run's calls were served by both replicas
    assert ended.release == "research-decision@1.3.0", ended.release
    [run] = _runs(records)
    assert [r["sequence"] for r in run] == list(range(1, len(run) + 1)), run
    assert {r["peer"].split(":")[0] for r in run} == {"127.0.0.1"}, run
    used = {r["release"] for r in run}
    assert used == {"research-decision@1.2.0", "research-decision@1.3.0"}, used
    [migrated] = [r for r in run if "migrated_from" in r]
    assert migrated["migrated_from"] == "research-decision@1.2.0", migrated
    assert migrated["release"] == "research-decision@1.3.0" and migrated["step"] == "setup-workspace", migrated
    assert all("confirmed_state" not in r and "checkpoint_token" not in r for r in records)
