"""Where a P3 call's time beyond the mirror goes: our ``call_tool`` as served, and the rest.

``python -m benchmarks.experiments.p3_split [--runs N] [--transport stdio|http]``
measures P3 as ``make bench`` does (each of our calls, then the echo, then
the mirror loaded with our result: see ``bench_calls.py``), with one change:
``rimthan-mcp`` runs under ``served_call_tool.py``, which times ``call_tool``
inside the serving process. Per tool it prints (medians, milliseconds):

* ``ours-mirror``: what our server adds to a call beyond what its result costs
  any server (the SDK, the transport and the client's checks);
* ``call_tool``: the part of that spent in our tool call itself, as served
  (argument checks, routing, engine, result check, canonical text);
* ``warm``: the same calls replayed in one process, back to back (the
  ``in_process_call_s`` of ``make bench``'s profile);
* ``rest``: ``ours-mirror - call_tool``: our server's request handling outside
  the tool call (the parse-error guard, the log notification) and what the
  serving process pays that a warm loop does not (caches the client and the
  two floor servers evicted between calls).
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

from .. import bench_calls
from ..fixtures import make_keys
from ..servers import ServerCommand, rimthan_server
from ..synthetic import REPO_ROOT

WRAPPER = Path(__file__).with_name("served_call_tool.py")


def _timed_server(out: Path) -> Callable[[Path, Path, Path, Path], ServerCommand]:
    """``rimthan_server`` as the benchmark starts it, run under the ``call_tool`` timer (writing to ``out``)."""

    def timed(release: Path, trust: Path, state_dir: Path, log: Path) -> ServerCommand:
        command = rimthan_server(release, trust, state_dir, log)
        return ServerCommand(command.name, (str(WRAPPER), str(out), *command.args), log)

    return timed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.experiments.p3_split")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    args = parser.parse_args(argv)
    work = REPO_ROOT / "benchmarks" / "work" / "p3-split"
    shutil.rmtree(work, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="rimthan-p3-split-") as secrets:
        keys = make_keys(Path(secrets))
        release = bench_calls.packaged_release(keys, work)
        served = work / "served.json"
        with patch.object(bench_calls, "rimthan_server", _timed_server(served)):
            figures = bench_calls.run_p3(
                release, keys, Path(secrets) / "state", work, args.runs, True, transports=(args.transport,)
            )
    seconds = json.loads(served.read_text("utf-8"))
    timed = seconds[len(seconds) - sum(f.details["calls"] for f in figures) :]  # the warm-up run's calls first
    profiles = [f.details["profile"]["in_process_call_s"] for f in figures if "profile" in f.details]
    warm: dict[str, float] = profiles[0] if profiles else {}  # profiled (and replayed) only above target
    heads = ("ours", "echo", "mirror", "ours-mirror", "call_tool", "warm", "rest")
    print(f"{'figure':<13} " + " ".join(f"{h:>{max(7, len(h))}}" for h in heads))
    for figure, (tool, short) in zip(figures, bench_calls.TOOLS.items(), strict=True):
        mirror = figure.details["mirror"]["median_s"]
        call = statistics.median(s for name, s in timed if name == tool)
        beyond = figure.ours - mirror
        cells = [figure.ours, figure.floor or 0.0, mirror, beyond, call]
        shown = " ".join(f"{c * 1000:>{w}.2f}" for c, w in zip(cells, (7, 7, 7, 11, 9), strict=True))
        hot = f"{warm[short] * 1000:>7.2f}" if short in warm else f"{'-':>7}"
        print(f"{figure.id:<13} {shown} {hot} {(beyond - call) * 1000:>7.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
