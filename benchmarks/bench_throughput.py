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
servers, so the figure measures the servers. Rounds alternate (echo, ours,
mirror) after one untimed round of each.

The mirror (``mirror_server.py --results``, keyed) lists our tools and
answers each of our recorded requests, by its JSON-RPC id, with the result
our server gave it on the checked pass: the load client replays ours' very
request bytes to it and checks its replies as ours. Its figures over the
echo's are what returning our results costs any server under this load; ours
over its, our server's own work. ``make bench`` prints them beside P6
(:func:`render_p6_mirror`); the echo stays the figure's floor.

Throughput is calls completed over the round's wall time; the ratio is the
echo server's throughput over ours (how many times slower we are). Latency
percentiles are over every call of every measured round. The details keep,
per side, the CPU seconds per call of the server process and of the load
generator, so a reader can see which side was busy.
"""

from __future__ import annotations

import json
import os
import statistics
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from rimthan_host.harness import CatalogueExamples, WorkflowHarness, client_caller

from .bench_calls import DRILL, ROUTE, VERSION, WORKFLOW
from .echo_server import ECHO
from .fixtures import BenchKeys
from .load_client import LoadGenerator, WireCall, capture
from .mirror_server import request_key, write_tools
from .report import Figure
from .servers import CLIENT_MODE, HttpServer, echo_server, http_process, mirror_server, rimthan_server

CLIENTS = 32
# Worker processes of the load generator. Measured on the two-core machine, 32 connections to the echo
# server, 1 vs 2 vs 4 processes alternating: 408 / 398 / 369 calls/s at ~0.6 ms of load-generator CPU per
# call; one process keeps up, more only add scheduling against the server.
PROCESSES = 1
TARGET = 1.5
SIDES = ("echo", "ours", "mirror")
Recorded = list[tuple[str, dict[str, Any]]]


async def _record(url: str, release: Path, work: Path) -> tuple[Recorded, list[types.Tool]]:
    """The calls of one complete packaged run over HTTP (what each client replays), and the tools listed."""
    recorded: Recorded = []
    async with Client(url, mode=CLIENT_MODE) as client:
        tools = (await client.list_tools()).tools
        inner = client_caller(client)

        async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
            recorded.append((name, arguments))
            return await inner(name, arguments)

        examples = CatalogueExamples(
            {VERSION: release / "catalogue" / "examples"}, fail_once=DRILL, answers={"research_route": ROUTE}
        )
        harness = WorkflowHarness(call, examples, project_dir=work / "p6" / "record")
        final = await harness.run(await harness.start(WORKFLOW, initial_version=VERSION))
    if final.status != "completed":
        raise RuntimeError("the recorded packaged run over HTTP did not complete")
    return recorded, tools


async def _wire(ours_url: str, echo_url: str, release: Path, work: Path) -> dict[str, list[WireCall]]:
    """Each side's requests; the mirror's are ours (its tools and results are saved in ``work``/p6)."""
    recorded, tools = await _record(ours_url, release, work)
    ours = await capture(ours_url, recorded)
    write_tools(work / "p6" / "tools.json", tools)
    kept = {request_key(call.request_id): json.loads(call.result) for call in ours}
    (work / "p6" / "results.json").write_text(json.dumps(kept), "utf-8")
    echo = await capture(echo_url, [(ECHO, arguments) for _, arguments in recorded])
    return {"ours": ours, "echo": echo, "mirror": ours}


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
    with ExitStack() as stack:
        spread = {"clients": CLIENTS, "processes": PROCESSES}
        loads = {side: stack.enter_context(LoadGenerator(servers[side].url, wire[side], **spread)) for side in SIDES}
        for index in range(rounds + 1):
            for side, load in loads.items():
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
    mirror_cmd = mirror_server(work / "p6" / "tools.json", logs / "mirror-http.log", work / "p6" / "results.json")
    with http_process(ours_cmd) as ours, http_process(echo_server(logs / "echo-http.log")) as echo:
        wire = anyio.run(_wire, ours.url, echo.url, release, work)
        with http_process(mirror_cmd) as mirror:
            measured = _drive({"ours": ours, "echo": echo, "mirror": mirror}, wire, rounds)
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


def _row(label: str, per_side: dict[str, float], show: str, *, rate: bool = False) -> str:
    """One measure per side, and mirror/echo, ours/mirror as times slower (a rate's ratios are inverted)."""
    echo, mirror, ours = (per_side[side] for side in ("echo", "mirror", "ours"))
    over_echo, over_mirror = (echo / mirror, mirror / ours) if rate else (mirror / echo, ours / mirror)
    shown = [show.format(value) for value in (echo, mirror, ours)]
    return f"  {label:<17} {shown[0]:>10} {shown[1]:>10} {shown[2]:>10} {over_echo:>10.2f}x {over_mirror:>10.2f}x"


def render_p6_mirror(figures: list[Figure]) -> str:
    """P6's echo, mirror and ours side by side: what our results cost any server under load, what is our work."""
    found = [f.details for f in figures if f.id == "P6 throughput" and "mirror" in f.details.get("calls_per_s", {})]
    if not found:
        return ""
    details = found[0]
    cpu = {side: spent["server_s"] for side, spent in details["cpu_s_per_call"].items()}
    ms = {key: {side: value * 1000 for side, value in details[key].items()} for key in ("p50_s", "p99_s")}
    return "\n".join(
        [
            "P6 beside the same results under the same load from a server that does none of our work "
            "(the keyed mirror, benchmarks/mirror_server.py --results; ratios are times slower):",
            f"  {'measure':<17} {'echo':>10} {'mirror':>10} {'ours':>10} {'mirror/echo':>11} {'ours/mirror':>11}",
            _row("throughput", details["calls_per_s"], "{:.1f}/s", rate=True),
            _row("p50", ms["p50_s"], "{:.2f} ms"),
            _row("p99", ms["p99_s"], "{:.2f} ms"),
            _row("server CPU/call", {side: value * 1000 for side, value in cpu.items()}, "{:.3f} ms"),
        ]
    )
