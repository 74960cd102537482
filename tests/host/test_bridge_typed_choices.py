"""A question whose choices are numbers or booleans, answered through the bridge: the typed choice is recorded.

The model (and the person, through elicitation) answers with text; the bridge
shows each choice as JSON when it is no text (``2, 5``; ``true, false``) and
maps the answer back to the choice it shows exactly, so the confirmed state
holds the integer or the boolean the workflow's branches test. An answer that
is none of the choices is refused (``branch_no_match``) with a ``next:`` line
listing them, and nothing is sent. A real release of a scaffolded catalogue
(``support.releases.typed_question_source``) behind the real verifier.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import types
from mcp.client.stdio import StdioServerParameters
from rimthan_host.runlog import RunLog
from rimthan_host.standin import Reply, StandIn
from rimthan_host.words import choice_texts
from support.bridge import BIN, as_shown, check_replies, refused
from support.checked_client import CheckedClient
from support.processes import serve_options
from support.releases import build_release, make_keypair, trust_dir, typed_question_source

GOAL = {"goal": "Decide whether to keep the weekly status meeting"}


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The typed-question catalogue built and signed for real: the release and its trust directory."""
    root = tmp_path_factory.mktemp("typed-choices")
    key = make_keypair(root / "keys", "release-engineer")
    return build_release(typed_question_source(root), root / "releases", [key]), trust_dir(root / "trust", key)


def _params(release: tuple[Path, Path], tmp_path: Path) -> tuple[StdioServerParameters, Path]:
    project = tmp_path / "project"
    project.mkdir()
    options = serve_options(release[0], release[1], tmp_path / "state", log_level="warning")
    args = ["serve", "--project", str(project), "--", *options]
    return StdioServerParameters(command=str(BIN / "rimthan-host"), args=args), project


def _confirmed(project: Path, run: str) -> dict[str, Any]:
    state: dict[str, Any] = RunLog(project, run).load_state()["confirmed_state"]["state"]
    return state


async def _asked(model: StandIn, step: str, field: str, shown: str) -> Reply:
    """step_done on the ungated ``step``: its question, its choices shown as ``shown``."""
    asked = await model.call("step_done", {"step": step})
    assert asked.data["status"] == "input_required" and asked.data["question"]["field"] == field, asked.text
    assert f"Choices: {shown}." in asked.text, asked.text
    return asked


@pytest.mark.parametrize(("wrong", "size", "over"), [("3", "5", "false"), (3, 5, False)], ids=["text", "json"])
def test_number_and_boolean_choices_answered_by_the_model_are_recorded_as_their_type(
    release: tuple[Path, Path], tmp_path: Path, wrong: object, size: object, over: object
) -> None:
    """Sent as the text shown or as the JSON value (a model shown ``Choices: 2, 5.`` may well send the number 5;
    before, refused: "answer must be a string"), each is the typed choice; a number that is no choice is refused."""
    params, project = _params(release, tmp_path)

    async def go() -> StandIn:
        async with CheckedClient(params, mode="legacy") as client:
            model = StandIn(client, project, {})
            started = await model.call("start_run", {"workflow": "demo", "facts": GOAL})
            assert started.data["step"]["id"] == "plan", started.text
            run = started.data["run"]
            asked = await _asked(model, "plan", "team_size", "2, 5")
            assert asked.data["question"]["choices"] == [2, 5]
            refusal = await model.call("answer_question", {"answer": wrong, "field": "team_size"})
            refused(refusal, "branch_no_match: nothing was recorded: '3' is not one of the choices of team_size")
            assert "\nnext: ask the user to choose one of 2, 5, then call answer_question with field team_size" in (
                refusal.text
            )
            assert refusal.data["code"] == "branch_no_match" and refusal.data["choices"] == ["2", "5"], refusal.data
            assert "team_size" not in _confirmed(project, run)  # nothing was sent
            sized = await model.call("answer_question", {"answer": size, "field": "team_size"})
            assert sized.data["step"]["id"] == "decide" and "Recorded team_size = 5" in sized.text, sized.text
            await _asked(model, "decide", "over_budget", "true, false")
            python = await model.call("answer_question", {"answer": "False", "field": "over_budget"})
            refused(python, "'False' is not one of the choices of over_budget", "choose one of true, false")
            decided = await model.call("answer_question", {"answer": over, "field": "over_budget"})
            assert decided.data["step"]["id"] == "write-summary", decided.text
            assert _confirmed(project, run) == {**GOAL, "team_size": 5, "over_budget": False}
            return model

    check_replies(anyio.run(go))


