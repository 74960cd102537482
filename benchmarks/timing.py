"""Repetition and medians: every figure is measured beside its floor, interleaved.

A measurement is a callable returning the seconds it measured (so a probe
subprocess can report an in-process duration); :func:`timed` turns a plain
action into one. :func:`paired` runs ours and the floor alternately after one
untimed warm-up of each (warm page cache, warm imports), so a slow patch on a
shared machine hits both sides rather than one; :func:`alternating` does the
same for any number of measurements.
"""

from __future__ import annotations

import resource
import statistics
import time
from collections.abc import Callable, Sequence
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


def children_cpu(measure: Measure, into: list[float]) -> Measure:
    """``measure``, appending to ``into`` the CPU seconds (user + system) of the child processes it waited for.

    Wall time on a shared machine is also the neighbours' and the disk's; the
    children's CPU time is what the measured processes themselves did.
    """

    def measure_cpu() -> float:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        elapsed = measure()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        into.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        return elapsed

    return measure_cpu


def repeat(measure: Measure, reps: int, *, warmup: int = 1) -> Sample:
    for _ in range(warmup):
        measure()
    return Sample(tuple(measure() for _ in range(reps)))


def alternating(measures: Sequence[Measure], reps: int, *, warmup: int = 1) -> list[Sample]:
    """``reps`` rounds of every one of ``measures`` in turn, after ``warmup`` untimed rounds; a sample each."""
    for _ in range(warmup):
        for measure in measures:
            measure()
    values: list[list[float]] = [[] for _ in measures]
    for _ in range(reps):
        for taken, measure in zip(values, measures, strict=True):
            taken.append(measure())
    return [Sample(tuple(taken)) for taken in values]


def paired(ours: Measure, floor: Measure, reps: int, *, warmup: int = 1) -> tuple[Sample, Sample]:
    """``reps`` alternating measurements of the floor, then ours, after ``warmup`` untimed runs of each."""
    floor_sample, ours_sample = alternating([floor, ours], reps, warmup=warmup)
    return ours_sample, floor_sample
