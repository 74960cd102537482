"""The bridge's own files in the project: never written or read through a symbolic link, a damaged one refused.

``.rimthan/runs/<run>.log`` and ``<run>.json`` live in the user's project, where
anyone (the model, a cloned repository) can put a symbolic link. Each test
drives the real ``rimthan-host serve`` over stdio with the real verifier as its
child, puts the fault in for real, and checks the bridge refuses in words
naming the file - nothing outside the project is touched - and that the run
completes once the fault is gone and ``rimthan-mcp audit`` verifies its log.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import anyio
import pytest
from rimthan_host.runlog import MAX_STATE_BYTES, RunLog
from rimthan_host.standin import StandIn
from rimthan_workflow_registry.limits import MAX_CONFIRMED_STATE_BYTES
from rimthan_workflow_registry.run import MAX_TOKEN_CHARS
from support.bridge import audited, audited_only_run, bridge_params, check_replies, drive, no_run, refused, stand_in
from support.checked_client import CheckedClient
from support.releases import build_release, unbounded_objective_source
from support.servers import ServerWorld, build_world

SCHEMA_COPY = ".rimthan/schemas/research-decision@1.2.0/evidence-log.schema.json"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("run-files-world"))


async def _linked_then_resumed(model: StandIn, run: str, linked: str, victim: Path, *, symbolic: bool) -> None:
    """A run file (``json.tmp`` or ``log``) made a link to ``victim``, refused untouched; then the run goes on.

    The victim holds the log's lines when the log is linked, so reading it
    through a hard link finds the run as it was; the refusal must come before
    a byte of the victim changes.
    """
    log = RunLog(model.project, run)
    link = log.state_path.with_suffix(".json.tmp") if linked == "json.tmp" else log.log_path
    victim.write_bytes(link.read_bytes() if link.exists() else b"precious\n")
    kept = victim.read_bytes()
    if link.exists():
        link.rename(link.with_name("kept.txt"))
    if symbolic:
        link.symlink_to(victim)
    else:
        link.hardlink_to(victim)
    name = link.relative_to(model.project)
    broken = await model.call("answer_question", {"answer": "desk-research", "field": "research_route"})
    said = f" (Symbolic link refused: {name})" if symbolic else f": {name} {HARD_LINKED} resume_run {run} again"
    refused(broken, f"The bridge failed on answer_question{said}")
    assert victim.read_bytes() == kept  # neither truncated nor appended to
    link.unlink()
    if link.with_name("kept.txt").exists():
        link.with_name("kept.txt").rename(link)
    resumed = await model.call("resume_run", {"run": run})
    assert f"Resumed run {run}" in resumed.text and resumed.data["question"]["prompt"], resumed.text
    assert (await model.follow(resumed, "desk-research")).data["status"] == "completed"


@pytest.mark.parametrize("linked", ["json.tmp", "log"])
def test_a_run_file_that_is_a_symbolic_link_is_refused_not_followed(
    world: ServerWorld, tmp_path: Path, linked: str
) -> None:
    victim = tmp_path / "victim.txt"  # a file of the user's outside the project

    async def script(model: StandIn) -> None:
        at_question = await model.follow(await model.start(), "", until_question=True)
        run = at_question.data["run"]
        await _linked_then_resumed(model, run, linked, victim, symbolic=True)

    model, state = drive(world, tmp_path, script)
    assert audited_only_run(model.project, state)["steps"][-1] == "desk-research"


def test_a_runs_directory_that_is_a_symbolic_link_is_refused(world: ServerWorld, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()

    async def script(model: StandIn) -> None:
        (model.project / ".rimthan").mkdir()
        (model.project / ".rimthan" / "runs").symlink_to(outside)
        for move in (model.start(), model.call("show_step")):
            refused(await move, "(Symbolic link refused: .rimthan/runs)", "call the tool again")
        assert list(outside.iterdir()) == []  # no log, no state written outside the project
        (model.project / ".rimthan" / "runs").unlink()
        assert (await model.follow(await model.start(), "experiment")).data["status"] == "completed"

    model, state = drive(world, tmp_path, script)
    assert audited_only_run(model.project, state)["steps"][-1] == "experiment"


@pytest.mark.parametrize("in_the_way", [".rimthan", ".rimthan/runs"])
def test_a_file_where_the_runs_directory_must_be_is_named(world: ServerWorld, tmp_path: Path, in_the_way: str) -> None:
    """Was "(Not a directory: .rimthan/runs/run-<id>.json)": now the part in the way, and what to do with it."""

    async def script(model: StandIn) -> None:
        blocker = model.project / in_the_way
        blocker.parent.mkdir(exist_ok=True)
        blocker.write_text("the user's\n", "utf-8")
        started = await model.start()
        refused(started, f"The bridge failed on start_run ({in_the_way} is not a directory, where the bridge keeps "
                "one: move it away); once that is fixed, call the tool again.")  # fmt: skip
        assert blocker.read_text("utf-8") == "the user's\n"  # nothing written over it
        blocker.unlink()
        assert (await model.follow(await model.start(), "experiment")).data["status"] == "completed"

    model, state = drive(world, tmp_path, script)
    assert audited_only_run(model.project, state)["steps"][-1] == "experiment"


DAMAGE = {  # edits of the state file as the bridge writes it: compact JSON
    "a repeated key": lambda text: text.replace('"completed":false', '"completed":false,"completed":true', 1),
    "NaN": lambda text: text.replace('"confirmed_at":', '"confirmed_at":NaN,"x":', 1),
    "a wrong type": lambda text: text.replace('"existed_before":{}', '"existed_before":"yes"', 1),
    "nesting": lambda text: text.replace('"workflow":', '"deep":' + "[" * 100_000 + "]" * 100_000 + ',"workflow":', 1),
    "a size past the bound": lambda text: text + " " * (MAX_STATE_BYTES + 1 - len(text)),  # valid JSON still
    # the next three were shown as the run's (a step shown from its saved result asks no verifier)
    "another release": lambda text: text.replace("research-decision@1.2.0", "research-decision@1.3.0"),
    "another workflow version": lambda text: text.replace('"version":"1.2.0"', '"version":"1.3.0"'),
    "another step": lambda text: text.replace('"select-route"', '"desk-research"'),
}
LOG_DAMAGE: dict[str, Callable[[bytes], bytes]] = {
    "a byte not ASCII in the log": lambda data: data + "é\n".encode(),
    "a log line longer than any token": lambda data: data + b"x" * (MAX_TOKEN_CHARS + 1),  # and no newline
    # both were "<absolute path> holds no state ..." / "run ... has no logged checkpoint", with no next step
    "a log cut short": lambda data: data[:-20],  # in its last token: no state is saved for what is left of it
    "a log cut to nothing": lambda data: b"",
}


@pytest.mark.parametrize("damage", [*DAMAGE, *LOG_DAMAGE])
def test_a_damaged_run_state_or_log_is_refused_in_words(world: ServerWorld, tmp_path: Path, damage: str) -> None:
    """Read strictly: no key written twice (which value?), no NaN, every field its type, the log ASCII; a state
    file past MAX_STATE_BYTES is refused by its size, before it is read; the log is read a line at a time, and a
    line longer than the longest checkpoint the verifier takes ends the reading."""

    async def script(model: StandIn) -> None:
        first = (await model.follow(await model.start(), "", until_question=True)).data["run"]
        facts = json.loads((model.examples["1.2.0"] / "confirmed-state.json").read_text("utf-8"))
        await model.call("start_run", {"workflow": "research", "facts": facts, "new_run": True})
        log = RunLog(model.project, first)
        damaged = log.log_path if damage not in DAMAGE else log.state_path
        kept = damaged.read_bytes()
        if damage in DAMAGE:
            damaged.write_text(DAMAGE[damage](kept.decode("utf-8")), "utf-8")
            assert damaged.read_bytes() != kept
        else:
            damaged.write_bytes(LOG_DAMAGE[damage](kept))
        name = str(damaged.relative_to(model.project))
        if damage == "a log cut short":  # which of the two was cut short, replaced or lost cannot be known
            name += f" or {log.state_path.relative_to(model.project)}"
        reply = await model.call("resume_run", {"run": first})
        refused(reply, f"{name} is damaged (", f"run {first} cannot go on from it", "start_run with new_run true")
        if damage == "a size past the bound":
            assert f"(it is {MAX_STATE_BYTES + 1} bytes; a run state file is at most" in reply.text, reply.text
        if damage == "a log line longer than any token":
            where = f"(the line at byte {len(kept)} is longer than {MAX_TOKEN_CHARS} bytes, the longest checkpoint"
            assert where in reply.text, reply.text
        busy = await model.call("start_run", {"workflow": "research", "facts": facts})  # the project still works
        refused(busy, f"{first} (damaged: its run files cannot be resumed)", "new_run true")
        assert "at step None" not in busy.text, busy.text
        assert not (await model.call("show_step")).is_error
        damaged.write_bytes(kept)
        resumed = await model.call("resume_run", {"run": first})
        assert (await model.follow(resumed, "experiment")).data["run"] == first

    model, state = drive(world, tmp_path, script)
    first = model.received[0].data["run"]  # the first start_run's reply
    assert audited(model.project, state, first)["steps"][-1] == "experiment"


def test_a_run_without_its_state_file_is_never_offered_to_resume(world: ServerWorld, tmp_path: Path) -> None:
    """The state file gone while no bridge ran. Before, the next bridge's show_step offered the run ("resume_run
    with one of the unfinished runs here"), start_run said "Continue one with resume_run", and resume_run
    refused it as damaged."""
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()

    async def go() -> StandIn:
        async with CheckedClient(bridge_params(project, world, state), mode="legacy") as client:
            first = stand_in(client, project)
            run = str((await first.follow(await first.start(), "", until_question=True)).data["run"])
        RunLog(project, run).state_path.unlink()
        async with CheckedClient(bridge_params(project, world, state), mode="legacy") as client:
            model = stand_in(client, project)
            await never_offered(model, run)
        return model

    model = anyio.run(go)
    check_replies(model)
    assert len(list((project / ".rimthan" / "runs").glob("*.log"))) == 2
    audited(project, state, model.received[-1].data["run"])


async def never_offered(model: StandIn, run: str) -> None:
    """Every listing names ``run`` as damaged and points at new_run true; a new run starts and completes."""
    damaged, kept = f"{run} (damaged: its run files cannot be resumed)", "a damaged run's log is kept as it is"
    refused(await model.call("resume_run", {}), "No unfinished run in this project.", damaged, "Call start_run")
    refused(await model.call("resume_run", {"run": run}), f"run {run} cannot go on from it", "new_run true")
    shown = await model.call("show_step")
    no_run(shown, "No run is active. Call start_run.", f"these cannot be resumed: {run} ({kept}", "new_run true")
    busy = await model.start()
    refused(busy, f"{damaged}. None of them can be resumed ({kept}", "call start_run again with new_run true.")
    for reply in (shown, busy):
        assert "Continue one with resume_run" not in reply.text and "resume_run with one of" not in reply.text
    started = await model.call("start_run", {**model.sent[-1][1], "new_run": True})
    assert not started.is_error and "set aside" not in started.text, started.text
    assert (await model.follow(started, "experiment")).data["status"] == "completed"


def test_a_schema_copy_that_cannot_be_written_costs_the_hint_not_the_move(world: ServerWorld, tmp_path: Path) -> None:
    """The answer went through: the step is described, without the copy, and the copy is made once it can be."""
    outside = tmp_path / "outside"
    outside.mkdir()

    async def script(model: StandIn) -> None:
        await model.follow(await model.start(), "", until_question=True)
        schemas = model.project / ".rimthan" / "schemas"
        schemas.symlink_to(outside)
        step = await model.call("answer_question", {"answer": "desk-research", "field": "research_route"})
        assert not step.is_error and step.data["step"]["id"] == "desk-research", step.text
        assert "Recorded research_route = desk-research" in step.text
        assert "its schema schemas/evidence-log.schema.json could not be copied into the project" in step.text
        assert "is a symbolic link" in step.text and list(outside.iterdir()) == []
        schemas.unlink()
        shown = await model.call("show_step")
        assert f"JSON Schema: {SCHEMA_COPY} (read it before writing)" in shown.text, shown.text
        assert (model.project / SCHEMA_COPY).is_file()
        assert (await model.follow(shown, "desk-research")).data["status"] == "completed"

    model, state = drive(world, tmp_path, script)
    assert audited_only_run(model.project, state)["steps"][-1] == "desk-research"


def test_a_resume_that_fails_unexpectedly_leaves_the_active_run_and_names_the_run_asked_for(
    world: ServerWorld, tmp_path: Path
) -> None:
    """A directory where the run's state must be: resume_run fails, yet the run that was active stays active."""

    async def script(model: StandIn) -> None:
        first = (await model.follow(await model.start(), "", until_question=True)).data["run"]
        facts = json.loads((model.examples["1.2.0"] / "confirmed-state.json").read_text("utf-8"))
        second = await model.call("start_run", {"workflow": "research", "facts": facts, "new_run": True})
        active = second.data["run"]
        state = RunLog(model.project, first).state_path
        state.rename(state.with_name("kept.txt"))
        state.mkdir()
        name = state.relative_to(model.project)
        failed = await model.call("resume_run", {"run": first})
        refused(failed, f"The bridge failed on resume_run (Is a directory: {name})", f"call resume_run {first} to")
        assert f"resume_run {active}" not in failed.text and failed.data["run"] == first, failed.text
        assert f"Run {active} stays the active run" in failed.text, failed.text
        shown = await model.call("show_step")
        assert not shown.is_error and shown.data["run"] == active, shown.text
        state.rmdir()
        state.with_name("kept.txt").rename(state)
        resumed = await model.call("resume_run", {"run": first})
        assert f"Resumed run {first}" in resumed.text and f"Run {active} is set aside" in resumed.text, resumed.text
        assert (await model.follow(resumed, "experiment")).data["run"] == first

    model, state = drive(world, tmp_path, script)
    first = model.received[0].data["run"]
    assert audited(model.project, state, first)["steps"][-1] == "experiment"


