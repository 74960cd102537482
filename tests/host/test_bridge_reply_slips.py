"""Reply slips a model met, through the real ``rimthan-host serve`` and its real verifier.

- A step's files already written (a verdict repeated after a reconnect):
  the next call said "have not been checked yet: write X", as if they were not;
  now it says they are written and to call step_done.
- A refused ``step_done {}`` on a step without files carried the last move's
  ``data.status`` (``advanced``) beside ``isError``; now the refusal's own.
- A fact confirmed already with the same value was put to the person again
  each time the model passed it in ``step_done``; now it is said to be
  confirmed already, and only a changed value is asked.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import types
from rimthan_host.confirmations import BY_ELICITATION
from rimthan_host.runlog import RunLog
from rimthan_host.standin import StandIn
from support.bridge import as_shown, bridge_params, check_replies, drive, example_text, refused, stand_in, write_files
from support.checked_client import CheckedClient
from support.servers import ServerWorld, build_world

MOVE_REFUSED = "move_refused"  # (step_replies.MOVE_REFUSED, spelled out: what a client reads)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("slips-world"))


def test_a_verdict_repeated_after_a_reconnect_says_the_written_files_are_to_be_checked(
    world: ServerWorld, tmp_path: Path
) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()

    async def first() -> tuple[str, list[str]]:
        async with CheckedClient(bridge_params(project, world, state), mode="legacy") as client:
            model = stand_in(client, project)
            await model.follow(await model.start(), "", until_question=True)
            step = await model.call("answer_question", {"answer": "desk-research", "field": "research_route"})
            write_files(model, step)
            pending = await model.call("step_done")
            assert pending.data["status"] == "validators_pending", pending.text
            return str(step.data["run"]), list(step.data["files"])

    run, files = anyio.run(first)
    edited = project / files[0]  # a file changed since the round: the round is not taken back, its files are unchecked
    edited.write_text(edited.read_text("utf-8") + "\n", "utf-8")

    async def second() -> None:
        async with CheckedClient(bridge_params(project, world, state), mode="legacy") as client:
            model = stand_in(client, project)
            resumed = await model.call("resume_run", {"run": run})
            assert not resumed.is_error, resumed.text
            again = await model.call("record_verdict", {"validator": "evidence-auditor", "verdict": "pass"})
            written = f"This step's files are written ({', '.join(files)})"
            refused(again, "No validator is waiting for a verdict", written, "call step_done to have them checked")
            assert "have not been checked yet: write" not in again.text, again.text
            (project / files[0]).unlink()
            gone = await model.call("record_verdict", {"validator": "evidence-auditor", "verdict": "pass"})
            refused(gone, f"have not been checked yet: write {files[0]}, then call step_done")
            write_files(model, resumed)
            assert (await model.follow(await model.call("step_done"), "desk-research")).data["status"] == "completed"
            check_replies(model)

    anyio.run(second)


def test_a_refused_step_done_carries_the_refusals_status(world: ServerWorld, tmp_path: Path) -> None:
    async def script(model: StandIn) -> None:
        started = await model.start()
        assert started.data["status"] == "advanced" and not started.data["step"]["gated"], started.data
        bare = await model.call("step_done", {})
        refused(bare, "step_done on a step without files needs step", "call step_done with step interview")
        assert bare.data == {"run": started.data["run"], "status": MOVE_REFUSED, "step": {"id": "interview"}}
        other = await model.call("step_done", {"step": "desk-research"})
        refused(other, "is not the step the run is at")
        assert other.data["status"] == MOVE_REFUSED, other.data

    drive(world, tmp_path, script)


class Person:
    """The user behind the client: accepts every fact it is asked to confirm, and notes which."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(params.message.split()[1])
        assert isinstance(params, types.ElicitRequestFormParams)
        return types.ElicitResult(action="accept", content=as_shown(params.requested_schema["properties"]))


def test_a_fact_confirmed_already_with_the_same_value_is_not_asked_again(world: ServerWorld, tmp_path: Path) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()
    person = Person()
    example = json.loads(example_text("1.2.0", "confirmed-state.json"))

    async def go() -> None:
        params = bridge_params(project, world, state)
        async with CheckedClient(params, mode="legacy", elicitation_callback=person) as client:
            model = stand_in(client, project)
            started = await model.start(example)
            assert sorted(person.asked) == sorted(example), person.asked
            log = RunLog(project, started.data["run"])
            before = log.load_state()["confirmed_state"]["confirmations"]["options"]
            person.asked.clear()
            facts = {"options": example["options"], "deadline": "2031-01-31"}
            done = await model.call("step_done", {"step": "interview", "facts": facts})
            assert not done.is_error and done.data["step"]["id"] == "confirm-contract", done.text
            assert person.asked == ["deadline"], person.asked  # before: options was put to the person again
            assert "options: confirmed already with the same value; the user was not asked again." in done.text
            assert f"Recorded deadline as confirmed ({BY_ELICITATION})." in done.text, done.text
            confirmed = log.load_state()["confirmed_state"]
            assert confirmed["state"]["deadline"] == "2031-01-31"
            assert confirmed["confirmations"]["options"] == before
            check_replies(model)

    anyio.run(go)
