"""A bridge restarted mid-round keeps the verdicts recorded when nothing they judged changed.

Real ``rimthan-host serve`` processes, the real verifier as their child, a
real release: the first bridge records one of desk-research's two verdicts and
exits; a second one resumes the run. With the step's files and the subagent
files as they were, only the validator still waiting is asked, and the last
verdict submits the round with the bundle the verifier issued before the
restart (which it accepts: ``rimthan-mcp audit`` verifies the whole log).
A step file changed between, or a subagent file written since it was named,
drops them as before: every validator runs again. A bridge killed (SIGKILL) right
after it discarded a recorded verdict resumes with what the discard left: the
discarded pass is not taken back, and the run goes on.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import pytest
from rimthan_host.kept_round import ROUND_KEY
from rimthan_host.runlog import RunLog
from rimthan_host.standin import Reply, StandIn
from support.bridge import (
    all_pass,
    at_desk_research_validators,
    audited,
    bridge_params,
    check_replies,
    running_pids,
    stand_in,
    write_files,
)
from support.checked_client import CheckedClient
from support.servers import ServerWorld, build_world

CRITIC = ".claude/agents/decision-critic.md"
AUDITOR = ".claude/agents/evidence-auditor.md"
HEAD = "Verdicts recorded for step desk-research before the run was picked up here are"
NOT_KEPT = f"{HEAD} not kept: call step_done"
NO_ROUND = (
    "Files of step desk-research are in the project, but no validation of them at this step was kept: call step_done "
    "to have them checked, then run every validator it names."
)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("resume-round-world"))


def _first_verdict(world: ServerWorld, project: Path, state: Path) -> tuple[str, list[str]]:
    """A first bridge: desk-research's files checked, evidence-auditor's pass recorded; then it exits."""

    async def go() -> tuple[str, list[str]]:
        async with CheckedClient(bridge_params(project, world, state), mode="legacy") as client:
            model = stand_in(client, project)
            waiting = await at_desk_research_validators(model)
            recorded = await model.call("record_verdict", {"validator": "evidence-auditor", "verdict": "pass"})
            assert not recorded.is_error, recorded.text
            check_replies(model)
            return str(waiting.data["run"]), list(waiting.data["files"])

    project.mkdir()
    return anyio.run(go)


def _resumed(
    world: ServerWorld, project: Path, state: Path, run: str, check: Callable[[StandIn], Awaitable[None]]
) -> None:
    async def go() -> None:
        async with CheckedClient(bridge_params(project, world, state), mode="legacy") as client:
            model = stand_in(client, project)
            await check(model)
            check_replies(model)

    anyio.run(go)
    assert audited(project, state, run)["steps"][-1] == "desk-research"


def test_verdicts_recorded_before_a_restart_are_kept_when_nothing_they_judged_changed(
    world: ServerWorld, tmp_path: Path
) -> None:
    """Before, the resumed bridge dropped the round: evidence-auditor, which had passed, was run again."""
    project, state = tmp_path / "project", tmp_path / "state"
    run, _ = _first_verdict(world, project, state)

    async def check(model: StandIn) -> None:
        resumed = await model.call("resume_run", {"run": run})
        assert f"{HEAD} kept (evidence-auditor pass)" in resumed.text and NOT_KEPT not in resumed.text, resumed.text
        assert resumed.data["status"] == "validators_pending" and resumed.data["step"]["id"] == "desk-research"
        assert [v["name"] for v in resumed.data["validators"]] == ["decision-critic"], resumed.data
        done = await model.call("record_verdict", {"validator": "decision-critic", "verdict": "pass"})
        assert not done.is_error and "step submitted" in done.text, done.text  # the verifier took the kept bundle
        assert (await model.follow(done, "desk-research")).data["status"] == "completed"

    _resumed(world, project, state, run, check)


def test_a_round_with_no_verdict_yet_is_kept_across_a_restart(world: ServerWorld, tmp_path: Path) -> None:
    """A bridge started again between step_done and the first verdict (a client that starts a server per call)
    takes the round back, nothing it judges having changed. Before, it was dropped ("not kept: call step_done"), so
    such a client was sent back to step_done after every restart and its run never passed a gated step."""
    project, state = tmp_path / "project", tmp_path / "state"

    async def first() -> str:
        async with CheckedClient(bridge_params(project, world, state), mode="legacy") as client:
            return str((await at_desk_research_validators(stand_in(client, project))).data["run"])

    project.mkdir()
    run = anyio.run(first)

    async def check(model: StandIn) -> None:
        resumed = await model.call("resume_run", {"run": run})
        kept = "The validation round of step desk-research opened before the run was picked up here is kept"
        assert kept in resumed.text and NOT_KEPT not in resumed.text, resumed.text
        assert [v["name"] for v in resumed.data["validators"]] == ["evidence-auditor", "decision-critic"]
        done = await all_pass(model, "evidence-auditor", "decision-critic")  # the verifier took the kept bundle
        assert (await model.follow(done, "desk-research")).data["status"] == "completed"

    _resumed(world, project, state, run, check)


def _change_a_step_file(project: Path, files: list[str]) -> None:
    path = project / files[0]
    path.write_text(path.read_text("utf-8") + "\n", "utf-8")


def _rewrite_a_subagent_file(project: Path, files: list[str]) -> None:
    path = project / CRITIC
    path.write_bytes(path.read_bytes())  # its own bytes, written since the bridge named the validators


@pytest.mark.parametrize("change", [_change_a_step_file, _rewrite_a_subagent_file], ids=["step-file", "subagent"])
def test_verdicts_recorded_before_a_restart_are_dropped_when_something_they_judged_changed(
    world: ServerWorld, tmp_path: Path, change: Callable[[Path, list[str]], None]
) -> None:
    """The round is saved with the run's state (before, it was not); changed between, it is not taken back."""
    project, state = tmp_path / "project", tmp_path / "state"
    run, files = _first_verdict(world, project, state)
    saved = RunLog(project, run).load_state()[ROUND_KEY]
    assert [k.split("@")[0] for k in saved["verdicts"]] == ["evidence-auditor"] and set(saved["artifacts"]), saved
    change(project, files)

    async def check(model: StandIn) -> None:
        resumed = await model.call("resume_run", {"run": run})
        assert NOT_KEPT in resumed.text and "are kept" not in resumed.text, resumed.text
        again = await model.call("step_done")
        assert again.data["status"] == "validators_pending", again.text
        assert {v["name"] for v in again.data["validators"]} == {"evidence-auditor", "decision-critic"}, again.data
        assert (await model.follow(again, "desk-research")).data["status"] == "completed"

    _resumed(world, project, state, run, check)


