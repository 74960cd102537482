"""P6: tool calls per second over Streamable HTTP with 32 concurrent clients, and p50/p99 latency.

One packaged run (research-decision 1.2.0, the desk-research route with one
validator repair drill, as P3 drives it) is recorded over HTTP: the tool
names and arguments of every call. Then 32 SDK clients, each with its own
connection, replay that call list concurrently against ``rimthan-mcp serve
--transport http`` (checkpoints are HMAC'd by the serving process and carry
the run's state, so a recorded call is valid again), and the same 32 clients
replay the same arguments against the SDK echo server's ``echo`` tool over
the same transport: same request bytes, same load, none of our work.
Rounds alternate (echo, ours) after one untimed round of each.

Throughput is calls completed over the round's wall time; the ratio is the
echo server's throughput over ours (how many times slower we are). Latency
percentiles are over every call of every measured round.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from rimthan_host.harness import CatalogueExamples, WorkflowHarness, client_caller

from .bench_calls import DRILL, ROUTE, VERSION, WORKFLOW
from .echo_server import ECHO
from .fixtures import BenchKeys
from .report import Figure
from .servers import CLIENT_MODE, echo_server, http_process, rimthan_server

CLIENTS = 32
TARGET = 1.5
Recorded = list[tuple[str, dict[str, Any]]]
Call = Callable[[Client, str, dict[str, Any]], Awaitable[None]]


async def _record(url: str, release: Path, work: Path) -> Recorded:
    """The calls of one complete packaged run over HTTP (what each client replays)."""
    recorded: Recorded = []
    async with Client(url, mode=CLIENT_MODE) as client:
        inner = client_caller(client)

        async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
            recorded.append((name, arguments))
            return await inner(name, arguments)

        examples = CatalogueExamples({VERSION: release / "catalogue" / "examples"}, ROUTE, fail_once=DRILL)
        harness = WorkflowHarness(call, examples, project_dir=work / "p6" / "record")
        final = await harness.run(await harness.start(WORKFLOW, initial_version=VERSION))
    if final.get("status") != "completed":
        raise RuntimeError("the recorded packaged run over HTTP did not complete")
    return recorded


async def _ours(client: Client, name: str, arguments: dict[str, Any]) -> None:
    result = await client.call_tool(name, arguments)
    if result.is_error:
        raise RuntimeError(f"replaying {name} under load was refused: {result.structured_content}")


async def _echo(client: Client, name: str, arguments: dict[str, Any]) -> None:
    result = await client.call_tool(ECHO, arguments)
    if result.is_error:
        raise RuntimeError(f"the echo floor refused {name}'s arguments")


async def _round(clients: list[Client], call: Call, recorded: Recorded) -> tuple[float, list[float]]:
    """Every client replays ``recorded`` once, all at once; wall seconds and every call's latency."""
    latencies: list[float] = []

    async def replay(client: Client) -> None:
        for name, arguments in recorded:
            started = time.perf_counter()
            await call(client, name, arguments)
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    async with anyio.create_task_group() as group:
        for client in clients:
            group.start_soon(replay, client)
    return time.perf_counter() - started, latencies


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


async def _drive(ours_url: str, echo_url: str, release: Path, work: Path, rounds: int) -> dict[str, Any]:
    recorded = await _record(ours_url, release, work)
    walls: dict[str, list[float]] = {"ours": [], "echo": []}
    latencies: dict[str, list[float]] = {"ours": [], "echo": []}
    async with AsyncExitStack() as stack:
        ours = [await stack.enter_async_context(Client(ours_url, mode=CLIENT_MODE)) for _ in range(CLIENTS)]
        echo = [await stack.enter_async_context(Client(echo_url, mode=CLIENT_MODE)) for _ in range(CLIENTS)]
        for index in range(rounds + 1):
            for side, clients, call in (("echo", echo, _echo), ("ours", ours, _ours)):
                wall, seen = await _round(clients, call, recorded)
                if index > 0:  # the first round of each is an untimed warm-up
                    walls[side].append(wall)
                    latencies[side].extend(seen)
    return {"calls_per_round": CLIENTS * len(recorded), "walls": walls, "latencies": latencies}


def run_p6(release: Path, keys: BenchKeys, state_dir: Path, work: Path, rounds: int) -> list[Figure]:
    logs = work / "p6" / "logs"
    ours_cmd = rimthan_server(release, keys.trust_dir, state_dir, logs / "rimthan-mcp-http.log")
    with http_process(ours_cmd) as ours_url, http_process(echo_server(logs / "echo-http.log")) as echo_url:
        measured = anyio.run(_drive, ours_url, echo_url, release, work, rounds)
    calls = measured["calls_per_round"]
    rate = {side: calls / statistics.median(walls) for side, walls in measured["walls"].items()}
    lat = measured["latencies"]
    details = {
        "clients": CLIENTS,
        "calls_per_round": calls,
        "rounds": rounds,
        "calls_per_s": rate,
        "round_wall_s": measured["walls"],
        "p50_s": {side: _percentile(v, 0.50) for side, v in lat.items()},
        "p99_s": {side: _percentile(v, 0.99) for side, v in lat.items()},
    }
    floor_what = f"the SDK echo server over Streamable HTTP, same {CLIENTS} clients, same arguments"
    figures = [
        Figure(
            "P6 throughput",
            f"tool calls per second over Streamable HTTP, {CLIENTS} concurrent SDK clients replaying a packaged run",
            rate["ours"],
            rate["echo"],
            "calls/s",
            "rate",
            TARGET,
            floor_what=floor_what,
            details=details,
        )
    ]
    for label, fraction in (("p50", 0.50), ("p99", 0.99)):
        figures.append(
            Figure(
                f"P6 {label}",
                f"{label} latency of one tool call under that load",
                _percentile(lat["ours"], fraction),
                _percentile(lat["echo"], fraction),
                "s",
                "ratio",
                TARGET,
                floor_what=floor_what,
            )
        )
    return figures