MANIFEST = ".rimthan/workspace-manifest.json"
HARD_LINKED = "has other hard links; the bridge writes only files that are its own: delete it and call"


@pytest.mark.parametrize("linked", ["manifest", "json.tmp", "log"])
def test_a_bridge_file_with_other_hard_links_is_refused_never_written(
    world: ServerWorld, tmp_path: Path, linked: str
) -> None:
    """A hard link in the project to a file outside it (same file system): the bridge writes no byte of it."""
    victim = tmp_path / "victim.txt"  # a file of the user's outside the project
    victim.write_bytes(b"precious\n")

    async def script(model: StandIn) -> None:
        if linked == "manifest":  # written by the setup step, at start_run
            manifest = model.project / MANIFEST
            manifest.parent.mkdir(parents=True)
            manifest.hardlink_to(victim)
            broken = await model.start()
            (started,) = (model.project / ".rimthan" / "runs").glob("*.log")  # the run started; its setup failed
            refused(broken, f"The bridge failed on start_run: {MANIFEST} {HARD_LINKED} resume_run {started.stem} again")
            assert victim.read_bytes() == b"precious\n"
            manifest.unlink()
            resumed = await model.call("resume_run", {"run": started.stem})
            at_question = await model.follow(resumed, "", until_question=True)
        else:
            at_question = await model.follow(await model.start(), "", until_question=True)
        run = at_question.data["run"]
        await _linked_then_resumed(model, run, linked, victim, symbolic=False)

    model, state = drive(world, tmp_path, script)
    assert audited_only_run(model.project, state)["steps"][-1] == "desk-research"


