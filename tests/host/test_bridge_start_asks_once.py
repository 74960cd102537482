"""The user is asked to confirm facts only once the move they go with can be made.

The real ``rimthan-host serve`` over stdio, a real SDK client with an
elicitation callback playing the person (2025-11-25, as Claude Code 2.1):
a start naming a workflow the verifier does not hold, or missing a fact the
workflow needs, asks the person nothing and says what to fix; the start with
every fact asks once per fact and starts. Before, the person confirmed each
fact given, then the start was refused, and the retry asked them all again.
Likewise a step_done with facts on a step whose files are not written yet.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import types
from rimthan_host.standin import StandIn
from support.bridge import as_shown, audited_only_run, bridge_params, check_replies, stand_in, write_files
from support.checked_client import CheckedClient
from support.servers import ServerWorld, build_world


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("asks-once-world"))


def _as_the_person(world: ServerWorld, tmp_path: Path, script: Callable[[StandIn, list[str]], Awaitable[None]]) -> None:
    """``script`` drives a fresh bridge whose person says yes to each fact (noting what it was asked, in the list
    ``script`` gets) and desk-research to the route question; every reply checked, the run's log audited."""
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()
    asked: list[str] = []

    async def person(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        if "answer" not in params.requested_schema["properties"]:
            asked.append(params.message)
            return types.ElicitResult(action="accept", content=as_shown(params.requested_schema["properties"]))
        (field,) = params.requested_schema["properties"]  # the route question
        return types.ElicitResult(action="accept", content={field: "desk-research"})

    async def go() -> None:
        async with CheckedClient(
            bridge_params(project, world, state), mode="legacy", elicitation_callback=person
        ) as client:
            model = stand_in(client, project)
            await script(model, asked)
            check_replies(model)

    anyio.run(go)
    assert audited_only_run(project, state)["ok"] is True


def test_a_start_that_cannot_go_asks_the_person_nothing_and_the_full_one_asks_each_fact_once(
    world: ServerWorld, tmp_path: Path
) -> None:
    async def script(model: StandIn, asked: list[str]) -> None:
        facts: dict[str, Any] = json.loads((model.examples[model.version] / "confirmed-state.json").read_text())
        unknown = await model.call("start_run", {"workflow": "no-such-workflow", "facts": facts})
        assert unknown.is_error and unknown.data["refused"] == "workflow_not_found", unknown.text
        assert asked == []  # (before: every fact confirmed, then refused)

        partial = {"objective": facts["objective"]}
        blocked = await model.call("start_run", {"workflow": "research", "facts": partial})
        assert blocked.is_error and blocked.data["status"] == "blocked", blocked.text
        assert "objective" not in blocked.data["needs"] and "decision_owner" in blocked.data["needs"]
        said = "Ask the user for what is missing and call start_run again with every fact: the bridge asks the user "
        assert said + "to confirm each in their own client." in blocked.text, blocked.text  # (it elicits)
        assert asked == []  # (before: the objective confirmed, then refused; the retry asked it again)
        assert not (model.project / ".rimthan" / "runs").exists()

        started = await model.call("start_run", {"workflow": "research", "facts": facts})
        assert not started.is_error and started.text.startswith("Started run"), started.text
        assert len(asked) == len(facts), asked  # each fact once
        await model.follow(started, "desk-research")

    _as_the_person(world, tmp_path, script)


def test_facts_with_a_step_done_before_its_files_are_written_are_put_to_the_person_once(
    world: ServerWorld, tmp_path: Path
) -> None:
    """Before, the person confirmed the deadline, the step_done was refused (files missing) without saying the
    deadline was recorded, and the step_done after writing them asked the person again."""

    async def script(model: StandIn, asked: list[str]) -> None:
        await model.follow(await model.start(), "", until_question=True)
        step = await model.call("answer_question", {})
        assert step.data["step"]["id"] == "desk-research", step.text
        asked.clear()
        early = await model.call("step_done", {"facts": {"deadline": "2027-01-01"}})
        assert early.is_error and early.data["status"] == "files_missing", early.text
        said = "The facts (deadline) were not recorded or put to the user yet: pass them again with that step_done."
        assert early.text.endswith(said), early.text
        assert asked == []
        write_files(model, step)
        waiting = await model.call("step_done", {"facts": {"deadline": "2027-01-01"}})
        assert waiting.data["status"] == "validators_pending", waiting.text
        (once,) = asked  # once
        assert once.startswith("Confirm deadline at step desk-research. The model passed:\n2027-01-01\n"), asked
        await model.follow(waiting, "desk-research")

    _as_the_person(world, tmp_path, script)
