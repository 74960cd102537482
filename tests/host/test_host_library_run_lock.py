"""Two sessions on one run, each in its own process: the run's lock lets one move it, and a killed holder holds none.

Real OS processes (``support.run_lock_child``: a harness author's program on the host library, each with its own
``rimthan-mcp serve`` child) on one project, with real releases. Before the run's lock, a second session resumed a
run the first still moved: both appended a checkpoint with one parent (a fork ``rimthan-mcp audit`` refuses) and
raced on ``<run>.json.tmp`` (a bare FileNotFoundError).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp.client.stdio import StdioServerParameters
from rimthan_host.harness import WorkflowHarness
from rimthan_host.protocol import client_caller
from rimthan_host.run_lock import RunBusy, RunLockLost
from rimthan_host.runlog import RunLog
from rimthan_host.workspace_lock import Owner
from rimthan_workflow_registry.errors import FailureCode
from support.bridge import BIN, audited, bridge_params, running_pids, stand_in, verifier_args
from support.checked_client import CheckedClient
from support.processes import serve_options
from support.servers import ServerWorld, build_world, scenario

TESTS = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("run-lock-world"))


def child(project: Path, run: str, mode: str, verifier: list[str]) -> subprocess.Popen[str]:
    """One harness process on ``run`` (``mode``: start or resume), held at its step until told to go on."""
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    argv = [sys.executable, "-m", "support.run_lock_child", str(project), run, mode, json.dumps(verifier)]
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=TESTS)


def said(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    return process.stdout.readline().strip()


def go_on(process: subprocess.Popen[str]) -> str:
    """Let a held process run its run to the end: what it said last."""
    out, _ = process.communicate("go\n")
    assert process.returncode == 0, out
    return out.strip().splitlines()[-1]


def library_verifier(world: ServerWorld, state: Path) -> list[str]:
    return [
        str(BIN / "rimthan-mcp"),
        "serve",
        *serve_options(world.built["1.3.0"], world.trust, state, log_level="warning"),
    ]


def project_files(project: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``project`` (the run files, the lock files, the step's files): bytes and modification time."""
    return {
        str(p.relative_to(project)): (p.read_bytes(), p.stat().st_mtime_ns) for p in project.rglob("*") if p.is_file()
    }


def refused_by(process: subprocess.Popen[str], holder: int, run: str, kind: str) -> None:
    """``process`` was refused the run, naming the holder's pid and what to do, and exited having moved nothing."""
    line = said(process)
    assert line.startswith("REFUSED "), line
    text = json.loads(line.removeprefix("REFUSED "))
    assert text.startswith(f"Nothing was done (run_busy): run {run} is being moved by process {holder} ({kind})"), text
    assert f"\nnext: carry on in that process, or stop process {holder}" in text, text
    assert process.wait() == 3


def held_run(world: ServerWorld, tmp_path: Path) -> tuple[Path, Path, list[str], subprocess.Popen[str]]:
    """A project, its verifier's state and command, and a harness process holding run-1 at desk-research."""
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()
    verifier = library_verifier(world, state)
    first = child(project, "run-1", "start", verifier)
    assert said(first) == "READY desk-research"
    return project, state, verifier, first


def test_a_second_session_on_a_run_is_refused_and_writes_nothing(world: ServerWorld, tmp_path: Path) -> None:
    project, state, verifier, first = held_run(world, tmp_path)
    before = project_files(project)
    refused_by(child(project, "run-1", "resume", verifier), first.pid, "run-1", "a harness using the host library")
    refused_by(child(project, "run-1", "start", verifier), first.pid, "run-1", "a harness using the host library")
    assert project_files(project) == before  # nothing written by the refused sessions
    other = child(project, "run-2", "start", verifier)  # another run of the project: its own lock
    assert said(other) == "READY desk-research"
    assert go_on(other) == "DONE completed"
    assert go_on(first) == "DONE completed"
    for run in ("run-1", "run-2"):
        assert audited(project, state, run)["steps"][-1] == "decision-record"


def test_a_killed_holder_holds_nothing_and_a_new_session_resumes_the_run(world: ServerWorld, tmp_path: Path) -> None:
    project, state, verifier, first = held_run(world, tmp_path)
    first.send_signal(signal.SIGKILL)
    first.wait()
    lock = project / ".rimthan" / "runs" / "run-1.lock"
    assert lock.is_file()  # (a killed process removes nothing: its file is no lock, and the next session's)
    resumed = child(project, "run-1", "resume", verifier)
    assert said(resumed) == "READY desk-research"
    assert go_on(resumed) == "DONE completed"
    assert not lock.exists()  # the run completed: its lock file removed as the session let go
    assert audited(project, state, "run-1")["steps"][-1] == "decision-record"


