"""Where a P3 call's time beyond the mirror goes: our ``call_tool`` as served, warm, and after a pause.

``python -m benchmarks.experiments.p3_split [--runs N] [--transport stdio|http] [--pause MS]``
drives the packaged runs as ``make bench``'s P3 does (each of our calls, then
the echo, then the mirror loaded with our result: see ``bench_calls.py``),
with ``rimthan-mcp`` under ``served_call_tool.py``, which times ``call_tool``
inside the serving process. Then the same calls are replayed through
``call_tool`` in this process, back to back and with a pause before each.
Per tool it prints medians in milliseconds:

* ``ours``, ``echo``, ``mirror``: the three calls as the client timed them;
* ``ours-mirror``: what our server adds to a call beyond what its result
  costs any server (the SDK, the transport and the client's checks);
* ``served``: ``call_tool`` in the serving process (argument checks,
  routing, engine, result check, canonical text);
* ``warm``: the same calls in one process, back to back;
* ``paused``: the same, each after ``--pause`` ms idle (default 3, about the
  client's round of three calls): the served rhythm without the other processes;
* ``rest``: ``ours-mirror - served``: our request handling outside the tool
  call (the parse-error guard, the log notification), as served.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path
from unittest.mock import patch

import anyio

from .. import bench_calls
from ..fixtures import make_keys
from ..servers import ServerCommand, rimthan_server
from ..synthetic import REPO_ROOT

WRAPPER = Path(__file__).with_name("served_call_tool.py")
HEADS = ("ours", "echo", "mirror", "ours-mirror", "served", "warm", "paused", "rest")


def _timed_server(out: Path) -> Callable[[Path, Path, Path, Path], ServerCommand]:
    """``rimthan_server`` as the benchmark starts it, run under the ``call_tool`` timer (writing to ``out``)."""

    def timed(release: Path, trust: Path, state_dir: Path, log: Path) -> ServerCommand:
        command = rimthan_server(release, trust, state_dir, log)
        return ServerCommand(command.name, (str(WRAPPER), str(out), *command.args), log)

    return timed


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.experiments.p3_split")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    parser.add_argument("--pause", type=float, default=3.0, help="ms idle before each paused replay call")
    args = parser.parse_args(argv)
    work = REPO_ROOT / "benchmarks" / "work" / "p3-split"
    shutil.rmtree(work, ignore_errors=True)
    served_file = work / "served.json"
    with tempfile.TemporaryDirectory(prefix="rimthan-p3-split-") as secrets:
        keys, state_dir = make_keys(Path(secrets)), Path(secrets) / "state"
        release = bench_calls.packaged_release(keys, work)
        with patch.object(bench_calls, "rimthan_server", _timed_server(served_file)):
            timings = anyio.run(bench_calls.drive_calls, args.transport, release, keys, state_dir, work, args.runs)
        replaying = bench_calls.InProcess(release, keys, state_dir)
        replaying.replay(timings.recorded)  # untimed warm-up
        warm = replaying.replay(timings.recorded)
        paused = replaying.replay(timings.recorded, pause=args.pause / 1000)
    seconds = json.loads(served_file.read_text("utf-8"))
    served_calls = seconds[len(seconds) - len(timings.recorded) :]  # after the untimed run's calls
    print(f"{args.transport}, {args.runs} runs, pause {args.pause:g} ms (milliseconds, medians)")
    print(f"{'tool':<9} " + " ".join(f"{h:>{max(7, len(h))}}" for h in HEADS))
    for tool, short in bench_calls.TOOLS.items():
        ours, echo, mirror = (_median(d[tool]) for d in (timings.ours, timings.echo, timings.mirror))
        served = _median([s for name, s in served_calls if name == tool])
        beyond = ours - mirror
        cells = (ours, echo, mirror, beyond, served, _median(warm[tool]), _median(paused[tool]), beyond - served)
        print(f"{short:<9} " + " ".join(f"{c * 1000:>{max(7, len(h))}.2f}" for c, h in zip(cells, HEADS, strict=True)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
