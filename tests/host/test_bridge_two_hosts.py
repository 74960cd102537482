"""Two bridges on one project: one moves its runs at a time, and a killed owner holds nothing.

Two real ``rimthan-host serve`` processes on the same project directory (two
windows, a window and a CI job), each driven by its own MCP client over
stdio, each with its verifier child (one state directory: the same
checkpoint keys, as two bridges of one user have). Before the project's
lock, the second bridge's ``resume_run`` took the first's run, both answered
the same question, and the log forked (``rimthan-mcp audit``:
run_chain_broken, "fork: ... the run branched there").
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import anyio
import pytest
from rimthan_host.runlog import RunLog
from rimthan_host.standin import Reply, StandIn
from support.bridge import (
    audited,
    audited_only_run,
    bridge_params,
    check_replies,
    no_run,
    refused,
    running_pids,
    stand_in,
)
from support.checked_client import CheckedClient
from support.servers import ServerWorld, build_world


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("two-hosts-world"))


def folders(tmp_path: Path) -> tuple[Path, Path]:
    """The project both bridges serve, and the state directory their verifiers share (one user's keys)."""
    (tmp_path / "project").mkdir()
    return tmp_path / "project", tmp_path / "state"


def bridge(project: Path, world: ServerWorld, state: Path) -> CheckedClient:
    """One bridge on ``project``: a real ``rimthan-host serve`` and its MCP client over stdio."""
    return CheckedClient(bridge_params(project, world, state), mode="legacy")


def busy(reply: Reply, tool: str, pid: int, run: str) -> None:
    """``reply`` is the second bridge's refusal: the owner's process and run, and when to call ``tool`` again."""
    refused(reply, "Nothing was done: another rimthan-host serve", f"(pid {pid}) is moving run {run} in this project",
            "one bridge moves a project's runs at a time", f"call {tool} again")  # fmt: skip
    assert reply.data == {"status": "workspace_busy", "owner_pid": pid, "owner_run": run}, reply.data


async def at_question(model: StandIn, others: tuple[int, ...] = ()) -> tuple[str, int]:
    """The first bridge starts a run and stops at its question: the run, and the bridge's process id."""
    reply = await model.follow(await model.start(), "", until_question=True)
    (pid,) = set(running_pids("rimthan-host", model.project)) - set(others)
    return str(reply.data["run"]), pid


def dead(pid: int) -> bool:
    """Whether process ``pid`` has exited, every thread of it: only then are its files closed (and its locks gone).

    Its command line is gone before its files, and its first thread is a
    zombie while the others still hold them.
    """
    try:
        status = Path(f"/proc/{pid}/status").read_text("utf-8")
        return "\nState:\tZ" in status and "\nThreads:\t1\n" in status
    except (FileNotFoundError, ProcessLookupError):  # reaped between the open and the read: ESRCH
        return True


def test_a_second_bridge_is_refused_while_the_first_moves_its_run(world: ServerWorld, tmp_path: Path) -> None:
    project, state = folders(tmp_path)

    async def go() -> tuple[StandIn, StandIn, str]:
        async with bridge(project, world, state) as first_client:
            first = stand_in(first_client, project)
            run, pid = await at_question(first)
            async with bridge(project, world, state) as second_client:
                second = stand_in(second_client, project)
                busy(await second.call("resume_run", {}), "resume_run", pid, run)  # before: it took the first's run
                busy(await second.call("resume_run", {"run": run}), "resume_run", pid, run)
                busy(await second.start(), "start_run", pid, run)
                new_run = {"workflow": "research", "facts": {}, "new_run": True}
                busy(await second.call("start_run", new_run), "start_run", pid, run)
                shown = await second.call("show_step")  # reading stays allowed, and says who holds the project
                no_run(shown, "No run is active", f"Right now another rimthan-host serve (pid {pid}) is moving "
                        f"run {run} in this project: start_run and resume_run are refused here")  # fmt: skip
                answer = {"answer": "desk-research", "field": "research_route"}
                done = await first.follow(await first.call("answer_question", answer), "")
                assert done.data["status"] == "completed" and done.data["run"] == run, done.text
                after = await second.start()  # the first's run is complete: the project is free again
                assert not after.is_error and after.data["run"] != run, after.text
                return first, second, run

    first, second, run = anyio.run(go)
    check_replies(first)
    check_replies(second)
    assert audited(project, state, run)["steps"][-1] == "desk-research"


@pytest.mark.parametrize("cut", [False, True], ids=["between-moves", "mid-append"])
def test_a_killed_owner_holds_nothing_and_the_second_bridge_resumes_its_run(
    world: ServerWorld, tmp_path: Path, cut: bool
) -> None:
    """The owner SIGKILLed; ``cut``: mid-append, its log's last line cut short (all a kill there can leave: each
    append writes its line at once). Before, the next bridge took the cut line for the run's last checkpoint,
    for which no state is saved, so every resume_run was refused; an append would have gone on that line."""
    project, state = folders(tmp_path)

    async def go() -> StandIn:
        async with bridge(project, world, state) as second_client:
            second = stand_in(second_client, project)
            others = tuple(running_pids("rimthan-host", project))
            first_client = bridge(project, world, state)
            async with first_client:
                first = stand_in(first_client, project)
                run, pid = await at_question(first, others)
                busy(await second.call("resume_run", {}), "resume_run", pid, run)
                answer = {"answer": "desk-research", "field": "research_route"}
                answered = await first.call("answer_question", answer)  # a new line logged
                assert answered.data["step"]["id"] == "desk-research", answered.text
                os.kill(pid, signal.SIGKILL)  # the owner dies holding the lock
                with anyio.fail_after(30):
                    while not dead(pid):
                        await anyio.sleep(0.05)
                if cut:
                    log = RunLog(project, run).log_path
                    lines = log.read_bytes().splitlines(keepends=True)
                    log.write_bytes(b"".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])
                resumed = await second.call("resume_run", {})  # the latest unfinished run: the killed bridge's
                assert not resumed.is_error and f"Resumed run {run} from its log" in resumed.text, resumed.text
                done = await second.follow(resumed, "desk-research")
                assert done.data["status"] == "completed" and done.data["run"] == run, done.text
        return second

    second = anyio.run(go)
    check_replies(second)
    assert audited_only_run(project, state)["steps"][-1] == "desk-research"


