"""A bridge stopped right after it discarded verdicts resumes with what the discard left.

Real ``rimthan-host serve`` processes over stdio, the real verifier as their child, a real signed release. The
first bridge records evidence-auditor's pass for desk-research, then discards it: its subagent file was edited
after the validators were named (``report_stale``: that verdict goes, the file is put back), or a step file
changed before the last verdict (``files_changed``: the whole round goes). The bridge is then killed (SIGKILL: no
shutdown code runs), so the resume state is the one the discard saved. A second bridge resumes the run: the
discarded pass is not taken back (before the discard, the saved round held it), every validator runs again, and
the run completes; ``rimthan-mcp audit`` verifies the whole log.
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
)
from support.checked_client import CheckedClient
from support.servers import ServerWorld, build_world

AUDITOR = ".claude/agents/evidence-auditor.md"
KEPT = "Verdicts recorded for step desk-research before the run was picked up here are kept"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("discard-restart-world"))


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
    assert ROUND_KEY not in RunLog(project, run).load_state()  # the discard saved the state without the pass

    async def go() -> StandIn:
        async with CheckedClient(bridge_params(project, world, state), mode="legacy") as client:
            model = stand_in(client, project)
            resumed = await model.call("resume_run", {"run": run})
            assert not resumed.is_error and resumed.data["step"]["id"] == "desk-research", resumed.text
            assert KEPT not in resumed.text and "evidence-auditor pass" not in resumed.text, resumed.text
            assert (project / AUDITOR).read_bytes() == delivered  # the file the discard put back
            again = await model.call("step_done")
            assert again.data["status"] == "validators_pending", again.text
            assert {v["name"] for v in again.data["validators"]} == {"evidence-auditor", "decision-critic"}
            done = await all_pass(model, "evidence-auditor", "decision-critic")
            assert (await model.follow(done, "desk-research")).data["status"] == "completed"
            check_replies(model)
            return model

    assert anyio.run(go).leaks() == []
    assert audited(project, state, run)["steps"][-1] == "desk-research"
