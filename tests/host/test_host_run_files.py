"""The host kit's run files under stress: a huge log.

Runs go through real engine modules over real signed releases (support.engines),
and the faults are real: a log padded with megabytes.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from rimthan_host.harness import HarnessError, WorkflowHarness
from rimthan_host.runlog import RunLog
from support.engines import Engines, ExamplesScenario, TickingClock, make_engines, run

SELECT_ROUTE = "select-route"  # the packaged workflow's step that asks for research_route


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory) -> Engines:
    return make_engines(tmp_path_factory.mktemp("runfiles"), TickingClock())


def _harness(engines: Engines, project: Path, run_id: str) -> WorkflowHarness:
    log = RunLog(project, run_id)
    scenario = ExamplesScenario("desk-research")
    return WorkflowHarness(engines.call("1.2.0"), scenario, project_dir=project, clock=engines.clock, run_log=log)


async def _at_question(harness: WorkflowHarness) -> dict[str, Any]:
    """Start the run and follow it to the route question."""
    await harness.run(await harness.start("research", initial_version="1.2.0"), until_step=SELECT_ROUTE)
    asked = await harness.session.advance()
    assert asked["status"] == "input_required", asked
    return asked


def test_a_huge_log_is_streamed_and_a_line_past_any_token_is_refused(engines: Engines, tmp_path: Path) -> None:
    """Padding of 48 MiB before the last line is read through, never held; a line over 1 MiB is damage."""
    harness = _harness(engines, tmp_path / "project", "run-padded")
    log = RunLog(tmp_path / "project", "run-padded")
    asked = run(_at_question(harness))
    lines = log.log_path.read_bytes()
    log.log_path.write_bytes((b" " * 4095 + b"\n") * (12 * 1024) + lines)  # blank lines: no tokens
    tracemalloc.start()
    try:
        tokens = log.tokens()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert tokens[-1] == asked["checkpoint"] and log.load_state()["step"] == SELECT_ROUTE
    assert peak < 2 * 1024 * 1024, peak  # the log is 48 MiB: it was streamed, not read whole
    log.log_path.write_bytes(lines + b"x" * (2 * 1024 * 1024))  # one line of 2 MiB, no newline
    with pytest.raises(HarnessError) as refused:
        log.load_state()
    said = str(refused.value)
    assert said.startswith(".rimthan/runs/run-padded.log is damaged (line ") and "longer than 1048576 bytes" in said
    assert "call start_run with new_run true" in said
