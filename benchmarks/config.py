"""What a run measures: the issue's sizes (``full``) or small ones for a smoke run (``quick``)."""

from __future__ import annotations

from dataclasses import dataclass

from .synthetic import BulkSpec, LongSpec

MiB = 1 << 20


@dataclass(frozen=True)
class Plan:
    name: str
    bulk: tuple[BulkSpec, ...]  # P1 runs on each; P1m and P2 on each too (the first is the headline one)
    long: LongSpec  # P4: per-call cost at the last step vs step 2
    reps_verify: int  # P1: fresh-process load+verify repetitions
    reps_build: int  # P2: CLI builds per catalogue (each writes and fsyncs the whole release)
    reps_engine: int  # P4: replays of each call at step 2 and at the last step
    reps_calls: int  # P3/P3h: full packaged runs per transport
    reps_start: int  # P5: server starts
    rounds_throughput: int  # P6: measured rounds of 32 concurrent clients replaying a packaged run
    profile: bool = True  # profile the figures that are above target


FULL = Plan(
    name="full",
    bulk=(BulkSpec(10_000, 256 * MiB), BulkSpec(100, 1 * MiB)),
    long=LongSpec(200),
    reps_verify=9,
    reps_build=5,
    reps_engine=30,
    reps_calls=7,
    reps_start=9,
    rounds_throughput=3,
)

QUICK = Plan(
    name="quick",
    bulk=(BulkSpec(1_000, 16 * MiB), BulkSpec(100, 1 * MiB)),
    long=LongSpec(50),
    reps_verify=3,
    reps_build=2,
    reps_engine=10,
    reps_calls=1,
    reps_start=3,
    rounds_throughput=1,
)

PLANS = {plan.name: plan for plan in (FULL, QUICK)}
