"""How much of P3's ``start`` figure is our server's work, and how much any start result costs.

``python -m benchmarks.experiments.p3_fixed_cost [--runs N] [--rounds R] [--transport stdio|http]``
drives P3's packaged runs (:func:`~benchmarks.bench_calls.drive_calls`) ``R``
times against ``rimthan-mcp`` as served and ``R`` times against the same
server answering every start with its first start's result
(``cached_serving.py``, through ``wrapped_serving.py``), in turn. Per round it prints, over the echo floor
of the same drive (medians):

* ``served``: the P3 start figure as ``make bench`` measures it;
* ``cached``: our server doing none of a start's work: the SDK, the
  transport, our handler and the 52 KB result's bytes, as our process serves them;
* ``mirror``: the mirror of each drive (a server that is not ours returning
  our start result: see ``mirror_server.py``).

``served - cached`` is a start's own work (arguments, confirmed state,
checkpoint, result checks and canonical text); ``cached - mirror`` what our
process adds to a call it does nothing in. Against the 1.5x target, ``cached``
says how much of the echo's time is left for that work.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
from rimthan_workflow_mcp.tool_contracts import START_WORKFLOW as START

from .. import bench_calls
from ..fixtures import BenchKeys, make_keys
from ..servers import ServerCommand, rimthan_server
from ..synthetic import REPO_ROOT
from .wrapped_serving import wrapped


def _cached_ours(out: Path) -> Callable[[Path, Path, Path, Path], ServerCommand]:
    return lambda release, trust, state_dir, log: wrapped("cached", out, rimthan_server(release, trust, state_dir, log))


@dataclass(frozen=True)
class StartRound:
    """One drive's start figures over its echo: ours (served or cached) and the mirror's."""

    cached: bool
    ours: float
    mirror: float
    starts: dict[str, int] | None  # cached: how many starts the server served in full and from its cache


def drive(
    transport: str, release: Path, keys: BenchKeys, state_dir: Path, work: Path, runs: int, *, cached: bool
) -> StartRound:
    """One P3 drive over ``transport``; ``cached``: against ``cached_serving.py``."""
    out = work / "cached-starts.json"
    out.unlink(missing_ok=True)
    served_by = bench_calls.ServedBy(ours=_cached_ours(out)) if cached else bench_calls.ServedBy()
    timings = anyio.run(bench_calls.drive_calls, transport, release, keys, state_dir, work, runs, served_by)
    echo = statistics.median(timings.echo[START])
    return StartRound(
        cached,
        statistics.median(timings.ours[START]) / echo,
        statistics.median(timings.mirror[START]) / echo,
        json.loads(out.read_text("utf-8")) if cached else None,
    )


def measure(transport: str, runs: int, rounds: int, work: Path) -> list[tuple[StartRound, StartRound]]:
    """``rounds`` pairs of drives (served, then cached) on one packaged release and one state directory."""
    pairs: list[tuple[StartRound, StartRound]] = []
    with tempfile.TemporaryDirectory(prefix="rimthan-p3-fixed-") as secrets:
        keys, state_dir = make_keys(Path(secrets)), Path(secrets) / "state"
        release = bench_calls.packaged_release(keys, work)
        for _ in range(rounds):
            served = drive(transport, release, keys, state_dir, work, runs, cached=False)
            pairs.append((served, drive(transport, release, keys, state_dir, work, runs, cached=True)))
    return pairs


def report(pairs: list[tuple[StartRound, StartRound]]) -> list[str]:
    """One line per round (served, cached, and each drive's mirror, over its echo), then the medians."""
    lines = [f"{'round':<7} {'served':>7} {'cached':>7} {'mirror':>7} {'mirror':>7}"]
    rows = [(s.ours, c.ours, s.mirror, c.mirror) for s, c in pairs]
    for label, row in [*((str(i + 1), r) for i, r in enumerate(rows)), ("median", _medians(rows))]:
        lines.append(f"{label:<7} " + " ".join(f"{v:>6.2f}x" for v in row))
    return lines


def _medians(rows: Sequence[tuple[float, ...]]) -> tuple[float, ...]:
    return tuple(statistics.median(column) for column in zip(*rows, strict=True))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.experiments.p3_fixed_cost")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    args = parser.parse_args(argv)
    work = REPO_ROOT / "benchmarks" / "work" / "p3-fixed-cost"
    shutil.rmtree(work, ignore_errors=True)
    pairs = measure(args.transport, args.runs, args.rounds, work)
    print(f"P3 start over {args.transport}, {args.runs} runs a drive, over the echo (medians)")
    print("\n".join(report(pairs)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
