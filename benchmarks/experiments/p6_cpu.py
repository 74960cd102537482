"""Server CPU per tool call under P6's load, two server trees interleaved: an A/B that wall time cannot give.

``python -m benchmarks.experiments.p6_cpu [--base TREE] [--rounds N] [--log-level L] [--spy OUT]``
starts ``rimthan-mcp serve --transport http`` twice on the packaged release, as
P6 does: side ``a`` imports the server and core packages of ``TREE`` (a
checkout, first on ``PYTHONPATH``; without ``--base``, this tree again: the
noise floor), side ``b`` this tree's. The SDK client records one packaged run
against ``b`` (every check, as P6), and ``load_client`` replays those request
bytes from 32 keep-alive connections, every reply checked, in rounds that
alternate which side goes first. Each round's figure is the server process's
user + system CPU seconds (``/proc``) over the calls it answered: on a machine
shared with other work, CPU time per call is what the servers' code decides,
where wall time is mostly the neighbours. It prints each side's median and b
over a.

``--spy OUT`` samples side ``b`` with ``py-spy`` (every thread, idle samples
dropped) during its rounds and writes the collapsed stacks to ``OUT``, with a
summary of own samples per library and per function.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

import anyio

from .. import bench_calls
from ..bench_throughput import CLIENTS, _record
from ..fixtures import make_keys
from ..load_client import LoadGenerator, WireCall, capture
from ..servers import HttpServer, rimthan_server
from ..synthetic import REPO_ROOT
from .wrapped_serving import SCRIPT as WRAPPER

sys.path.insert(0, str(REPO_ROOT / "tests"))
from support.processes import http_server_process  # noqa: E402

SIDES = ("a", "b")
# (label, substring of a collapsed frame's file), first match wins: a frame's own samples by what does the work.
LIBRARIES = (
    ("rimthan server", "rimthan_workflow_mcp"),
    ("rimthan core", "rimthan_workflow_registry"),
    ("jsonschema-rs / jsonschema", "jsonschema"),
    ("rfc8785", "rfc8785"),
    ("pydantic", "pydantic"),
    ("mcp sdk", "/mcp"),
    ("starlette", "starlette"),
    ("uvicorn / h11", "uvicorn"),
    ("h11", "h11"),
    ("anyio", "anyio"),
    ("asyncio", "asyncio"),
    ("logging", "logging"),
    ("json", "/json/"),
    ("threading", "threading"),
)


def _env(tree: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    if tree is not None:
        first = [str(tree / "server" / "src"), str(tree / "core" / "src")]
        env["PYTHONPATH"] = os.pathsep.join([*first, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def _user_sys(pid: int) -> tuple[float, float]:
    """User and system CPU seconds of process ``pid`` so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def _round(
    server: HttpServer, load: LoadGenerator, calls: int, windows: list[tuple[float, float]] | None = None
) -> tuple[float, float]:
    """One round's server CPU per call: (user + system, system); its monotonic span is added to ``windows``."""
    user, system = _user_sys(server.pid)
    began = time.monotonic()
    load.round()
    if windows is not None:
        windows.append((began, time.monotonic()))
    user_after, system_after = _user_sys(server.pid)
    return (user_after - user + system_after - system) / calls, (system_after - system) / calls


def _summarise_spy(collapsed: Path, top: int = 14) -> str:
    by_library: Counter[str] = Counter()
    by_function: Counter[str] = Counter()
    total = 0
    for line in collapsed.read_text("utf-8").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        leaf = stack.rsplit(";", 1)[-1]
        samples = int(count)
        total += samples
        by_function[leaf] += samples
        by_library[next((name for name, needle in LIBRARIES if needle in leaf), "other")] += samples
    lines = [f"py-spy: {total} samples (own), by library:"]
    lines += [f"  {n * 100 / total:5.1f}%  {name}" for name, n in by_library.most_common()]
    lines.append("heaviest functions (own):")
    lines += [f"  {n * 100 / total:5.1f}%  {name}" for name, n in by_function.most_common(top)]
    return "\n".join(lines)


def replay_child(argv: list[str]) -> int:
    """``--replay-child RELEASE TRUST STATE CALLS REPEAT``: our ``call_tool`` on the recorded calls, in process.

    Prints the process CPU seconds per call over ``REPEAT`` replays, after three untimed ones.
    """
    from ..fixtures import BenchKeys

    release, trust, state, calls_file = (Path(a) for a in argv[:4])
    recorded = [bench_calls.Call(name, arguments, "") for name, arguments in json.loads(calls_file.read_text())]
    replaying = bench_calls.InProcess(release, BenchKeys(trust, trust, ""), state)
    for _ in range(3):
        replaying.replay(recorded)
    started = time.process_time()
    for _ in range(int(argv[4])):
        replaying.replay(recorded)
    print((time.process_time() - started) / (int(argv[4]) * len(recorded)))
    return 0


def _in_process(trees: dict[str, Path | None], child: list[str], rounds: int) -> dict[str, list[float]]:
    """Our ``call_tool`` alone, per side, in fresh processes taking turns: CPU seconds per call."""
    cpu: dict[str, list[float]] = {side: [] for side in SIDES}
    for index in range(rounds):
        for side in SIDES if index % 2 == 0 else SIDES[::-1]:
            out = subprocess.run(
                [sys.executable, "-m", "benchmarks.experiments.p6_cpu", "--replay-child", *child],
                cwd=REPO_ROOT,
                env=_env(trees[side]),
                check=True,
                capture_output=True,
                text=True,
            )
            cpu[side].append(float(out.stdout.strip().splitlines()[-1]))
    return cpu