def test_number_and_boolean_choices_answered_through_elicitation_are_recorded_as_their_type(
    release: tuple[Path, Path], tmp_path: Path
) -> None:
    params, project = _params(release, tmp_path)
    enums: list[list[str]] = []

    async def person(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        """Confirms each fact; picks the last choice the form offers (5, then false)."""
        properties = params.requested_schema.get("properties", {})  # type: ignore[union-attr]
        if "answer" not in properties:
            return types.ElicitResult(action="accept", content=as_shown(properties))
        enums.append(properties["answer"]["enum"])
        return types.ElicitResult(action="accept", content={"answer": enums[-1][-1]})

    async def go() -> StandIn:
        async with CheckedClient(params, mode="legacy", elicitation_callback=person) as client:
            model = StandIn(client, project, {})
            run = (await model.call("start_run", {"workflow": "demo", "facts": GOAL})).data["run"]
            await _asked(model, "plan", "team_size", "2, 5")
            sized = await model.call("answer_question", {"field": "team_size"})
            assert sized.data["step"]["id"] == "decide", sized.text
            await _asked(model, "decide", "over_budget", "true, false")
            decided = await model.call("answer_question", {"field": "over_budget"})
            assert decided.data["step"]["id"] == "write-summary", decided.text
            assert _confirmed(project, run) == {**GOAL, "team_size": 5, "over_budget": False}
            return model

    check_replies(anyio.run(go))
    assert enums == [["2", "5"], ["true", "false"]]


def test_choices_that_would_show_alike_are_all_shown_as_json() -> None:
    """A catalogue may offer the text "5" beside the number 5 (a field whose schema takes both): shown plainly,
    both would read 5 and an answer could not name one of them, so then every choice is shown as JSON."""
    assert choice_texts(["desk-research", 5, True]) == ("desk-research", "5", "true")
    assert choice_texts(["5", 5, "a"]) == ('"5"', "5", '"a"')
    assert choice_texts(["true", True]) == ('"true"', "true")


def test_typed_facts_offer_their_choices_and_type_and_the_pick_is_recorded_as_its_type(
    release: tuple[Path, Path], tmp_path: Path
) -> None:
    """Facts passed with step_done (a 2026-07-28 client): team_size's form offers its integer choices as text, with
    the model's 2 as default; over_budget's is a boolean, the model's true filled in. The person picks 5 and false:
    the integer 5 and the boolean false are recorded (false is a value here, no "no"). Before, both forms were
    "Yes, this is right" boxes that confirmed 2 and true."""
    params, project = _params(release, tmp_path)
    forms: dict[str, dict[str, Any]] = {}

    async def person(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        properties = params.requested_schema.get("properties", {})  # type: ignore[union-attr]
        forms[params.message.split()[1]] = next(iter(properties.values()))
        picks: dict[str, Any] = {"team_size": "5", "over_budget": False}
        field = params.message.split()[1]
        content = {"value": picks[field]} if field in picks else as_shown(properties)
        return types.ElicitResult(action="accept", content=content)

    async def go() -> StandIn:
        async with CheckedClient(params, mode="2026-07-28", elicitation_callback=person) as client:
            model = StandIn(client, project, {})
            run = (await model.call("start_run", {"workflow": "demo", "facts": GOAL})).data["run"]
            facts = {"team_size": 2, "over_budget": True}
            done = await model.call("step_done", {"step": "plan", "facts": facts})
            assert not done.is_error, done.text
            assert "The user chose team_size = 5 (you passed 2)." in done.text, done.text
            assert "The user chose over_budget = false (you passed true)." in done.text, done.text
            assert _confirmed(project, run) == {**GOAL, "team_size": 5, "over_budget": False}
            return model

    check_replies(anyio.run(go))
    assert forms["team_size"] == {"type": "string", "title": "team_size", "enum": ["2", "5"], "default": "2"}
    assert forms["over_budget"] == {"type": "boolean", "title": "over_budget", "default": True}


def test_a_fact_passed_as_an_equal_number_is_its_choice(release: tuple[Path, Path], tmp_path: Path) -> None:
    """The model passes team_size as 5.0 (JSON's 5.0 is the choice 5 for JSON Schema, and for the verifier): the
    form offers "5" as the default, the person accepts it, and the bridge says nothing of another value. Before,
    the bridge compared JSON texts ("5.0" against "5"): no default was offered, and a pick of 5 was told to the
    model as "The user chose team_size = 5 (you passed 5.0)."."""
    params, project = _params(release, tmp_path)
    forms: dict[str, dict[str, Any]] = {}

    async def person(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        properties = params.requested_schema.get("properties", {})  # type: ignore[union-attr]
        field = params.message.split()[1]
        forms[field] = next(iter(properties.values()))
        content: dict[str, Any] = {"value": "5"} if field == "team_size" else as_shown(properties)
        return types.ElicitResult(action="accept", content=content)

    async def go() -> StandIn:
        async with CheckedClient(params, mode="2026-07-28", elicitation_callback=person) as client:
            model = StandIn(client, project, {})
            run = (await model.call("start_run", {"workflow": "demo", "facts": GOAL})).data["run"]
            done = await model.call("step_done", {"step": "plan", "facts": {"team_size": 5.0}})
            assert not done.is_error, done.text
            assert "The user chose" not in done.text, done.text
            assert _confirmed(project, run) == {**GOAL, "team_size": 5}
            return model

    check_replies(anyio.run(go))
    assert forms["team_size"] == {"type": "string", "title": "team_size", "enum": ["2", "5"], "default": "5"}
