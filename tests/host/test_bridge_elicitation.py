"""The person confirms through the client's own interface: elicitation in both MCP protocol eras.

A 2025-11-25 client gets ``elicitation/create`` requests; a 2026-07-28 client
gets ``input_required`` results and retries with its answers (the SDK client
does the round trips). For a state field, a route question and a migration:
decline and cancel leave nothing confirmed and the run where it was; accept
confirms, and the saved confirmation says it came through elicitation.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import types
from rimthan_host.confirmations import BY_ELICITATION
from rimthan_host.runlog import RunLog
from rimthan_host.standin import Reply, StandIn
from support.bridge import as_shown, audit, bridge_params, check_replies, stand_in
from support.checked_client import CheckedClient
from support.servers import ServerWorld, build_world

NEW_FACTS = {"risk_tolerance": "medium", "stakeholders": ["CTO", "Backend team leads"]}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("elicit-world"))


class Person:
    """The user behind the client: answers each elicitation as the test's policy says."""

    def __init__(self) -> None:
        self.policy: dict[str, str] = {}  # "field:<name>" | "route" | "migrate" -> accept | decline | cancel | no
        self.asked: list[str] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        message = params.message
        properties = params.requested_schema.get("properties", {})  # type: ignore[union-attr]
        content: dict[str, Any]
        if "answer" in properties:
            kind, content = "route", {"answer": "experiment"}
        elif message.endswith("Migrate this run now?"):
            kind, content = "migrate", {"confirm": True}
        else:  # (a fact's own form, its choices or type: the value as the model passed it)
            kind, content = "field:" + message.split()[1], as_shown(properties)
        self.asked.append(kind)
        action = self.policy.get(kind, "accept")
        if action == "no":  # the person answers the form: "Yes, this is right" left unticked
            return types.ElicitResult(action="accept", content={"confirm": False})
        return types.ElicitResult(action=action, content=content if action == "accept" else None)  # type: ignore[arg-type]


def _saved(project: Path) -> dict[str, Any]:
    """The resume state saved for the run log's last checkpoint."""
    (state,) = (project / ".rimthan" / "runs").glob("*.json")
    return RunLog(project, state.stem).load_state()


_NOT_ANSWERED = {
    "decline": "The user declined the question about research_route: they said no to answering it as asked; nothing "
    "was recorded; the run stays at step select-route.\nnext: ask the user in the conversation what they want "
    "instead, then call answer_question with field research_route and their answer (they are asked to confirm it).",
    "cancel": "The user dismissed the question about research_route (cancel): nothing was answered, so nothing "
    "was recorded; the run stays at step select-route.\nnext: call answer_question with field research_route to ask "
    "them again.",
}


# A fact at start_run and the migration read apart the same way (before, alike: "did not confirm ... (decline)").
_NOT_STARTED = {
    "decline": "The user declined the request to confirm objective: they said no to the value as it was put to them; "
    "the run did not start.\nnext: ask the user in the conversation what objective should be instead, then call "
    "start_run again with it in facts (they are asked to confirm it).",
    "cancel": "The user dismissed the request to confirm objective (cancel): nothing was answered, so the run did not "
    "start.\nnext: call start_run again with the same facts to ask them again.",
}

_HELD = (
    "Already confirmed by the user: decision_owner, options, success_criteria, deadline, constraints; call start_run "
    "again with the same value for each and the user is not asked again for it (another value is put to them)."
)


def _not_migrated(run: str) -> dict[str, str]:
    stays = f"nothing was migrated; run {run} stays at step experiment on its release."
    carry_on = "carry on with step experiment (show_step says what it needs)"
    return {
        "decline": f"The user declined the question to migrate run {run}: they said no to migrating it now; {stays}"
        f"\nnext: {carry_on}; call migrate_run again only if the user asks for the newer release.",
        "cancel": f"The user dismissed the question to migrate run {run} (cancel): nothing was answered, so {stays}"
        f"\nnext: call migrate_run with confirm true to ask them again, or {carry_on} if they would rather not.",
        "fact:decline": "The user declined the request to confirm risk_tolerance: they said no to the value as it "
        f"was put to them; {stays}\nnext: ask the user in the conversation what risk_tolerance should be instead, "
        "then call migrate_run again with it in facts (they are asked to confirm it).",
        "fact:cancel": "The user dismissed the request to confirm risk_tolerance (cancel): nothing was answered, so "
        f"{stays}\nnext: call migrate_run again with the same facts to ask them again.",
    }


