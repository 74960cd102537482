"""The fixed-cost experiment drives P3 against the real server and one that answers starts from a cache.

``benchmarks/experiments/p3_fixed_cost.py``: the cached server must really
skip a start's work (every start returns the first start's checkpoint) and
the served one must not (each start issues its own); both drives complete
their packaged runs, and the report has a row per round and the medians.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the benchmarks are a package at the repository root
from benchmarks.experiments.p3_fixed_cost import measure, report  # noqa: E402


def test_the_cached_server_answers_every_start_with_one_checkpoint(tmp_path: Path) -> None:
    pairs = measure("stdio", runs=2, rounds=1, work=tmp_path / "work")

    [(served, cached)] = pairs
    assert not served.cached and cached.cached
    assert served.starts is None
    assert cached.starts == {"served": 1, "cached": 2}  # the warm-up run's start, then the two timed runs'
    for figure in (served.ours, served.mirror, cached.ours, cached.mirror):
        assert figure > 0
    lines = report(pairs)
    assert [line.split()[0] for line in lines] == ["round", "1", "median"]
