"""A quick P3 run times the echo before our call and after it, in turn, for every tool.

Where a call falls in the client's sequence costs differently (see
bench_calls.py): with a fixed order one side would always get the cheaper
place. Every figure's details say, per call, whether its echo went first.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the benchmarks are a package at the repository root
from benchmarks.config import QUICK  # noqa: E402
from benchmarks.runner import run  # noqa: E402


def test_a_quick_p3_run_takes_turns_putting_the_echo_first(tmp_path: Path) -> None:
    plan = dataclasses.replace(QUICK, profile=False)
    document = run(plan, only={"P3"}, work=tmp_path / "work", out=tmp_path / "results.json")

    figures = [f for f in document["figures"] if f["id"].startswith(("P3 ", "P3h "))]
    assert len(figures) == 8  # four tools, stdio and HTTP
    for figure in figures:
        details = figure["details"]
        turns = details["echo_first"]
        assert len(turns) == len(details["ours_s"]) == len(details["echo_s"]) == len(details["mirror_s"]) > 0
        assert all(a != b for a, b in zip(turns, turns[1:], strict=False)), (figure["id"], turns)
        if len(turns) > 1:
            assert set(turns) == {True, False}


def test_no_timed_call_follows_its_own_servers_last_call(tmp_path: Path) -> None:
    """The mirror is timed a call later than its load; every one of our calls gets its mirror, the last one too."""
    import anyio

    from benchmarks.bench_calls import TOOLS, drive_calls, packaged_release
    from benchmarks.fixtures import make_keys

    keys = make_keys(tmp_path / "keys")
    release = packaged_release(keys, tmp_path)
    timings = anyio.run(drive_calls, "stdio", release, keys, tmp_path / "state", tmp_path, 1)

    sequence = timings.sequence
    ops = [entry.split()[0] for entry in sequence]
    assert ops.count("load") == ops.count("mirror") == ops.count("ours") > 0
    for before, entry in zip(sequence, sequence[1:], strict=False):
        if entry.startswith("mirror"):
            assert not before.startswith("load"), (before, entry)
    for tool in TOOLS:
        assert len(timings.mirror[tool]) == len(timings.ours[tool]) == len(timings.echo[tool])