def test_facts_past_the_confirmed_state_bound_are_refused_in_words_and_nothing_is_written(
    world: ServerWorld, tmp_path: Path
) -> None:
    """A catalogue that leaves objective's length open: the verifier refuses 5 MiB of it on every transport.

    The state is past MAX_CONFIRMED_STATE_BYTES: the verifier answers ``confirmed_state_invalid`` before its
    schema is checked (it used to take it, and the bridge then refused the state file it could not save); the
    model reads what to do, no run is recorded, and a run with shorter facts goes on.
    """
    unbounded = build_release(unbounded_objective_source(tmp_path), tmp_path / "built", [world.key])
    open_world = replace(world, built={**world.built, "1.2.0": unbounded})

    async def script(model: StandIn) -> None:
        facts = json.loads((model.examples["1.2.0"] / "confirmed-state.json").read_text("utf-8"))
        huge = {**facts, "objective": "o" * (5 << 20)}
        large = await model.call("start_run", {"workflow": "research", "facts": huge})
        refused(large, "The verifier refused: confirmed_state_invalid: the confirmed state is",
                f"past the {MAX_CONFIRMED_STATE_BYTES} bytes a confirmed state may hold: confirm short facts",
                "keep long texts in files", "call start_run again")  # fmt: skip
        assert not list((model.project / ".rimthan" / "runs").glob("*.log"))
        started = await model.call("start_run", {"workflow": "research", "facts": facts})
        assert (await model.follow(started, "experiment")).data["status"] == "completed"

    model, state = drive(open_world, tmp_path, script)
    assert audited_only_run(model.project, state)["steps"][-1] == "experiment"
