"""Repetition and medians: every figure is measured beside its floor, interleaved.

A measurement is a callable returning the seconds it measured (so a probe
subprocess can report an in-process duration); :func:`timed` turns a plain
action into one. :func:`paired` runs ours and the floor alternately after one
untimed warm-up of each (warm page cache, warm imports), so a slow patch on a
shared machine hits both sides rather than one.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Measure = Callable[[], float]


@dataclass(frozen=True)
class Sample:
    """Repeated measurements of one quantity (seconds unless said otherwise)."""

    values: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def best(self) -> float:
        return min(self.values)

    def to_json(self) -> dict[str, Any]:
        return {"median": self.median, "min": self.best, "values": list(self.values)}


def timed(action: Callable[[], Any]) -> Measure:
    """A measurement of ``action``'s wall time."""

    def measure() -> float:
        started = time.perf_counter()
        action()
        return time.perf_counter() - started

    return measure


def repeat(measure: Measure, reps: int, *, warmup: int = 1) -> Sample:
    for _ in range(warmup):
        measure()
    return Sample(tuple(measure() for _ in range(reps)))


def paired(ours: Measure, floor: Measure, reps: int, *, warmup: int = 1) -> tuple[Sample, Sample]:
    """``reps`` alternating measurements of ours and the floor, after ``warmup`` untimed runs of each."""
    for _ in range(warmup):
        floor()
        ours()
    ours_values: list[float] = []
    floor_values: list[float] = []
    for _ in range(reps):
        floor_values.append(floor())
        ours_values.append(ours())
    return Sample(tuple(ours_values)), Sample(tuple(floor_values))