def test_a_deleted_lock_file_lets_no_second_bridge_in_and_the_first_stops_moving(
    world: ServerWorld, tmp_path: Path
) -> None:
    """Before, the second bridge took a new lock file at the path, resumed the first's run, and both answered
    its question: the log forked. Now the first also holds ``.rimthan`` itself, and says its lock is gone."""
    project, state = folders(tmp_path)

    async def go() -> tuple[StandIn, StandIn, str]:
        async with bridge(project, world, state) as first_client:
            first = stand_in(first_client, project)
            run, _ = await at_question(first)
            (project / ".rimthan" / "bridge.lock").unlink()  # a model "cleaning up a stale lock"
            async with bridge(project, world, state) as second_client:
                second = stand_in(second_client, project)
                taken = await second.call("resume_run", {"run": run})
                refused(taken, "Nothing was done: another rimthan-host serve holds the runs in this project")
                assert taken.data["status"] == "workspace_busy", taken.data
                stopped = await first.call("answer_question", {"answer": "experiment", "field": "research_route"})
                refused(stopped, ".rimthan/bridge.lock was deleted or replaced while this bridge held it",
                        f"this bridge stopped moving run {run}", f"then call resume_run {run}.")  # fmt: skip
                assert stopped.data == {"status": "workspace_lock_lost", "run": run}, stopped.data
                assert "\n" not in stopped.text
                resumed = await first.call("resume_run", {"run": run})
                assert f"Resumed run {run} from its log" in resumed.text, resumed.text
                refused(await second.call("resume_run", {"run": run}), f"is moving run {run} in this project")
                done = await first.follow(resumed, "desk-research")
                assert done.data["status"] == "completed", done.text
                return first, second, run

    first, second, run = anyio.run(go)
    check_replies(first)
    check_replies(second)
    assert audited(project, state, run)["steps"][-1] == "desk-research"