def test_a_bridge_holds_its_active_run_and_lets_go_of_it_when_it_switches_runs(
    world: ServerWorld, tmp_path: Path
) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()
    verifier = [str(BIN / "rimthan-mcp"), "serve", *verifier_args(world, state)]
    harness = child(project, "run-1", "start", library_verifier(world, tmp_path / "harness-state"))  # (its own floor)
    assert said(harness) == "READY desk-research"

    async def go() -> None:
        async with CheckedClient(bridge_params(project, world, state), mode="legacy") as client:
            model = stand_in(client, project)
            before = project_files(project)
            held = await model.call("resume_run", {"run": "run-1"})  # the harness's run: refused, nothing written
            assert held.is_error and held.data == {"status": "run_busy", "run": "run-1", "owner_pid": harness.pid}
            assert f"run run-1 is being moved by process {harness.pid} (a harness using the host library)" in held.text
            after = project_files(project)
            del after[".rimthan/bridge.lock"]  # (the project's lock, which the bridge takes before any run's)
            assert after == before
            facts = json.loads((model.examples[model.version] / "confirmed-state.json").read_text("utf-8"))
            first = await model.call("start_run", {"workflow": "research", "facts": facts, "new_run": True})
            started = await model.follow(first, "", until_question=True)
            run = str(started.data["run"])
            (pid,) = running_pids("rimthan-host", project)
            refused_by(child(project, run, "resume", verifier), pid, run, "a rimthan-host serve")
            other = await model.call("start_run", {"workflow": "research", "facts": facts, "new_run": True})
            assert other.data.get("run") not in (None, run), other.text
            taken = child(project, run, "resume", verifier)  # the bridge let go of the run it set aside
            assert said(taken).startswith("READY "), run
            taken.kill()
            taken.wait()

    anyio.run(go)
    assert go_on(harness) == "DONE completed"


def test_a_lock_file_deleted_under_a_session_stops_it(world: ServerWorld, tmp_path: Path) -> None:
    """Deleted while held, the run's lock file is a new lock another session could take: the holder moves no more."""
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()
    command, *args = library_verifier(world, state)

    async def go() -> None:
        async with CheckedClient(StdioServerParameters(command=command, args=args)) as client:
            log = RunLog(project, "run-1")
            with WorkflowHarness(client_caller(client), scenario(), project_dir=project, run_log=log) as kit:
                at = await kit.run(await kit.start("research", "1.3.0"), until_step="desk-research")
                log.log_path.with_suffix(".lock").unlink()
                kept = log.log_path.read_bytes()
                for _ in range(2):  # (and on every move after)
                    with pytest.raises(RunLockLost) as lost:
                        await kit.run(at)
                    assert str(lost.value).startswith("Nothing was done (run_lock_lost): .rimthan/runs/run-1.lock")
                assert log.log_path.read_bytes() == kept

    anyio.run(go)


def test_the_run_lock_refusals_name_codes_of_the_one_closed_list() -> None:
    """``run_busy`` and ``run_lock_lost`` are failure codes (docs/failure-codes.md), each with its ``next:`` line."""
    busy, lost = RunBusy("run-1", Owner(4242, "run-1", "a harness using the host library")), RunLockLost("run-1")
    assert (busy.code, lost.code) == (FailureCode.RUN_BUSY, FailureCode.RUN_LOCK_LOST)
    for refusal in (busy, lost):
        first, nxt = str(refusal).split("\n")
        assert first.startswith(f"Nothing was done ({refusal.code.value}): ") and nxt.startswith("next: ")


def test_a_session_that_lets_go_removes_the_lock_file_and_never_two_hold_the_run(tmp_path: Path) -> None:
    """Six real processes take and let go of one run's lock 2000 times each: one holder at a time, no file left.

    Letting go removes ``<run>.lock`` while it is still held; a process that opened the file just before finds
    it gone once it locks it and opens the path again, so removing the file never lets two sessions hold the run.
    Before, every run's lock file stayed in ``.rimthan/runs`` for good.
    """
    project = tmp_path / "project"
    project.mkdir()
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    argv = [sys.executable, "-m", "support.run_lock_churn", str(project), "run-1", "2000"]
    churn = [subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env, cwd=TESTS) for _ in range(6)]
    counts = [dict(zip(*[iter(p.communicate()[0].split())] * 2, strict=True)) for p in churn]
    assert all(p.returncode == 0 for p in churn)
    assert [c["TWO"] for c in counts] == ["0"] * 6, counts  # never two holders (unchecked after flock: a few)
    assert sum(int(c["HELD"]) for c in counts) > 0
    assert list((project / ".rimthan" / "runs").iterdir()) == []  # no lock file left behind
