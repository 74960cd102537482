"""The start-result experiment records a real start and prices each part of it.

``benchmarks/experiments/p3_start_result.py`` drives one packaged run against
the real server over stdio, keeps the start result the SDK client received,
and times the client's and the server's work on it. The result it keeps is a
real start (status ``active``, the setup step with its host assets' texts),
the canonical text beside ``structuredContent`` is that same value again, byte
for byte, and every piece of work it times runs on that result and costs
something.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the benchmarks are a package at the repository root
from benchmarks.experiments.p3_start_result import (  # noqa: E402
    byte_rows,
    load,
    pieces,
    record,
    report,
    save,
    timed,
)


def test_a_recorded_start_is_priced_part_by_part(tmp_path: Path) -> None:
    work, secrets = tmp_path / "work", tmp_path / "secrets"
    secrets.mkdir()
    start = record(work, secrets)
    save(start, work)
    assert load(work) == start

    structured = start.result["structuredContent"]
    assert structured["status"] == "active" and structured["step"]["id"] == "setup-workspace"
    assert all(asset["text"] for asset in structured["step"]["host_assets"])
    text = start.result["content"][0]["text"]
    assert json.loads(text) == structured  # the protocol's second copy: the same value as canonical text
    rows = dict(byte_rows(start))
    assert rows["  structuredContent"] == len(text.encode("utf-8"))
    assert rows["response line"] > rows["  structuredContent"] + rows["  canonical text, as sent (escaped)"]

    measured = pieces(start)
    costs = [timed(piece, reps=3) for piece in measured]
    assert all(cost > 0 for cost in costs)
    assert {piece.side for piece in measured} == {"client", "server"}
    lines = report(start, measured, costs, "microseconds")
    assert len(lines) == 2 + len(rows) + len(measured)
    assert lines[-len(measured)].endswith("client  parse the response line")
    assert lines[-1].endswith("server  canonical text, step payload kept")
