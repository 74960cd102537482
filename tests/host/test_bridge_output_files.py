"""The files the bridge reads and writes in the project: a FIFO never makes it hang, a huge file is not read.

The model (or anything else in the user's project) can put a FIFO where a
step's file, the workspace manifest or a run file goes, or swap one in after
``step_done``; an ``open`` of a FIFO without ``O_NONBLOCK`` waits for the other
end forever. A step's file larger than its output's ``max_bytes`` is refused
by its size, before it is read (the verifier would refuse it anyway). Each
test drives the real ``rimthan-host serve`` over stdio with the real verifier
as its child, puts the fault in for real, and checks the bridge answers in
words - a move that hangs fails the test at :data:`HANG_SECONDS`, a bound, not
a measured time - and that the run completes once the fault is gone and
``rimthan-mcp audit`` verifies its log.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Awaitable
from pathlib import Path

import anyio
import pytest
from rimthan_host.runlog import RunLog
from rimthan_host.standin import Reply, StandIn
from support.bridge import audited_only_run, drive, refused, write_files
from support.releases import packaged_source
from support.servers import ServerWorld, build_world

HANG_SECONDS = 60  # far past any move; reached only by a move that blocks for good
MANIFEST = ".rimthan/workspace-manifest.json"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("output-files-world"))


async def answered(move: Awaitable[Reply]) -> Reply:
    """The reply to ``move``; a move still waiting after HANG_SECONDS fails the test (TimeoutError)."""
    with anyio.fail_after(HANG_SECONDS):
        return await move


def fifo_at(target: Path) -> bytes:
    """Replace the file at ``target`` with a FIFO (no one at its other end); the file's bytes."""
    kept = target.read_bytes() if target.exists() else b""
    target.unlink(missing_ok=True)
    os.mkfifo(target)
    return kept


def put_back(target: Path, kept: bytes) -> None:
    target.unlink()
    target.write_bytes(kept)


async def desk_research_written(model: StandIn) -> tuple[str, str]:
    """A new run taken to desk-research, its files written: the run and the step's Markdown file."""
    await model.follow(await model.start(), "", until_question=True)
    step = await model.call("answer_question", {"answer": "desk-research", "field": "research_route"})
    write_files(model, step)
    return str(step.data["run"]), str(step.data["files"][1])


def test_a_fifo_at_a_step_file_is_refused_in_words_never_waited_on(world: ServerWorld, tmp_path: Path) -> None:
    """At step_done, and swapped in while the validators run (step_done again, the last record_verdict)."""

    async def script(model: StandIn) -> None:
        md = (await desk_research_written(model))[1]
        target = model.project / md
        not_regular = (f"{md} is not a regular file", f"the file itself at {md}")
        kept = fifo_at(target)
        refused(await answered(model.call("step_done")), *not_regular, "step_done again")
        put_back(target, kept)
        assert (await answered(model.call("step_done"))).data["status"] == "validators_pending"

        fifo_at(target)  # swapped in after step_done: the bridge compares the files with what was checked
        again = await answered(model.call("step_done"))
        refused(again, "Nothing was checked yet", *not_regular)
        put_back(target, kept)
        waiting = await answered(model.call("step_done"))
        refused(waiting, "validators still wait for a verdict")
        await answered(model.call("record_verdict", {"validator": "evidence-auditor", "verdict": "pass"}))
        fifo_at(target)
        last = await answered(model.call("record_verdict", {"validator": "decision-critic", "verdict": "pass"}))
        refused(last, f"{md} changed after step_done", "Call step_done")
        put_back(target, kept)
        final = await model.follow(await answered(model.call("step_done")), "desk-research")
        assert final.data["status"] == "completed"

    model, state = drive(world, tmp_path, script)
    assert audited_only_run(model.project, state)["steps"][-1] == "desk-research"


