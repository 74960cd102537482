"""The bridge survives a write that fails half-way and a verifier that dies mid-run.

Each test drives the real ``rimthan-host serve`` over stdio; the bridge starts
the real verifier as its child. A structural fault (a directory where a file
must be) breaks one of the two writes of a move - the resume state or the
run log - for real; the verifier child is killed for real (SIGKILL), between
calls or while the bridge waits for its answer. After
each the stand-in completes the run and ``rimthan-mcp audit`` verifies its log.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import termios
from pathlib import Path
from typing import Any

import anyio
import pytest
from rimthan_host.runlog import RunLog
from rimthan_host.standin import Reply, StandIn
from support.bridge import (
    as_an_older_bridge_saved,
    audited_only_run,
    drive,
    no_run,
    refused,
    verifier_pids,
    write_files,
)
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


def _unread(pid: int) -> int:
    """How many bytes wait unread in the pipes process ``pid`` reads (its wire moved off fd 0: stdio_pipes)."""
    total = 0
    for entry in Path(f"/proc/{pid}/fd").iterdir():
        flags = (Path(f"/proc/{pid}/fdinfo") / entry.name).read_text("utf-8").split("flags:")[1].split()[0]
        if not os.readlink(entry).startswith("pipe:") or int(flags, 8) & os.O_ACCMODE != os.O_RDONLY:
            continue
        fd = os.open(entry, os.O_RDONLY | os.O_NONBLOCK)
        try:
            count = bytearray(4)
            fcntl.ioctl(fd, termios.FIONREAD, count)
            total += int.from_bytes(count, "little")
        finally:
            os.close(fd)
    return total


async def _killed(model: StandIn, child: int, during: bool, arguments: dict[str, Any]) -> Reply:
    """answer_question's reply, the verifier killed before the call, or ``during`` it: stopped, the request
    left waiting in its stdin, then killed, so the SDK fails the call in flight (``Connection closed``)."""
    if not during:
        os.kill(child, signal.SIGKILL)
        return await model.call("answer_question", arguments)
    os.kill(child, signal.SIGSTOP)
    replies: list[Reply] = []

    async def call() -> None:
        replies.append(await model.call("answer_question", arguments))

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(call)
        try:
            with anyio.fail_after(60):  # a hang guard only: the request reaches the child's stdin
                while not _unread(child):
                    await anyio.sleep(0.05)
        finally:
            os.kill(child, signal.SIGKILL)  # (also when the guard fails: no child left stopped)
    return replies[0]


@pytest.mark.parametrize("during", [False, True], ids=["before the call", "during the call"])
def test_a_killed_verifier_is_restarted_and_the_run_goes_on(world: ServerWorld, tmp_path: Path, during: bool) -> None:
    """Killed during the call, the SDK's Connection closed error; before it, a closed stream: one code,
    ``verifier_lost``, and where the run is (before, no code; the first was untested)."""
    state_dir = tmp_path / "state"

    async def script(model: StandIn) -> None:
        at_question = await model.follow(await model.start(), "", until_question=True)
        run = at_question.data["run"]
        (child,) = verifier_pids(state_dir)
        answer = {"answer": "desk-research", "field": "research_route"}
        retry = await _killed(model, child, during, answer)
        refused(retry, "The verifier had stopped during answer_question; the bridge restarted it and reconnected "
                "(verifier_lost). Your answer_question call did not go through: make it again",
                f"Resumed run {run} from its log")  # fmt: skip
        assert retry.data["code"] == "verifier_lost" and retry.data["reconnected"] is True, retry.data
        assert retry.data["question"]["field"] == "research_route", retry.text  # where the run is
        assert verifier_pids(state_dir) not in ([], [child])
        step = await model.call("answer_question", answer)
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


def test_a_resume_refused_after_the_verifier_restarted_gives_the_refusals_code_in_words_and_data(
    world: ServerWorld, tmp_path: Path
) -> None:
    """The verifier killed at an ungated step whose state keeps no result for it (an older bridge's): the restart
    works, the resume is refused (``run_position_unknown``). Before, the words led with ``(verifier_lost)`` and
    "make it again if it still fits where the run is", while data.code said run_position_unknown and no run was
    active."""
    state_dir = tmp_path / "state"

    async def script(model: StandIn) -> None:
        started = await model.start()
        run = started.data["run"]
        log = RunLog(model.project, run)
        as_an_older_bridge_saved(model.project, run)
        logged = log.tokens()
        (child,) = verifier_pids(state_dir)
        os.kill(child, signal.SIGKILL)
        retry = await model.call("step_done", {"step": "interview"})
        assert retry.is_error and retry.data["code"] == "run_position_unknown", retry.data
        assert retry.data["reconnected"] is True and retry.data["step"] == {"id": "interview"}, retry.data
        assert "verifier_lost" not in retry.text and "make it again" not in retry.text, retry.text
        first, then = retry.text.split("\n")
        refused(retry, "The verifier had stopped during step_done; the bridge restarted it and reconnected, but "
                f"step_done did not go through and the run was not picked up again. Run {run} was not resumed "
                "(run_position_unknown)")  # fmt: skip
        assert "(run_position_unknown)" in first and then.startswith("next: ") and "new_run true" in then, retry.text
        no_run(await model.call("show_step"), "No run is active")  # no run was made active
        assert log.tokens() == logged and verifier_pids(state_dir) not in ([], [child])
        fresh = await model.call("start_run", {"workflow": "research", "facts": {}, "new_run": True})
        assert fresh.data["status"] == "blocked", fresh.text  # the restarted verifier answers

    drive(world, tmp_path, script)


def test_a_verifier_killed_before_a_verdict_says_the_round_is_gone_not_to_send_it_again(
    world: ServerWorld, tmp_path: Path
) -> None:
    """The round the last verdict submits ends with the verifier: the reply says not to send it again, and the
    one call it then names (step_done) opens a new round. Before, it said "make it again if it still fits" above
    "call step_done", and the verdict made again was refused ("No validator is waiting")."""
    state_dir = tmp_path / "state"

    async def script(model: StandIn) -> None:
        at_question = await model.follow(await model.start(), "", until_question=True)
        step = await model.call("answer_question", {"answer": "desk-research", "field": "research_route"})
        assert not at_question.is_error and step.data["step"]["id"] == "desk-research", step.text
        write_files(model, step)
        waiting = await model.call("step_done")
        assert waiting.data["status"] == "validators_pending", waiting.text
        *first, last = [v["name"] for v in waiting.data["validators"]]
        for name in first:  # (kept by the bridge: the last verdict submits the round to the verifier)
            assert not (await model.call("record_verdict", {"validator": name, "verdict": "pass"})).is_error
        (child,) = verifier_pids(state_dir)
        os.kill(child, signal.SIGKILL)
        lost = await model.call("record_verdict", {"validator": last, "verdict": "pass"})
        refused(lost, "Your record_verdict call did not go through: its validation round ended with the verifier, "
                "so do not send the verdict again: go on as below.", "not kept: call step_done")  # fmt: skip
        assert "make it again" not in lost.text, lost.text
        again = await model.call("step_done")
        assert again.data["status"] == "validators_pending", again.text
        assert (await model.follow(again, "desk-research")).data["status"] == "completed"

    model, state = drive(world, tmp_path, script)
    assert audited_only_run(model.project, state)["steps"][-1] == "desk-research"
