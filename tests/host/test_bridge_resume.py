"""Crash and resume: the bridge is killed mid-run, started again, and picks the run up from its log.

The first bridge process is killed with SIGKILL (no shutdown code runs)
between two validator verdicts; a second one resumes from
``.rimthan/runs/<run>.log`` and its saved state, the stand-in finishes the
run, and ``rimthan-mcp audit`` verifies the whole log as one unbroken run.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import anyio
import pytest
from rimthan_host.standin import StandIn
from support.bridge import audit, bridge_params, check_replies, example_text, stand_in
from support.checked_client import CheckedClient
from support.servers import ServerWorld, build_world


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("resume-world"))


def _bridge_pid(project: Path) -> int:
    """The bridge process this test started (a child of ours serving ``project``)."""
    me = str(os.getpid())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        parent = next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:"))
        if parent == me and any(b"rimthan-host" in part for part in cmdline) and str(project).encode() in cmdline:
            return int(entry.name)
    raise AssertionError("the bridge process was not found")


def test_a_killed_bridge_resumes_from_the_run_log(world: ServerWorld, tmp_path: Path) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()
    killed: list[int] = []

    async def first() -> None:
        async with CheckedClient(bridge_params(project, world, state), mode="legacy") as client:
            model = stand_in(client, project)
            at_question = await model.follow(await model.start(), "", until_question=True)
            step = await model.call("answer_question", {"answer": "desk-research", "field": "research_route"})
            assert step.data["step"]["id"] == "desk-research" and not at_question.is_error
            for path in step.data["files"]:
                (project / path).parent.mkdir(parents=True, exist_ok=True)
                (project / path).write_text(model.compose(path), "utf-8")
            pending = await model.call("step_done")
            assert pending.data["status"] == "validators_pending"
            await model.call("record_verdict", {"validator": "evidence-auditor", "verdict": "pass"})
            pid = _bridge_pid(project)
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
            await anyio.sleep(0.5)

    try:
        anyio.run(first)
    except BaseException as exc:  # the client sees its server vanish; that is the point
        if not killed:
            raise
        assert not isinstance(exc, KeyboardInterrupt)
    assert killed

    async def second() -> StandIn:
        async with CheckedClient(bridge_params(project, world, state), mode="legacy") as client:
            model = stand_in(client, project)
            # The run is the project's one unfinished run: the new bridge's first move picks it up (before, it
            # answered "No run is active" and waited for resume_run: test_bridge_other_hosts).
            resumed = await model.call("show_step")
            # said once: before, "Picked up run ... first" and then "Resumed run ... from its log."
            assert resumed.text.count("Picked up run") == 1 and "Resumed run" not in resumed.text, resumed.text
            assert resumed.data["step"]["id"] == "desk-research", resumed.text
            # The round the killed bridge held is kept, nothing it judged changed: only the validator owed runs
            # (before, it was dropped, and evidence-auditor, which had passed, ran again; test_bridge_resume_round).
            kept = "Verdicts recorded for step desk-research before the run was picked up here are kept"
            assert f"{kept} (evidence-auditor pass)" in resumed.text, resumed.text
            owed = await model.call("record_verdict", {"validator": "decision-critic", "verdict": "pass"})
            assert not owed.is_error and "step submitted" in owed.text, owed.text
            final = await model.follow(owed, "desk-research")
            assert final.data["status"] == "completed"
            return model

    model = anyio.run(second)
    assert model.leaks() == []
    (log,) = (project / ".rimthan" / "runs").glob("*.log")
    history = audit(log, state)
    assert history["ok"] is True and history["steps"][-1] == "desk-research"
    assert history["steps"][:4] == ["setup-workspace", "interview", "confirm-contract", "select-route"]


def test_switching_runs_and_restarting_the_bridge_keep_each_run_at_its_ungated_step(
    world: ServerWorld, tmp_path: Path
) -> None:
    """A resume leaves a run at the step its log ends on. Before, it called continue_workflow there, which on an
    ungated step (interview, confirm-contract: the owner's) advances: each switch or restart skipped one."""
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()

    async def first() -> tuple[str, str]:
        async with CheckedClient(bridge_params(project, world, state), mode="legacy") as client:
            model = stand_in(client, project)
            started = await model.start()
            run_a = started.data["run"]
            assert started.data["step"]["id"] == "interview", started.text
            facts = json.loads(example_text("1.2.0", "confirmed-state.json"))
            other = await model.call("start_run", {"workflow": "research", "facts": facts, "new_run": True})
            run_b = other.data["run"]
            assert other.data["step"]["id"] == "interview" and run_b != run_a, other.text
            for run in (run_a, run_b, run_a):  # switch back and forth: each stays at its interview
                back = await model.call("resume_run", {"run": run})
                assert back.data["step"]["id"] == "interview" and f"Resumed run {run}" in back.text, back.text
                assert back.data["step"]["title"] in back.text and not back.is_error
            done = await model.call("step_done", {"step": "interview"})
            assert done.data["step"]["id"] == "confirm-contract", done.text  # exactly one step on
            check_replies(model)
            return run_a, run_b

    run_a, run_b = anyio.run(first)

    async def second() -> None:
        async with CheckedClient(bridge_params(project, world, state), mode="legacy") as client:
            model = stand_in(client, project)
            latest = await model.call("resume_run")  # no run named: the latest moved, and the other one said
            assert latest.data["run"] == run_a and f"Resumed run {run_a}" in latest.text, latest.text
            also = f"Also unfinished here: {run_b} (unfinished, at step interview); resume_run {run_b} switches to it."
            assert also in latest.text, latest.text  # (before: not a word of run_b)
            for run, step in ((run_b, "interview"), (run_a, "confirm-contract")):
                resumed = await model.call("resume_run", {"run": run})
                assert resumed.data["step"]["id"] == step and f"Resumed run {run}" in resumed.text, resumed.text
            confirmed = await model.call("step_done", {"step": "confirm-contract"})
            assert confirmed.data["step"]["id"] == "select-route"  # confirm-contract: one on
            final = await model.follow(await model.call("show_step"), "desk-research")
            assert final.data["status"] == "completed"
            check_replies(model)

    anyio.run(second)
    history = audit(project / ".rimthan" / "runs" / f"{run_a}.log", state)
    assert history["ok"] is True
    assert history["steps"][:5] == ["setup-workspace", "interview", "confirm-contract", "select-route", "desk-research"]
