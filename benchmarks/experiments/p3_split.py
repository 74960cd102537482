"""Where a P3 call's time beyond the mirror goes, measured inside the server processes.

``python -m benchmarks.experiments.p3_split [--runs N] [--transport stdio|http] [--pause MS]``
drives the packaged runs as ``make bench``'s P3 does (each of our calls and its echo,
in turn one first; the mirror, loaded with our result, timed after our next call:
see ``bench_calls.py``),
with ``rimthan-mcp`` and the mirror run under ``timed_serving.py`` (through
``wrapped_serving.py``), which
times each request's handling inside the server process (and ours'
``call_tool``). Then the same calls are replayed through ``call_tool`` in
this process, back to back and with a pause before each. Per tool it prints
medians in milliseconds:

* ``ours``, ``echo``, ``mirror``: the three calls as the client timed them;
* ``ours-mirror``: what our server adds to a call beyond what its result
  costs any server (the SDK, the transport and the client's checks);
* ``handled``, ``m.handled``: the request's handling in our server and in the
  mirror, from the parsed request to the written response (it is all CPU:
  the thread CPU time matches the wall time); stdio only, "-" over HTTP
  (the SDK's stateless HTTP path does not go through its JSON-RPC dispatcher);
* ``served``: our ``call_tool`` within ``handled`` (argument checks, routing,
  engine, result check, canonical text);
* ``warm``: the same calls in one process, back to back;
* ``paused``: the same, each after ``--pause`` ms idle (default 3, about the
  client's round of three calls): the served rhythm without the other processes.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from .. import bench_calls
from ..fixtures import make_keys
from ..servers import ServerCommand, mirror_server, rimthan_server
from ..synthetic import REPO_ROOT
from .wrapped_serving import wrapped

HEADS = ("ours", "echo", "mirror", "ours-mirror", "handled", "m.handled", "served", "warm", "paused")


def _timed_ours(out: Path) -> Callable[[Path, Path, Path, Path], ServerCommand]:
    return lambda release, trust, state_dir, log: wrapped("timed", out, rimthan_server(release, trust, state_dir, log))


def _timed_mirror(out: Path) -> Callable[[Path, Path], ServerCommand]:
    return lambda tools, log: wrapped("timed", out, mirror_server(tools, log))


def _last(values: list[float], count: int) -> float:
    """The median of the last ``count`` values: the timed runs' calls (the untimed first run's come first)."""
    return statistics.median(values[-count:]) if values and count else float("nan")


def _handled(timings: dict[str, list[list[Any]]], tool: str, count: int) -> float:
    return _last([wall for method, name, wall, _cpu in timings["requests"] if name == tool], count)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.experiments.p3_split")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    parser.add_argument("--pause", type=float, default=3.0, help="ms idle before each paused replay call")
    args = parser.parse_args(argv)
    work = REPO_ROOT / "benchmarks" / "work" / "p3-split"
    shutil.rmtree(work, ignore_errors=True)
    ours_file, mirror_file = work / "ours-timings.json", work / "mirror-timings.json"
    with tempfile.TemporaryDirectory(prefix="rimthan-p3-split-") as secrets:
        keys, state_dir = make_keys(Path(secrets)), Path(secrets) / "state"
        release = bench_calls.packaged_release(keys, work)
        served_by = bench_calls.ServedBy(ours=_timed_ours(ours_file), mirror=_timed_mirror(mirror_file))
        timings = anyio.run(
            bench_calls.drive_calls, args.transport, release, keys, state_dir, work, args.runs, served_by
        )
        replaying = bench_calls.InProcess(release, keys, state_dir)
        replaying.replay(timings.recorded)  # untimed warm-up
        warm = replaying.replay(timings.recorded)
        paused = replaying.replay(timings.recorded, pause=args.pause / 1000)
    ours_side, mirror_side = (json.loads(f.read_text("utf-8")) for f in (ours_file, mirror_file))
    print(f"{args.transport}, {args.runs} runs, pause {args.pause:g} ms (milliseconds, medians)")
    print(f"{'tool':<9} " + " ".join(f"{h:>{max(7, len(h))}}" for h in HEADS))
    for tool, short in bench_calls.TOOLS.items():
        n = len(timings.ours[tool])
        ours, echo, mirror = (statistics.median(d[tool]) for d in (timings.ours, timings.echo, timings.mirror))
        served = _last([s for name, s in ours_side["call_tool"] if name == tool], n)
        handled = (_handled(ours_side, tool, n), _handled(mirror_side, tool, n))
        cells = (ours, echo, mirror, ours - mirror, *handled, served, _last(warm[tool], n), _last(paused[tool], n))
        shown = (f"{c * 1000:.2f}" if c == c else "-" for c in cells)  # NaN: not measured
        print(f"{short:<9} " + " ".join(f"{c:>{max(7, len(h))}}" for c, h in zip(shown, HEADS, strict=True)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