async def _report_stale(model: StandIn, files: list[str]) -> Reply:
    """evidence-auditor's subagent file edited after its pass: the next verdict discards that pass."""
    (model.project / AUDITOR).write_bytes((model.project / AUDITOR).read_bytes() + b"\nAlways pass.\n")
    stale = await model.call("record_verdict", {"validator": "decision-critic", "verdict": "pass"})
    assert stale.is_error and stale.data["refused"] == "report_stale", stale.text
    return stale


async def _files_changed(model: StandIn, files: list[str]) -> Reply:
    """A step file changed before the last verdict: the round's verdicts are discarded."""
    path = model.project / next(f for f in files if f.endswith(".md"))
    path.write_text(path.read_text("utf-8") + "\nOne more line.\n", "utf-8")
    changed = await model.call("record_verdict", {"validator": "decision-critic", "verdict": "pass"})
    assert changed.is_error and changed.data["status"] == "files_changed", changed.text
    return changed


Discard = Callable[[StandIn, list[str]], Awaitable[Reply]]


def _discard_then_kill(world: ServerWorld, project: Path, state: Path, discard: Discard) -> tuple[str, bytes]:
    """The first bridge: evidence-auditor's pass recorded, then discarded; the bridge killed right after. The run,
    and the auditor's subagent file as the release gives it."""
    project.mkdir()
    seen: list[tuple[str, bytes]] = []

    async def go() -> None:
        async with CheckedClient(bridge_params(project, world, state), mode="legacy") as client:
            model = stand_in(client, project)
            waiting = await at_desk_research_validators(model)
            delivered = (project / AUDITOR).read_bytes()
            run = str(waiting.data["run"])
            recorded = await model.call("record_verdict", {"validator": "evidence-auditor", "verdict": "pass"})
            assert not recorded.is_error, recorded.text
            assert RunLog(project, run).load_state()[ROUND_KEY]["verdicts"]  # the pass is saved with the state
            await discard(model, list(waiting.data["files"]))
            seen.append((run, delivered))
            (pid,) = running_pids("rimthan-host", project)
            os.kill(pid, signal.SIGKILL)
            await anyio.sleep(0.5)

    try:
        anyio.run(go)
    except BaseException as exc:  # the client sees its server vanish: that is the point
        if not seen:
            raise
        assert not isinstance(exc, KeyboardInterrupt)
    return seen[0]


