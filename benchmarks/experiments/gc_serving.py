"""The ``gc`` instrument of ``wrapped_serving.py``: the cyclic collector's passes and their CPU time, per generation.

``python benchmarks/experiments/wrapped_serving.py gc OUT -m MODULE ARGS...`` serves
unchanged but for a ``gc.callbacks`` entry that counts each collection and adds
the thread CPU time it took to its generation's total, written to ``OUT`` as
JSON at exit: ``{"collections": [n0, n1, n2], "cpu_s": [s0, s1, s2], "events": [[generation,
cpu_s, monotonic_s], ...]}`` (``events``: each collection, when it ended on the system's
monotonic clock, which every process reads alike). Every
collection runs on the thread that triggered it, so the thread CPU time between
its ``start`` and ``stop`` callbacks is the collection's own.
"""

from __future__ import annotations

import gc
import time
from typing import Any


def instrument(module: str) -> dict[str, list[Any]]:
    record: dict[str, list[Any]] = {"collections": [0, 0, 0], "cpu_s": [0.0, 0.0, 0.0], "events": []}
    started = [0.0]

    def watch(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.thread_time()
            return
        generation, spent = info["generation"], time.thread_time() - started[0]
        record["collections"][generation] += 1
        record["cpu_s"][generation] += spent
        record["events"].append([generation, spent, time.monotonic()])

    gc.callbacks.append(watch)
    return record