def test_a_fifo_where_the_bridge_writes_its_own_file_is_refused(world: ServerWorld, tmp_path: Path) -> None:
    """The workspace manifest (written at start_run) and a run's state (written on every move)."""

    async def script(model: StandIn) -> None:
        manifest = model.project / MANIFEST
        manifest.parent.mkdir(parents=True)
        fifo_at(manifest)
        broken = await answered(model.start())
        (log,) = (model.project / ".rimthan" / "runs").glob("*.log")  # the run started; its setup failed
        run = log.stem
        refused(broken, f"The bridge failed on start_run (Not a regular file: {MANIFEST})", f"call resume_run {run}")
        manifest.unlink()
        resumed = await answered(model.call("resume_run", {"run": run}))
        at_question = await model.follow(resumed, "", until_question=True)

        tmp = RunLog(model.project, run).state_path.with_suffix(".json.tmp")
        fifo_at(tmp)
        name = tmp.relative_to(model.project)
        stuck = await answered(model.call("answer_question", {"answer": "desk-research", "field": "research_route"}))
        refused(stuck, f"The bridge failed on answer_question (Not a regular file: {name})", f"call resume_run {run}")
        tmp.unlink()
        again = await answered(model.call("resume_run", {"run": run}))
        assert again.data["question"] == at_question.data["question"], again.text
        assert (await model.follow(again, "desk-research")).data["status"] == "completed"

    model, state = drive(world, tmp_path, script)
    assert audited_only_run(model.project, state)["steps"][-1] == "desk-research"


def max_bytes(step_id: str) -> dict[str, int]:
    """Each output path of ``step_id`` with its ``max_bytes``, as the packaged catalogue declares them."""
    workflow = tomllib.loads((packaged_source("1.2.0") / "workflows" / "research-decision.toml").read_text("utf-8"))
    (step,) = [s for s in workflow["steps"] if s["id"] == step_id]
    return {o["path"]: o["max_bytes"] for o in step["outputs"]}


def test_a_step_file_past_its_max_bytes_is_refused_by_its_size(world: ServerWorld, tmp_path: Path) -> None:
    """The bridge refuses it before reading it, naming the limit; the verifier never gets it."""
    limits = max_bytes("desk-research")

    async def script(model: StandIn) -> None:
        await model.follow(await model.start(), "", until_question=True)
        step = await model.call("answer_question", {"answer": "desk-research", "field": "research_route"})
        write_files(model, step)
        md = step.data["files"][1]
        target, limit = model.project / md, limits[md]
        kept = target.read_bytes()
        target.write_bytes(kept + b"x" * (limit + 1 - len(kept)))  # one byte too many
        big = await model.call("step_done")
        refused(big, f"{md} is {limit + 1} bytes; this step takes at most {limit} bytes for it", "step_done again")
        assert "verifier" not in big.text and big.data["status"] == "files_missing", big.text
        target.write_bytes(kept)
        final = await model.follow(await model.call("step_done"), "desk-research")
        assert final.data["status"] == "completed"

    model, state = drive(world, tmp_path, script)
    assert audited_only_run(model.project, state)["steps"][-1] == "desk-research"


def test_a_step_file_hard_linked_to_a_file_outside_the_project_is_read_as_the_projects(
    world: ServerWorld, tmp_path: Path
) -> None:
    """A hard link is a regular file in the project like any other, and it is read: a model that can make one can
    copy the same bytes into the project, so refusing it would close no way out, and it would refuse users whose
    tools hard-link their files. What the verifier takes is the bytes read once, checked and sent (a symbolic link,
    which names a path elsewhere that can change between the check and the read, stays refused)."""
    outside = tmp_path / "outside"
    outside.mkdir()

    async def script(model: StandIn) -> None:
        run, md = await desk_research_written(model)
        target = model.project / md
        kept = outside / "kept.md"
        kept.write_bytes(target.read_bytes())
        target.unlink()
        os.link(kept, target)
        final = await model.follow(await answered(model.call("step_done")), "desk-research")
        assert final.data["status"] == "completed", final.text
        assert RunLog(model.project, run).tokens()  # the run's checkpoints were logged as the verifier issued them

    model, state = drive(world, tmp_path, script)
    assert audited_only_run(model.project, state)["steps"][-1] == "desk-research"
