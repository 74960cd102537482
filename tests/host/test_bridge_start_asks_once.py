"""The user is asked to confirm a run's facts only once the run can start with them.

The real ``rimthan-host serve`` over stdio, a real SDK client with an
elicitation callback playing the person (2025-11-25, as Claude Code 2.1):
a start naming a workflow the verifier does not hold, or missing a fact the
workflow needs, asks the person nothing and says what to fix; the start with
every fact asks once per fact and starts. Before, the person confirmed each
fact given, then the start was refused, and the retry asked them all again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, types
from support.bridge import audited_only_run, bridge_params, check_replies, stand_in
from support.servers import ServerWorld, build_world


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("asks-once-world"))


def test_a_start_that_cannot_go_asks_the_person_nothing_and_the_full_one_asks_each_fact_once(
    world: ServerWorld, tmp_path: Path
) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()
    asked: list[str] = []

    async def person(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        if "confirm" in params.requested_schema["properties"]:
            asked.append(params.message)
            return types.ElicitResult(action="accept", content={"confirm": True})
        (field,) = params.requested_schema["properties"]  # the route question
        return types.ElicitResult(action="accept", content={field: "desk-research"})

    async def go() -> None:
        async with Client(bridge_params(project, world, state), mode="legacy", elicitation_callback=person) as client:
            model = stand_in(client, project)
            facts: dict[str, Any] = json.loads((model.examples[model.version] / "confirmed-state.json").read_text())
            unknown = await model.call("start_run", {"workflow": "no-such-workflow", "facts": facts})
            assert unknown.is_error and unknown.data["refused"] == "workflow_not_found", unknown.text
            assert asked == []  # (before: every fact confirmed, then refused)

            partial = {"objective": facts["objective"]}
            blocked = await model.call("start_run", {"workflow": "research", "facts": partial})
            assert blocked.is_error and blocked.data["status"] == "blocked", blocked.text
            assert "objective" not in blocked.data["needs"] and "decision_owner" in blocked.data["needs"]
            assert "Ask the user for what is missing and call start_run again with every fact." in blocked.text
            assert asked == []  # (before: the objective confirmed, then refused; the retry asked it again)
            assert not (project / ".rimthan" / "runs").exists() or not any((project / ".rimthan" / "runs").iterdir())

            started = await model.call("start_run", {"workflow": "research", "facts": facts})
            assert not started.is_error and started.text.startswith("Started run"), started.text
            assert len(asked) == len(facts), asked  # each fact once
            await model.follow(started, "desk-research")
            check_replies(model)

    anyio.run(go)
    assert audited_only_run(project, state)["ok"] is True
