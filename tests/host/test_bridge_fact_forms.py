"""A fact put to the person by elicitation offers the field's choices or type, as the release's schema declares them.

A real MCP client declaring elicitation drives the real bridge (``rimthan-host serve``) and its verifier, in both
protocol eras. Before, every fact's form could only confirm the model's value ("Yes, this is right"): a migration
needing ``risk_tolerance`` (low, medium or high) showed no choice, so the model had to ask in the conversation
first. Now the form offers the choices (the model's value as default), or a field of the fact's type with the
model's value filled in; the value the person picks is the one confirmed, and the verifier still checks it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import types
from rimthan_host.confirmations import BY_ELICITATION
from rimthan_host.runlog import RunLog
from support.bridge import as_shown, bridge_params, check_replies, stand_in
from support.checked_client import CheckedClient
from support.servers import ServerWorld, build_world

NEW_FACTS = {"risk_tolerance": "medium", "stakeholders": ["CTO", "Backend team leads"]}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("fact-forms-world"))


class Person:
    """The user behind the client: keeps each form, and fills a fact's own form with ``picks`` (by field) or
    declines it (``declines``); every other form is accepted as shown."""

    def __init__(self, picks: dict[str, Any] | None = None, declines: str = "") -> None:
        self.picks = picks or {}
        self.declines = declines
        self.forms: dict[str, tuple[str, dict[str, Any]]] = {}  # field -> (message, the form's property)

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        message = params.message
        properties: dict[str, Any] = params.requested_schema.get("properties", {})  # type: ignore[union-attr]
        if "answer" in properties:
            return types.ElicitResult(action="accept", content={"answer": "experiment"})
        if message.endswith("Migrate this run now?"):
            return types.ElicitResult(action="accept", content={"confirm": True})
        field = message.split()[1]
        self.forms[field] = (message, next(iter(properties.values())))
        if field == self.declines:
            return types.ElicitResult(action="decline")
        own = "value" in properties and field in self.picks  # (a yes/no form takes no value)
        picked = {"value": self.picks[field]} if own else as_shown(properties)
        return types.ElicitResult(action="accept", content=picked)


def _state(project: Path) -> dict[str, Any]:
    """The confirmed state saved for the run's last checkpoint."""
    (saved,) = (project / ".rimthan" / "runs").glob("*.json")
    state: dict[str, Any] = RunLog(project, saved.stem).load_state()["confirmed_state"]
    return state


def _run(world: ServerWorld, tmp_path: Path, mode: str, person: Person, moves: Any) -> Any:
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()

    async def go() -> Any:
        async with CheckedClient(bridge_params(project, world, state), mode=mode, elicitation_callback=person) as c:
            model = stand_in(c, project)
            out = await moves(model, project)
            check_replies(model)
            return out

    return anyio.run(go)


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_a_migration_fact_offers_its_choices_and_the_pick_is_migrated(
    world: ServerWorld, tmp_path: Path, mode: str
) -> None:
    person = Person(picks={"risk_tolerance": "high"})

    async def moves(model: Any, project: Path) -> Any:
        at_question = await model.follow(await model.start(), "", until_question=True)
        routed = await model.call("answer_question", {})
        assert not at_question.is_error and routed.data["step"]["id"] == "experiment", routed.text
        return await model.call("migrate_run", {"confirm": True, "facts": NEW_FACTS})

    moved = _run(world, tmp_path, mode, person, moves)
    message, form = person.forms["risk_tolerance"]
    # before: {"type": "boolean", "title": "Confirm", ...}, "Confirm risk_tolerance for this run:\nmedium"
    assert form == {"type": "string", "title": "risk_tolerance", "enum": ["low", "medium", "high"], "default": "medium"}
    assert message.startswith("Confirm risk_tolerance for the migration to research-decision@1.3.0. The model passed:"
                              "\nmedium\nPick the value that is right: low, medium, high.\nrisk_tolerance: How much "
                              "downside the owner accepts"), message  # fmt: skip
    assert person.forms["stakeholders"][1]["type"] == "boolean"  # (a list: confirmed as passed, yes or no)
    assert "The user chose risk_tolerance = high (you passed medium)." in moved.text, moved.text
    assert "Migrated run" in moved.text, moved.text
    state = _state(tmp_path / "project")
    assert state["state"]["risk_tolerance"] == "high"  # the person's pick, not the model's medium
    assert state["confirmations"]["risk_tolerance"]["confirmed_by"] == BY_ELICITATION


def test_start_facts_offer_their_type_and_the_value_given_starts_the_run(world: ServerWorld, tmp_path: Path) -> None:
    objective = "Should we move the Team plan to usage-based pricing?"
    person = Person(picks={"objective": objective})

    async def moves(model: Any, project: Path) -> Any:
        return await model.start()

    started = _run(world, tmp_path, "legacy", person, moves)
    assert not started.is_error, started.text
    message, form = person.forms["objective"]
    passed = "Should we replace our self-hosted PostgreSQL with a managed service before Q3?"
    assert form == {"type": "string", "title": "objective", "default": passed, "minLength": 1, "maxLength": 500}
    assert message.startswith(f"Confirm objective to start research. The model passed:\n{passed}\nCheck the value, "
                              "or correct it (string).\nobjective: The decision to make"), message  # fmt: skip
    assert f"The user chose objective = {objective} (you passed {passed})." in started.text, started.text
    assert _state(tmp_path / "project")["state"]["objective"] == objective


def test_mid_run_facts_offer_their_type_and_the_verifier_still_checks_the_value(
    world: ServerWorld, tmp_path: Path
) -> None:
    person = Person()

    async def moves(model: Any, project: Path) -> Any:
        await model.start()  # (its deadline, 2026-03-31, offered in its own form too: accepted as shown)
        person.picks = {"deadline": "next spring"}
        refused = await model.call("step_done", {"step": "interview", "facts": {"deadline": "2026-04-30"}})
        assert _state(project)["state"]["deadline"] == "2026-03-31"  # (the start's)
        person.declines = "deadline"
        declined = await model.call("step_done", {"step": "interview", "facts": {"deadline": "2026-06-01"}})
        assert _state(project)["state"]["deadline"] == "2026-03-31"
        person.declines, person.picks = "", {"deadline": "2026-05-15"}
        moved = await model.call("step_done", {"step": "interview", "facts": {"deadline": "2026-04-30"}})
        return refused, moved, declined

    refused, moved, declined = _run(world, tmp_path, "legacy", person, moves)
    message, form = person.forms["deadline"]
    assert form == {"type": "string", "title": "deadline", "default": "2026-04-30", "format": "date"}
    assert message.startswith("Confirm deadline at step interview. The model passed:\n2026-04-30\n"), message
    # the value the person gave is what the verifier checks: fail closed, nothing recorded
    assert refused.is_error and refused.data["status"] == "facts_refused", refused.text
    assert "Nothing was recorded: the verifier refused the facts deadline" in refused.text, refused.text
    assert "The user chose deadline = 2026-05-15 (you passed 2026-04-30)." in moved.text, moved.text
    # a person who declines still declines: nothing recorded (asserted in the moves)
    assert declined.is_error and declined.data["user"] == "decline", declined.text
    assert _state(tmp_path / "project")["state"]["deadline"] == "2026-05-15"
