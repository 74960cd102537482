"""Crash and resume: the bridge is killed mid-run, started again, and picks the run up from its log.

The first bridge process is killed with SIGKILL (no shutdown code runs)
between two validator verdicts; a second one resumes from
``.rimthan/runs/<run>.log`` and its saved state, the stand-in finishes the
run, and ``rimthan-mcp audit`` verifies the whole log as one unbroken run.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import anyio
import pytest
from mcp import Client
from rimthan_host.standin import StandIn
from support.bridge import audit, bridge_params, stand_in
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
        async with Client(bridge_params(project, world, state), mode="legacy") as client:
            model = stand_in(client, project)
            at_question = await model.follow(await model.start(), "", until_question=True)
            step = await model.call("answer_question", {"answer": "desk-research"})
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
        async with Client(bridge_params(project, world, state), mode="legacy") as client:
            model = stand_in(client, project)
            idle = await model.call("show_step")
            assert idle.is_error and "resume_run" in idle.text
            resumed = await model.call("resume_run")
            assert "Resumed run" in resumed.text and resumed.data["step"]["id"] == "desk-research", resumed.text
            final = await model.follow(resumed, "desk-research")
            assert final.data["status"] == "completed"
            return model

    model = anyio.run(second)
    assert model.leaks() == []
    (log,) = (project / ".rimthan" / "runs").glob("*.log")
    history = audit(log, state)
    assert history["ok"] is True and history["steps"][-1] == "desk-research"
    assert history["steps"][:4] == ["setup-workspace", "interview", "confirm-contract", "select-route"]
