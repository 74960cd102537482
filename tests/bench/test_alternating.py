"""``alternating`` times every measurement once per round, in turn, so a slow patch of the machine hits each.

P2 at 1 MiB times the floor, the build and the libraries a build imports this
way: the libraries' ratio to the floor is only fair when both share rounds.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the benchmarks are a package at the repository root
from benchmarks.timing import Measure, alternating, paired  # noqa: E402


def _recording(name: str, calls: list[str]) -> Measure:
    def measure() -> float:
        calls.append(name)
        return float(len(calls))

    return measure


def test_each_round_takes_every_measurement_in_turn_after_the_untimed_rounds() -> None:
    calls: list[str] = []
    a, b, c = (_recording(name, calls) for name in "abc")
    samples = alternating([a, b, c], 2, warmup=1)
    assert calls == list("abc" * 3)
    assert [s.values for s in samples] == [(4.0, 7.0), (5.0, 8.0), (6.0, 9.0)]  # the warm-up round is not kept


def test_paired_times_the_floor_first_and_returns_ours_first() -> None:
    calls: list[str] = []
    ours, floor = _recording("ours", calls), _recording("floor", calls)
    ours_sample, floor_sample = paired(ours, floor, 2, warmup=0)
    assert calls == ["floor", "ours", "floor", "ours"]
    assert ours_sample.values == (2.0, 4.0) and floor_sample.values == (1.0, 3.0)