# The facts a migration not made holds for its retry, by era and refusal: a 2025-11-25 client is asked one form at a
# time (risk_tolerance, refused, first: nothing held), a 2026-07-28 one every form at once (stakeholders held).
_MIGRATION_HELD = {
    "legacy": {"decline": "risk_tolerance, stakeholders", "cancel": "risk_tolerance, stakeholders"},
    "2026-07-28": {"fact:decline": "stakeholders", "fact:cancel": "stakeholders",
                   "decline": "stakeholders, risk_tolerance", "cancel": "risk_tolerance, stakeholders"},
}  # fmt: skip


def _migration_held(mode: str, refusal: str) -> str:
    """The line a migration refused ``refusal`` in ``mode`` says of the facts held: each is not asked again."""
    held = _MIGRATION_HELD[mode].get(refusal)
    if held is None:
        return ""
    return (f"Already confirmed by the user: {held}; call migrate_run again with the same value for each and the "
            "user is not asked again for it (another value is put to them).")  # fmt: skip


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_accept_decline_and_cancel_for_a_field_a_route_and_a_migration(
    world: ServerWorld, tmp_path: Path, mode: str
) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()
    person = Person()

    async def go() -> StandIn:
        params = bridge_params(project, world, state)
        async with CheckedClient(params, mode=mode, elicitation_callback=person) as client:
            assert client.protocol_version == ("2025-11-25" if mode == "legacy" else mode)
            model = stand_in(client, project)
            for refusal in ("decline", "cancel"):
                person.policy = {"field:objective": refusal}
                reply = await model.start()
                assert reply.is_error and reply.data == {"status": "not_started", "user": refusal, "field": "objective"}
                expected = _NOT_STARTED[refusal]
                if mode != "legacy":  # (every form at once: the other facts were confirmed, and are held)
                    head, todo = expected.split("\nnext: ")
                    expected = f"{head}\n{_HELD}\nnext: {todo}"
                assert reply.text == expected, reply.text
                assert not (project / ".rimthan" / "runs").exists()
            person.policy = {}
            at_question = await model.follow(await model.start(), "", until_question=True)
            assert "the user is asked directly" in at_question.text
            for refusal in ("decline", "cancel"):
                person.policy = {"route": refusal}
                reply = await model.call("answer_question", {})
                assert reply.is_error and reply.data["user"] == refusal
                # (before: "Call answer_question to ask again", data without the run, the step or the field)
                where = {"run": at_question.data["run"], "step": {"id": "select-route"}, "field": "research_route"}
                assert reply.data == {"status": "input_required", "user": refusal, **where}, reply.data
                # declined and cancelled read apart (before, alike: "did not answer ... (decline)", "(cancel)")
                assert reply.text == _NOT_ANSWERED[refusal], reply.text
                assert "research_route" not in _saved(project)["confirmed_state"]["state"]
            person.policy = {}
            routed = await model.call("answer_question", {})
            assert routed.data["step"]["id"] == "experiment", routed.text
            confirmations = _saved(project)["confirmed_state"]["confirmations"]
            assert {c["confirmed_by"] for c in confirmations.values()} == {BY_ELICITATION}
            migrate = {"to_release": "research-decision@1.3.0", "confirm": True, "facts": NEW_FACTS}
            not_migrated = _not_migrated(at_question.data["run"])
            for refusal in ("fact:decline", "fact:cancel", "decline", "cancel"):
                fact = refusal.startswith("fact:")  # (a fact the newer release needs: asked before the migration)
                person.policy = {"field:risk_tolerance": refusal[5:]} if fact else {"migrate": refusal}
                reply = await model.call("migrate_run", migrate)
                assert reply.is_error and reply.data["user"] == refusal.removeprefix("fact:"), reply.data
                held = _migration_held(mode, refusal)  # (each fact confirmed is not asked again)
                expected = not_migrated[refusal]
                if held:
                    head, todo = expected.split("\nnext: ")
                    expected = f"{head}\n{held}\nnext: {todo}"
                assert reply.text == expected, reply.text
                assert _saved(project)["release"]["id"] == "research-decision@1.2.0"
            person.policy = {}
            moved = await model.call("migrate_run", migrate)
            assert "Migrated run" in moved.text and _saved(project)["release"]["id"] == "research-decision@1.3.0"
            model.version = "1.3.0"
            final = await model.follow(moved, "experiment")
            assert final.data["status"] == "completed"
            return model

    model = anyio.run(go)
    # (after a fact's refusal a 2025-11-25 client is asked nothing more; a 2026-07-28 one gets every question at once)
    assert person.asked.count("route") == 3 and person.asked.count("migrate") == (3 if mode == "legacy" else 5)
    assert "field:risk_tolerance" in person.asked
    assert model.leaks() == []
    (log,) = (project / ".rimthan" / "runs").glob("*.log")
    assert audit(log, state)["ok"] is True


