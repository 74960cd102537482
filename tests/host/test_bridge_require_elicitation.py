"""``rimthan-host serve --require-elicitation``: no confirmation rests on the model's word.

The real bridge over stdio with its real verifier child, and a real SDK client (2025-11-25, and 2026-07-28,
whose questions come back as ``input_required``). With the flag, a client that declares elicitation confirms
as usual: the person is asked. One that declares none gets every move
that would record a user's confirmation (facts at start_run and step_done, an answer, a migration or its facts)
refused in one line with the code, naming the way on, and nothing is sent to the verifier or written; the moves
that record none (show_step, a question shown again, a migration's preview) go on as before.
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
from rimthan_host.standin import Reply, StandIn
from support.bridge import as_shown, audited_only_run, bridge_params, check_replies, stand_in
from support.checked_client import CheckedClient
from support.servers import ServerWorld, build_world

FLAG = "--require-elicitation"
RELEASE = "research-decision@1.3.0"
NEW_FACTS = {"risk_tolerance": "medium", "stakeholders": ["CTO", "Backend team leads"]}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("require-elicitation-world"))


async def _person(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    """The user behind a client that elicits: yes to each fact as the model passed it, experiment as the route."""
    assert isinstance(params, types.ElicitRequestFormParams)
    properties = params.requested_schema["properties"]
    if "answer" in properties:
        return types.ElicitResult(action="accept", content={"answer": "experiment"})
    return types.ElicitResult(action="accept", content=as_shown(properties))


def _refusal(tool: str, what: str) -> str:
    return (
        "confirmation_required: this bridge requires the user's own confirmation (--require-elicitation) and the "
        f"client did not declare elicitation, so it cannot ask the user to confirm {what}; nothing was recorded or "
        "sent to the verifier, and the run is where it was.\n"
        f"next: tell the user; {tool} needs a client that declares elicitation (Claude Code does), or rimthan-host "
        "serve started with neither --require-elicitation nor RIMTHAN_REQUIRE_ELICITATION on (the Claude Code "
        "plugin's require_elicitation option sets it): then the model relays the user's word."
    )


def _refused(reply: Reply, tool: str, what: str) -> None:
    assert reply.is_error and reply.text == _refusal(tool, what), reply.text
    assert reply.data == {"status": "elicitation_required", "failures": ["confirmation_required"]}, reply.data


def _flagged_bridge(world: ServerWorld, tmp_path: Path) -> tuple[Path, Path, Any]:
    """A fresh project, the verifier's state directory, and ``rimthan-host serve --require-elicitation`` on them."""
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()
    params = bridge_params(project, world, state)
    return project, state, params.model_copy(update={"args": [params.args[0], FLAG, *params.args[1:]]})


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_a_client_without_elicitation_records_no_confirmation_and_one_with_it_asks_the_user(
    world: ServerWorld, tmp_path: Path, mode: str
) -> None:
    project, state, params = _flagged_bridge(world, tmp_path)

    async def with_elicitation(script: Any) -> None:
        async with CheckedClient(params, mode=mode, elicitation_callback=_person) as client:
            model = stand_in(client, project)
            await script(model)
            check_replies(model)

    async def started(model: StandIn) -> None:  # the facts put to the user in their client, as without the flag
        at_question = await model.follow(await model.start(), "", until_question=True)
        assert at_question.data["question"]["field"] == "research_route", at_question.text

    async def refused_without(model: StandIn) -> None:
        shown = await model.call("show_step")  # (the fresh bridge picks the run up from its log: nothing recorded)
        run = str(shown.data["run"])
        logged = RunLog(project, run).tokens()
        example = json.loads((model.examples[model.version] / "confirmed-state.json").read_text("utf-8"))
        facts = f"the facts ({', '.join(example)})"
        _refused(await model.start(), "start_run", facts)
        _refused(await model.call("answer_question", {"answer": "experiment", "field": "research_route"}),
                 "answer_question", "their answer to the question about research_route")  # fmt: skip
        _refused(await model.call("step_done", {"facts": {"deadline": "2027-01-01"}}), "step_done",
                 "the facts (deadline)")  # fmt: skip
        _refused(await model.call("migrate_run", {"to_release": RELEASE, "confirm": True}), "migrate_run",
                 "the migration")  # fmt: skip
        _refused(await model.call("migrate_run", {"to_release": RELEASE, "confirm": True, "facts": NEW_FACTS}),
                 "migrate_run", "the migration and the facts (risk_tolerance, stakeholders)")  # fmt: skip
        assert RunLog(project, run).tokens() == logged  # nothing sent to the verifier for any
        assert len(list((project / ".rimthan" / "runs").glob("*.log"))) == 1  # no second run started
        again = await model.call("answer_question", {"field": "research_route"})  # records nothing: as before
        assert again.data.get("status") != "elicitation_required" and "experiment" in again.text, again.text
        preview = await model.call("migrate_run", {"to_release": RELEASE, "confirm": False})
        assert preview.data["status"] == "preview" and "Migration from" in preview.text, preview.text

    async def without_elicitation() -> None:
        async with CheckedClient(params, mode=mode) as client:
            model = stand_in(client, project)
            await refused_without(model)
            check_replies(model)

    async def answered(model: StandIn) -> None:  # a client that elicits again: the person answers the question
        routed = await model.call("answer_question", {})
        assert routed.data["step"]["id"] == "experiment", routed.text

    anyio.run(with_elicitation, started)
    anyio.run(without_elicitation)
    anyio.run(with_elicitation, answered)
    (saved,) = (project / ".rimthan" / "runs").glob("*.json")
    confirmations = RunLog(project, saved.stem).load_state()["confirmed_state"]["confirmations"]
    assert "research_route" in confirmations
    assert {c["confirmed_by"] for c in confirmations.values()} == {BY_ELICITATION}
    assert audited_only_run(project, state)["ok"] is True