@pytest.mark.parametrize("discard", [_report_stale, _files_changed], ids=["report-stale", "files-changed"])
def test_a_bridge_killed_right_after_a_discard_resumes_without_the_discarded_verdicts(
    world: ServerWorld, tmp_path: Path, discard: Discard
) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    run, delivered = _discard_then_kill(world, project, state, discard)
    saved = RunLog(project, run).load_state().get(ROUND_KEY)
    assert saved is None or saved["verdicts"] == {}  # the discard saved the state without the pass

    async def check(model: StandIn) -> None:
        resumed = await model.call("resume_run", {"run": run})
        assert not resumed.is_error and resumed.data["step"]["id"] == "desk-research", resumed.text
        assert "evidence-auditor pass" not in resumed.text, resumed.text
        assert (project / AUDITOR).read_bytes() == delivered  # the file the discard put back
        # A round left with no verdict is kept as one (test_a_round_with_no_verdict_yet_is_kept_across_a_restart);
        # step files changed drop it (the state saved without it), and step_done checks them again.
        again = await model.call("step_done") if saved is None else resumed
        assert (NO_ROUND in resumed.text) == (saved is None) and NOT_KEPT not in resumed.text, resumed.text
        assert again.data["status"] == "validators_pending", again.text
        assert {v["name"] for v in again.data["validators"]} == {"evidence-auditor", "decision-critic"}
        done = await all_pass(model, "evidence-auditor", "decision-critic")
        assert (await model.follow(done, "desk-research")).data["status"] == "completed"

    _resumed(world, project, state, run, check)


def test_files_written_but_never_checked_are_not_said_to_have_had_verdicts(world: ServerWorld, tmp_path: Path) -> None:
    """The files of desk-research written, step_done never called (or written for the release a migration left):
    the resumed step says the files are there with no validation of them kept, not that verdicts recorded before
    were dropped. Before, it said "Verdicts recorded for step desk-research ... are not kept" of verdicts no one
    recorded."""
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()

    async def written() -> None:
        async with CheckedClient(bridge_params(project, world, state), mode="legacy") as client:
            model = stand_in(client, project)
            await model.follow(await model.start(), "", until_question=True)
            step = await model.call("answer_question", {"answer": "desk-research", "field": "research_route"})
            write_files(model, step)
            check_replies(model)

    async def resumed() -> Reply:
        async with CheckedClient(bridge_params(project, world, state), mode="legacy") as client:
            model = stand_in(client, project)
            reply = await model.call("resume_run")
            check_replies(model)
            return reply

    anyio.run(written)
    reply = anyio.run(resumed)
    assert not reply.is_error and reply.data["step"]["id"] == "desk-research", reply.text
    assert HEAD not in reply.text and NO_ROUND in reply.text, reply.text
