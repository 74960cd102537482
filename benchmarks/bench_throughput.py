"""P6: tool calls per second over Streamable HTTP with 32 concurrent clients, and p50/p99 latency.

One packaged run (research-decision 1.2.0, the desk-research route with one
validator repair drill, as P3 drives it) is recorded over HTTP: the tool
names and arguments of every call. The SDK client then sends that call list
once to ``rimthan-mcp serve --transport http`` and once, as arguments of the
echo server's ``echo`` tool, to the SDK echo server over the same transport
(every SDK check on every reply, our output schemas included), and the bytes
it sent are kept. Checkpoints are HMAC'd by the serving process and carry the
run's state, so a recorded call is valid again.

Under load, 32 keep-alive connections spread over worker processes replay
those requests concurrently, as wrk or hey would, checking every reply
(``load_client``): the load generator is light and identical for both
servers, so the figure measures the servers. Rounds alternate (echo, ours)
after one untimed round of each.

Throughput is calls completed over the round's wall time; the ratio is the
echo server's throughput over ours (how many times slower we are). Latency
percentiles are over every call of every measured round. The details keep,
per side, the CPU seconds per call of the server process and of the load
generator, so a reader can see which side was busy.
"""

from __future__ import annotations

import os
import statistics
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from rimthan_host.harness import CatalogueExamples, WorkflowHarness, client_caller

from .bench_calls import DRILL, ROUTE, VERSION, WORKFLOW
from .echo_server import ECHO
from .fixtures import BenchKeys
from .load_client import LoadGenerator, WireCall, capture
from .report import Figure
from .servers import CLIENT_MODE, HttpServer, echo_server, http_process, rimthan_server

CLIENTS = 32
# Worker processes of the load generator. Measured on the two-core machine, 32 connections to the echo
# server, 1 vs 2 vs 4 processes alternating: 408 / 398 / 369 calls/s at ~0.6 ms of load-generator CPU per
# call; one process keeps up, more only add scheduling against the server.
PROCESSES = 1
TARGET = 1.5
SIDES = ("echo", "ours")
Recorded = list[tuple[str, dict[str, Any]]]


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


async def _wire(ours_url: str, echo_url: str, release: Path, work: Path) -> dict[str, list[WireCall]]:
    recorded = await _record(ours_url, release, work)
    return {
        "ours": await capture(ours_url, recorded),
        "echo": await capture(echo_url, [(ECHO, arguments) for _, arguments in recorded]),
    }


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` so far (Linux ``/proc``; None elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def _drive(servers: dict[str, HttpServer], wire: dict[str, list[WireCall]], rounds: int) -> dict[str, Any]:
    walls: dict[str, list[float]] = {side: [] for side in SIDES}
    latencies: dict[str, list[float]] = {side: [] for side in SIDES}
    cpu: dict[str, dict[str, float]] = {side: {"server_s": 0.0, "load_generator_s": 0.0} for side in SIDES}
    with (
        LoadGenerator(servers["echo"].url, wire["echo"], clients=CLIENTS, processes=PROCESSES) as echo,
        LoadGenerator(servers["ours"].url, wire["ours"], clients=CLIENTS, processes=PROCESSES) as ours,
    ):
        for index in range(rounds + 1):
            for side, load in (("echo", echo), ("ours", ours)):
                before = _cpu_seconds(servers[side].pid)
                wall, seen, load_cpu = load.round()
                after = _cpu_seconds(servers[side].pid)
                if index > 0:  # the first round of each is an untimed warm-up
                    walls[side].append(wall)
                    latencies[side].extend(seen)
                    cpu[side]["load_generator_s"] += load_cpu
                    if before is not None and after is not None:
                        cpu[side]["server_s"] += after - before
    calls = CLIENTS * len(wire["ours"])
    per_call = {side: {k: v / (calls * rounds) for k, v in spent.items()} for side, spent in cpu.items()}
    return {"calls_per_round": calls, "walls": walls, "latencies": latencies, "cpu_s_per_call": per_call}


def run_p6(release: Path, keys: BenchKeys, state_dir: Path, work: Path, rounds: int) -> list[Figure]:
    logs = work / "p6" / "logs"
    ours_cmd = rimthan_server(release, keys.trust_dir, state_dir, logs / "rimthan-mcp-http.log")
    with http_process(ours_cmd) as ours, http_process(echo_server(logs / "echo-http.log")) as echo:
        wire = anyio.run(_wire, ours.url, echo.url, release, work)
        measured = _drive({"ours": ours, "echo": echo}, wire, rounds)
    calls = measured["calls_per_round"]
    rate = {side: calls / statistics.median(walls) for side, walls in measured["walls"].items()}
    lat = measured["latencies"]
    details = {
        "clients": CLIENTS,
        "load_processes": PROCESSES,
        "calls_per_round": calls,
        "rounds": rounds,
        "calls_per_s": rate,
        "round_wall_s": measured["walls"],
        "p50_s": {side: _percentile(v, 0.50) for side, v in lat.items()},
        "p99_s": {side: _percentile(v, 0.99) for side, v in lat.items()},
        "cpu_s_per_call": measured["cpu_s_per_call"],
    }
    floor_what = (
        f"the SDK echo server over Streamable HTTP, same {CLIENTS} connections, same request bytes, same checks"
    )
    figures = [
        Figure(
            "P6 throughput",
            f"tool calls per second over Streamable HTTP, {CLIENTS} concurrent keep-alive clients replaying "
            "the SDK client's requests of a packaged run, every reply checked",
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