def test_without_elicitation_the_model_relays_the_user_and_that_is_recorded(world: ServerWorld, tmp_path: Path) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()

    async def go() -> None:
        async with CheckedClient(bridge_params(project, world, state), mode="legacy") as client:
            model = stand_in(client, project)
            partial = await model.start(_without(model, "objective", "decision_owner"))
            assert partial.is_error and "objective" in partial.text and "decision_owner" in partial.text, partial.text
            at_question = await model.follow(await model.start(), "", until_question=True)
            assert "Ask the user this question, then call answer_question" in at_question.text
            missing = await model.call("answer_question", {})
            assert missing.is_error
            await model.call("answer_question", {"answer": "experiment", "field": "research_route"})

    anyio.run(go)
    confirmations = _saved(project)["confirmed_state"]["confirmations"]
    assert {c["confirmed_by"] for c in confirmations.values()} == {"user, asked by the model"}


def _without(model: StandIn, *names: str) -> dict[str, Any]:
    """The example facts with ``names`` left out (what the user has not confirmed yet)."""
    facts: dict[str, Any] = json.loads((model.examples["1.2.0"] / "confirmed-state.json").read_text("utf-8"))
    return {k: v for k, v in facts.items() if k not in names}


def test_a_no_in_the_form_is_said_as_a_no(world: ServerWorld, tmp_path: Path) -> None:
    """An accept whose confirm is false confirms nothing, and the words say the user answered no, not "accept".

    For a migration, they say what the no was to (a fact the newer release needs, or the migration) and which
    call comes next; before, both were "did not confirm the migration", naming no call.
    """
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()
    person = Person()

    async def go() -> None:
        async with CheckedClient(
            bridge_params(project, world, state), mode="legacy", elicitation_callback=person
        ) as client:
            model = stand_in(client, project)
            # (a list is confirmed yes or no; a text such as objective has its own form: test_bridge_fact_forms.py)
            person.policy = {"field:options": "no"}
            reply = await model.start()
            assert reply.is_error and reply.data == {"status": "not_started", "user": "no", "field": "options"}
            assert "The user did not confirm options (no); the run did not start." in reply.text, reply.text
            person.policy = {}
            started = await model.start()
            # A no to a fact confirmed mid-run names the run and the step in data too (before: status, user, field)
            person.policy = {"field:constraints": "no"}
            # (a changed value: one confirmed already with the same value is not asked again)
            constraints = await model.call("step_done", {"step": "interview", "facts": {"constraints": ["No outage"]}})
            where = {"run": started.data["run"], "step": {"id": "interview"}, "field": "constraints"}
            assert constraints.data == {"status": "not_confirmed", "user": "no", **where}, constraints.data
            assert constraints.text.startswith("The user did not confirm constraints (no); nothing was recorded; the "
                                               "run stays at step interview."), constraints.text  # fmt: skip
            person.policy = {}
            at_question = await model.follow(started, "", until_question=True)
            routed = await model.call("answer_question", {})
            assert not at_question.is_error and not routed.is_error, routed.text
            person.policy = {"migrate": "no"}
            migrate = {"confirm": True, "facts": NEW_FACTS}
            refused = await model.call("migrate_run", migrate)
            assert refused.is_error and refused.data["user"] == "no" and "field" not in refused.data, refused.text
            assert "The user did not confirm the migration (no); nothing was migrated" in refused.text
            assert "Carry on with step experiment (show_step" in refused.text
            assert "call migrate_run again only if the user asks" in refused.text
            # A no to a fact the newer release needs is no no to the migration: the reply names the fact.
            person.policy = {"field:stakeholders": "no"}  # (another value: the one confirmed above is held, not asked)
            other = {**NEW_FACTS, "stakeholders": ["CTO"]}
            fact_no = await model.call("migrate_run", {"confirm": True, "facts": other})
            assert fact_no.is_error and fact_no.data["field"] == "stakeholders", fact_no.text
            assert fact_no.text.startswith("The user did not confirm stakeholders (no); nothing was migrated")
            assert "call migrate_run with the value they confirm in facts again" in fact_no.text
            assert "migrate" not in person.asked[-1]  # the migration itself was not asked
            check_replies(model)

    anyio.run(go)


