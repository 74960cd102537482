"""A resume never moves a run at an ungated step, however its result was kept (or not).

``continue_workflow`` on an ungated step (interview, confirm-contract: the
owner's) advances, so a resume shows such a step again from the result the
bridge kept for the log's last checkpoint. Real ``rimthan-host serve``
processes, the real verifier as their child, real releases; every log is
audited with ``rimthan-mcp audit`` after.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import anyio
import pytest
from rimthan_host.runlog import MAX_POSITION_BYTES, RunLog
from support.bridge import as_an_older_bridge_saved, audit, bridge_params, check_replies, stand_in
from support.checked_client import CheckedClient
from support.releases import build_release, packaged_source
from support.servers import ServerWorld, build_world

_STEPS = ["setup-workspace", "interview", "confirm-contract"]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("kept-world"))


def _long_interview_world(world: ServerWorld, root: Path) -> ServerWorld:
    """1.2.0 with an interview instruction whose step result is past MAX_POSITION_BYTES as the bridge keeps it."""
    source = root / "long-interview"
    shutil.copytree(packaged_source("1.2.0"), source)
    instruction = source / "assets" / "instructions" / "interview.md"
    instruction.write_text(instruction.read_text("utf-8") + "\n" + "\u00e9" * 200_000 + "\n", "utf-8")  # 6 bytes each
    built = build_release(source, root / "built", [world.key])
    return ServerWorld(root=root, key=world.key, trust=world.trust, built={**world.built, "1.2.0": built})


async def _start_at_interview(project: Path, world: ServerWorld, state: Path) -> str:
    async with CheckedClient(bridge_params(project, world, state), mode="legacy") as client:
        started = await stand_in(client, project).start()
        assert started.data["step"]["id"] == "interview", started.text
        return str(started.data["run"])


def test_an_ungated_step_whose_result_is_past_the_inline_limit_is_resumed_without_a_move(
    world: ServerWorld, tmp_path: Path
) -> None:
    """Before, a result past 1 MiB was not kept, and the resume asked the verifier: the interview was skipped."""
    long = _long_interview_world(world, tmp_path / "long")
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()
    run = anyio.run(_start_at_interview, project, long, state)
    log = RunLog(project, run)
    saved = log.load_state()
    assert saved["position"] is None and saved["position_file"]["bytes"] > MAX_POSITION_BYTES
    (side,) = log.log_path.parent.glob(f"{run}.position-*.json")
    logged = log.tokens()

    async def tampered() -> None:
        async with CheckedClient(bridge_params(project, long, state), mode="legacy") as client:
            refused = await stand_in(client, project).call("resume_run", {"run": run})
            assert refused.is_error and "damaged" in refused.text and "it was altered" in refused.text, refused.text

    good = side.read_bytes()
    side.write_bytes(good.replace(b"\\u00e9", b"\\u00e8", 1))
    anyio.run(tampered)
    assert log.tokens() == logged  # nothing was sent
    side.write_bytes(good)

    async def resumed() -> None:
        async with CheckedClient(bridge_params(project, long, state), mode="legacy") as client:
            model = stand_in(client, project)
            back = await model.call("resume_run", {"run": run})
            assert back.data["step"]["id"] == "interview" and not back.is_error, back.text[:2000]
            assert log.tokens() == logged  # the resume made no move
            done = await model.call("step_done", {"step": "interview"})
            assert done.data["step"]["id"] == "confirm-contract", done.text[:2000]  # exactly one step on

    anyio.run(resumed)
    assert audit(log.log_path, state)["steps"][:3] == _STEPS
    assert len(list(log.log_path.parent.glob(f"{run}.position-*.json"))) <= 1  # only what a kept state names


def test_a_state_saved_without_the_ungated_steps_result_refuses_the_resume_and_sends_nothing(
    world: ServerWorld, tmp_path: Path
) -> None:
    """A state file an older bridge wrote (no kept result, no gated mark): asking the verifier would skip the step."""
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()
    run = anyio.run(_start_at_interview, project, world, state)
    log = RunLog(project, run)
    as_an_older_bridge_saved(project, run)
    logged = log.tokens()

    async def resume() -> None:
        async with CheckedClient(bridge_params(project, world, state), mode="legacy") as client:
            model = stand_in(client, project)
            refused = await model.call("resume_run", {"run": run})
            assert refused.is_error and refused.data["code"] == "run_position_unknown", refused.text
            assert refused.data["step"] == {"id": "interview"} and "\nnext: " in refused.text
            assert "start_run with new_run true" in refused.text
            assert (await model.call("show_step")).is_error  # no run was made active
            assert model.leaks() == []

    anyio.run(resume)
    assert log.tokens() == logged
    history = audit(log.log_path, state)
    assert history["ok"] is True and history["steps"] == _STEPS[:2]


# The packaged steps are written against the confirmed state ("Show the owner this summary, filled from the
# confirmed state, word for word"; "`decision_question` is the confirmed objective, verbatim"), and the plugin's
# skill tells the model never to ask the user for it. A model in a new session (a second bridge on the project)
# that resumes the run is told the values; before, only a validator's brief held them.
def test_a_resumed_run_says_its_confirmed_facts(world: ServerWorld, tmp_path: Path) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()
    facts = json.loads((packaged_source("1.2.0") / "examples" / "confirmed-state.json").read_text("utf-8"))

    async def first_session() -> None:
        async with CheckedClient(bridge_params(project, world, state), mode="legacy") as client:
            model = stand_in(client, project)
            started = await model.start(facts)
            assert started.data["step"]["id"] == "interview", started.text
            done = await model.call("step_done", {"step": "interview"})
            assert done.data["step"]["id"] == "confirm-contract", done.text
            check_replies(model)

    async def second_session() -> tuple[str, str]:
        async with CheckedClient(bridge_params(project, world, state), mode="legacy") as client:
            model = stand_in(client, project)
            resumed = await model.call("resume_run")
            shown = await model.call("show_step")
            assert resumed.data["step"]["id"] == shown.data["step"]["id"] == "confirm-contract"
            check_replies(model)
            return resumed.text, shown.text

    anyio.run(first_session)
    for text in anyio.run(second_session):
        said = text.split("The facts confirmed in this run so far: ", 1)[1].splitlines()[0]
        assert json.loads(said) == facts, text