def main(argv: list[str] | None = None) -> int:
    if argv is None and sys.argv[1:2] == ["--replay-child"]:
        return replay_child(sys.argv[2:])
    parser = argparse.ArgumentParser(prog="python -m benchmarks.experiments.p6_cpu")
    parser.add_argument("--base", type=Path, help="the tree side a serves from (default: this one)")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=4, help="each connection replays the run this many times")
    parser.add_argument(
        "--log-level", default="warning", help="the servers' --log-level, or A,B one each (make bench: warning)"
    )
    parser.add_argument("--in-process", type=int, default=0, help="also N rounds of call_tool alone, in process")
    parser.add_argument("--gc", action="store_true", help="count the cyclic collector's passes and CPU (gc_serving)")
    parser.add_argument("--spy", type=Path, help="py-spy side b's rounds into this collapsed-stack file")
    args = parser.parse_args(argv)
    work = REPO_ROOT / "benchmarks" / "work" / "p6-cpu"
    with tempfile.TemporaryDirectory(prefix="rimthan-p6-cpu-") as secrets, ExitStack() as stack:
        keys, state_dir = make_keys(Path(secrets)), Path(secrets) / "state"
        release = bench_calls.packaged_release(keys, work)
        command = rimthan_server(release, keys.trust_dir, state_dir, work / "unused.log")
        argv_ = [sys.executable, *command.args, "--transport", "http", "--port", "0"]
        levels = dict(zip(SIDES, (args.log_level.split(",") * 2)[:2], strict=True))
        level_at = argv_.index("--log-level") + 1
        trees = {"a": args.base, "b": None}
        served = {side: [*argv_[:level_at], levels[side], *argv_[level_at + 1 :]] for side in SIDES}
        if args.gc:
            served = {
                side: [a[0], str(WRAPPER), "gc", str(work / f"gc-{side}.json"), *a[1:]] for side, a in served.items()
            }
        servers = {
            side: stack.enter_context(http_server_process(served[side], cwd=REPO_ROOT, env=_env(tree), timeout=60))
            for side, tree in trees.items()
        }
        recorded, _tools = anyio.run(_record, servers["b"].url, release, work)
        wire: list[WireCall] = anyio.run(capture, servers["b"].url, recorded) * args.repeat
        loads = {
            side: stack.enter_context(LoadGenerator(s.url, wire, clients=CLIENTS, processes=1))
            for side, s in servers.items()
        }
        calls = CLIENTS * len(wire)
        for side in SIDES:  # untimed warm-up
            _round(servers[side], loads[side], calls)
        spy = None
        if args.spy:
            spy = subprocess.Popen(
                [
                    "py-spy",
                    "record",
                    "--pid",
                    str(servers["b"].pid),
                    "--format",
                    "raw",
                    "--rate",
                    "1000",
                    "--gil",
                    "--output",
                    str(args.spy),
                    "--nonblocking",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        cpu: dict[str, list[float]] = {side: [] for side in SIDES}
        system: dict[str, list[float]] = {side: [] for side in SIDES}
        windows: dict[str, list[tuple[float, float]]] = {side: [] for side in SIDES}
        for index in range(args.rounds):
            for side in SIDES if index % 2 == 0 else SIDES[::-1]:
                total, kernel = _round(servers[side], loads[side], calls, windows[side])
                cpu[side].append(total)
                system[side].append(kernel)
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(timeout=60)
        alone = None
        if args.in_process:
            (work / "calls.json").write_text(json.dumps(recorded), "utf-8")
            child = [str(release), str(keys.trust_dir), str(state_dir), str(work / "calls.json"), "20"]
            alone = _in_process(trees, child, args.in_process)
    a, b = (statistics.median(cpu[side]) for side in SIDES)
    print(f"server CPU per call (user+sys), {args.rounds} interleaved rounds of {calls} calls, log {args.log_level}")
    for side in SIDES:
        shown = " ".join(f"{v * 1e6:.0f}" for v in cpu[side])
        kernel = statistics.median(system[side]) * 1e6
        print(f"  {side}: median {statistics.median(cpu[side]) * 1e6:.0f} us (system {kernel:.0f})  [{shown}]")
    pairs = [y / x for x, y in zip(cpu["a"], cpu["b"], strict=True)]
    print(f"  b/a: {b / a:.3f} (median of per-round ratios {statistics.median(pairs):.3f})")
    if args.gc:
        for side in SIDES:
            seen = json.loads((work / f"gc-{side}.json").read_text("utf-8"))
            timed = [e for e in seen["events"] if any(start <= e[2] <= end for start, end in windows[side])]
            per_gen = [[e[1] for e in timed if e[0] == g] for g in range(3)]
            spent = ", ".join(f"gen{g} {len(s)} x {sum(s) * 1000:.0f} ms" for g, s in enumerate(per_gen))
            per_call = sum(e[1] for e in timed) / (calls * args.rounds) * 1e6
            print(f"  {side} cyclic collector in the timed rounds: {spent}; {per_call:.0f} us per call")
    if alone is not None:
        print(f"call_tool alone, in process ({args.in_process} interleaved processes per side, 20 replays each)")
        for side in SIDES:
            shown = " ".join(f"{v * 1e6:.0f}" for v in alone[side])
            print(f"  {side}: median {statistics.median(alone[side]) * 1e6:.0f} us  [{shown}]")
        ratios = [y / x for x, y in zip(alone["a"], alone["b"], strict=True)]
        print(f"  b/a: median of per-round ratios {statistics.median(ratios):.3f}")
    if args.spy and args.spy.exists():
        print(_summarise_spy(args.spy))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