def _migrated(
    world: ServerWorld, tmp_path: Path, facts_of: Callable[[dict[str, Any]], dict[str, Any]]
) -> tuple[Reply, list[str], Path]:
    """A run routed to experiment (1.2.0), then ``migrate_run`` to 1.3.0 with ``confirm`` and the facts ``facts_of``
    the run's confirmed values gives: its reply, what the person was asked for it, and the project."""
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()
    person = Person()

    async def go() -> tuple[Reply, list[str]]:
        params = bridge_params(project, world, state)
        async with CheckedClient(params, mode="legacy", elicitation_callback=person) as client:
            model = stand_in(client, project)
            at_question = await model.follow(await model.start(), "", until_question=True)
            routed = await model.call("answer_question", {})
            assert routed.data["step"]["id"] == "experiment" and not at_question.is_error, routed.text
            asked_before = len(person.asked)
            facts = facts_of(_saved(project)["confirmed_state"]["state"])
            moved = await model.call("migrate_run", {"confirm": True, "facts": facts})
            check_replies(model)
            return moved, person.asked[asked_before:]

    moved, asked = anyio.run(go)
    assert "Migrated run" in moved.text, moved.text
    assert _saved(project)["release"]["id"] == "research-decision@1.3.0"
    return moved, asked, project


def test_a_migration_does_not_ask_again_for_a_fact_confirmed_with_the_same_value(
    world: ServerWorld, tmp_path: Path
) -> None:
    """migrate_run with facts the run holds with the same value asks the user only for the new ones (and the
    migration); before, every fact passed was put to them again."""
    moved, asked, _ = _migrated(world, tmp_path, lambda state: {**NEW_FACTS, "objective": state["objective"]})
    assert sorted(asked) == ["field:risk_tolerance", "field:stakeholders", "migrate"], asked
    assert "objective: confirmed already with the same value; the user was not asked again." in moved.text


def test_a_migration_does_not_ask_for_a_fact_the_target_has_no_field_for(world: ServerWorld, tmp_path: Path) -> None:
    """migrate_run with a fact of a field research-decision 1.3.0's confirmed state does not have put it to the user,
    who confirmed it, and then the session dropped it unsaid. It is not asked for, and the reply says it was not
    carried."""
    moved, asked, project = _migrated(world, tmp_path, lambda state: {**NEW_FACTS, "mascot": "otter"})
    assert sorted(asked) == ["field:risk_tolerance", "field:stakeholders", "migrate"], asked
    said = "mascot: not carried to research-decision@1.3.0, whose confirmed state has no such field; the user was "
    assert said + "not asked to confirm it." in moved.text, moved.text
    assert "mascot" not in _saved(project)["confirmed_state"]["state"]
