"""The bridge survives a write that fails half-way and a verifier that dies mid-run.

Each test drives the real ``rimthan-host serve`` over stdio; the bridge starts
the real verifier as its child. A structural fault (a directory where a file
must be) breaks one of the two writes of a move - the resume state or the
run log - for real; the verifier child is killed for real (SIGKILL). After
each the stand-in completes the run and ``rimthan-mcp audit`` verifies its log.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from rimthan_host.runlog import RunLog
from rimthan_host.standin import StandIn
from support.bridge import audited_only_run, drive, refused, verifier_pids
from support.servers import ServerWorld, build_world


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("crash-world"))


@pytest.mark.parametrize("fault", ["state", "log"])
def test_a_move_whose_state_or_log_write_fails_resumes_from_the_log(
    world: ServerWorld, tmp_path: Path, fault: str
) -> None:
    """The state is saved (keyed by its checkpoint) before the log gets the checkpoint; either may fail."""

    async def script(model: StandIn) -> None:
        at_question = await model.follow(await model.start(), "", until_question=True)
        run = at_question.data["run"]
        log = RunLog(model.project, run)
        before = log.load_state()
        blocked = log.state_path.with_suffix(".json.tmp") if fault == "state" else log.log_path
        kept = blocked.with_name("kept.txt")
        if blocked.exists():
            blocked.rename(kept)
        blocked.mkdir()  # a directory where the file must be: the write fails
        name = blocked.relative_to(model.project)
        broken = await model.call("answer_question", {"answer": "desk-research", "field": "research_route"})
        refused(broken, f"The bridge failed on answer_question (Is a directory: {name})", f"call resume_run {run}",
                "The verifier made the move, but it was not recorded, so it does not count.")  # fmt: skip
        saved = json.loads(log.state_path.read_text("utf-8"))["states"]
        assert len(saved) == (2 if fault == "log" else 1)  # the answer's state was saved before its log line
        blocked.rmdir()
        if kept.exists():
            kept.rename(blocked)
        assert log.load_state() == before  # the log's last checkpoint is still the question, with its state
        resumed = await model.call("resume_run", {"run": run})
        assert f"Resumed run {run}" in resumed.text and resumed.data["question"]["prompt"], resumed.text
        assert (await model.follow(resumed, "desk-research")).data["status"] == "completed"

    model, state = drive(world, tmp_path, script)
    assert audited_only_run(model.project, state)["steps"][-1] == "desk-research"


def test_a_killed_verifier_is_restarted_and_the_run_goes_on(world: ServerWorld, tmp_path: Path) -> None:
    state_dir = tmp_path / "state"

    async def script(model: StandIn) -> None:
        at_question = await model.follow(await model.start(), "", until_question=True)
        run = at_question.data["run"]
        (child,) = verifier_pids(state_dir)
        os.kill(child, signal.SIGKILL)
        retry = await model.call("answer_question", {"answer": "desk-research", "field": "research_route"})
        refused(retry, "The verifier had stopped during answer_question; the bridge restarted it and reconnected",
                "Your answer_question call did not go through", f"Resumed run {run} from its log")  # fmt: skip
        assert retry.data["reconnected"] is True and retry.data["question"]["prompt"], retry.text
        assert verifier_pids(state_dir) not in ([], [child])
        step = await model.call("answer_question", {"answer": "desk-research", "field": "research_route"})
        assert not step.is_error and step.data["run"] == run, step.text
        assert (await model.follow(step, "desk-research")).data["status"] == "completed"

    model, state = drive(world, tmp_path, script)
    assert audited_only_run(model.project, state)["steps"][-1] == "desk-research"


def test_a_verifier_killed_at_an_ungated_step_costs_no_step(world: ServerWorld, tmp_path: Path) -> None:
    """Recovery resumes at the step the log ends on; the model's retry of step_done then makes exactly one move.
    Before, the resume's continue_workflow advanced past the interview and the retry past confirm-contract."""
    state_dir = tmp_path / "state"

    async def script(model: StandIn) -> None:
        started = await model.start()
        assert started.data["step"]["id"] == "interview", started.text
        (child,) = verifier_pids(state_dir)
        os.kill(child, signal.SIGKILL)
        retry = await model.call("step_done", {"step": "interview"})
        refused(retry, "The verifier had stopped during step_done", "Your step_done call did not go through")
        assert retry.data["reconnected"] is True and retry.data["step"]["id"] == "interview", retry.text
        done = await model.call("step_done", {"step": "interview"})
        assert not done.is_error and done.data["step"]["id"] == "confirm-contract", done.text
        assert (await model.call("step_done", {"step": "confirm-contract"})).data["step"]["id"] == "select-route"
        assert (await model.follow(await model.call("show_step"), "desk-research")).data["status"] == "completed"

    model, state = drive(world, tmp_path, script)
    history = audited_only_run(model.project, state)
    assert history["steps"][:5] == ["setup-workspace", "interview", "confirm-contract", "select-route", "desk-research"]
