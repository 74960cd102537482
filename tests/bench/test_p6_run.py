"""A quick P6 run records and prints the keyed mirror beside the echo and ours.

Under load the mirror (mirror_server.py --results; its own behaviour is
tested in test_mirror_server.py) answers each request with the result kept
for its JSON-RPC id, so ``make bench`` can split P6's gap to the echo into
what our results cost any server and what is our server's own work. The
echo stays the figure's floor.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the benchmarks are a package at the repository root
from benchmarks.bench_throughput import render_p6_mirror  # noqa: E402
from benchmarks.config import QUICK  # noqa: E402
from benchmarks.report import Figure  # noqa: E402
from benchmarks.runner import run  # noqa: E402


def test_a_quick_p6_run_records_and_prints_the_mirror_beside_echo_and_ours(tmp_path: Path) -> None:
    plan = dataclasses.replace(QUICK, profile=False)
    document = run(plan, only={"P6"}, work=tmp_path / "work", out=tmp_path / "results.json")

    throughput = next(f for f in document["figures"] if f["id"] == "P6 throughput")
    details = throughput["details"]
    for key in ("calls_per_s", "p50_s", "p99_s", "cpu_s_per_call"):
        assert set(details[key]) == {"echo", "ours", "mirror"}
    assert all(rate > 0 for rate in details["calls_per_s"].values())
    assert throughput["floor"] == details["calls_per_s"]["echo"]  # the echo stays the figure's floor
    ours, echo = throughput["ours"], throughput["floor"]
    table = render_p6_mirror([Figure("P6 throughput", "", ours, echo, "calls/s", "rate", 1.5, details=details)])
    assert "mirror/echo" in table and "ours/mirror" in table
    assert [line.split()[0] for line in table.splitlines()[2:]] == ["throughput", "p50", "p99", "server"]
