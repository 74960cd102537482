"""A fact of another shape than its field takes is refused before the user is asked, saying what the field takes.

A model driving the bridge from the plugin's words alone passed the interview's two options as one text and a
deadline as "31 March 2027": the bridge put every fact to the user in a form, and only then did the verifier
refuse (``is not of type 'array'``, ``is not a 'date'``), with "Ask the user for a value that fits": the user had
confirmed values that were never recorded, and the model was sent back to them for an answer that was right.
Now the field's type (and a date's format) in the release is checked first: the reply says what the field takes
(a list of texts, YYYY-MM-DD) and that no one was asked; the tools' ``facts`` and the plugin's skill say the
shape up front. A migration preview also says which confirmed facts carry over, so the steps it walks again do
not read as a new interview. Real releases, the real ``rimthan-host serve`` and its verifier, a real SDK client.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import types
from rimthan_host.standin import StandIn
from support.bridge import bridge_params, check_replies, drive, refused, stand_in
from support.checked_client import CheckedClient
from support.servers import ServerWorld, build_world

SKILL = Path(__file__).parents[2] / "host/claude-plugin/rimthan/skills/rimthan-run/SKILL.md"
START = {"objective": "Should we open an office in Lisbon?", "decision_owner": "COO"}
IN_WORDS = "Nothing was done: options takes a list (a JSON array) of texts, and you passed a text (a JSON string)"
NOT_THE_ANSWER = "(the shape of the value, not the user's answer: do not ask them again for it)"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("fact-shapes-world"))


class Person:
    """The user behind an eliciting client: keeps each form's message and accepts it as shown."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(params.message)
        properties: dict[str, Any] = params.requested_schema.get("properties", {})  # type: ignore[union-attr]
        key, form = next(iter(properties.items()))
        return types.ElicitResult(action="accept", content={key: form.get("default", True)})


def _eliciting(world: ServerWorld, tmp_path: Path, person: Person, moves: Any) -> Any:
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()

    async def go() -> tuple[Any, StandIn]:
        async with CheckedClient(bridge_params(project, world, state), mode="legacy", elicitation_callback=person) as c:
            model = stand_in(c, project)
            return await moves(model), model

    out, model = anyio.run(go)
    check_replies(model)
    return out


def test_a_list_passed_as_text_is_refused_at_start_before_the_user_is_asked(world: ServerWorld, tmp_path: Path) -> None:
    person = Person()

    async def moves(model: Any) -> Any:
        bad = await model.call("start_run", {"workflow": "research", "facts": {**START, "options": "Open it; stay"}})
        asked_before = list(person.asked)
        good = await model.call("start_run", {"workflow": "research", "facts": {**START, "options": ["Open", "Stay"]}})
        return bad, asked_before, good

    bad, asked_before, good = _eliciting(world, tmp_path, person, moves)
    # before: every fact put to the user in a form, then "is not of type 'array' ... fix what it names"
    refused(bad, IN_WORDS, 'e.g. "options": ["...", "..."]', NOT_THE_ANSWER, "The run did not start, and the user "
            "was not asked to confirm any fact. Call start_run again with every fact in facts")  # fmt: skip
    assert bad.data["status"] == "facts_refused" and bad.data["misshapen"] == ["options"], bad.data
    assert asked_before == []
    assert not good.is_error and "Started run" in good.text, good.text


def test_a_date_in_words_is_refused_mid_run_before_the_user_is_asked(world: ServerWorld, tmp_path: Path) -> None:
    person = Person()

    async def moves(model: Any) -> Any:
        await model.call("start_run", {"workflow": "research", "facts": START})
        person.asked.clear()
        bad = await model.call("step_done", {"step": "interview", "facts": {"deadline": "31 March 2027"}})
        asked_before = list(person.asked)
        good = await model.call("step_done", {"step": "interview", "facts": {"deadline": "2027-03-31"}})
        return bad, asked_before, good

    bad, asked_before, good = _eliciting(world, tmp_path, person, moves)
    # before: the deadline confirmed in a form, then "is not a 'date'. Ask the user for a value that fits"
    refused(bad, "Nothing was done: deadline takes a date written YYYY-MM-DD (e.g. 2027-03-31), and you passed 31 "
            "March 2027: if the user named a day, pass it written that way; if not, ask them for the day. Nothing was "
            "recorded; the run stays at step interview, and the user was not asked")  # fmt: skip
    assert asked_before == []
    assert not good.is_error and "Recorded deadline as confirmed" in good.text, good.text


def test_without_elicitation_the_shape_is_named_before_the_verifier_asked(world: ServerWorld, tmp_path: Path) -> None:
    async def script(model: Any) -> None:
        await model.call("start_run", {"workflow": "research", "facts": START})
        bad = await model.call("step_done", {"step": "interview", "facts": {"options": "Open it, or stay remote"}})
        # before: "... is not of type 'array'); ... Ask the user for a value that fits"
        refused(bad, IN_WORDS, NOT_THE_ANSWER, "Nothing was recorded; the run stays at step interview. Call step_done")
        assert "the user was not asked" not in bad.text and "a value that fits" not in bad.text, bad.text
        shown = await model.call("show_step", {})
        facts = shown.text.split("The facts confirmed in this run so far: ")[1].splitlines()[0]
        assert '"options"' not in facts and '"objective"' in facts, shown.text
        # the tools and the plugin's skill say the shape before any call (before: "field name -> value" only)
        served = {t.name: t.input_schema for t in (await model.client.list_tools()).tools}
        for tool in ("start_run", "step_done"):
            said = served[tool]["properties"]["facts"]["description"]
            assert 'a list field as a JSON array of texts, e.g. ["A", "B"]; a date as YYYY-MM-DD' in said, said
        skill = " ".join(SKILL.read_text("utf-8").split())
        assert "a list field (options, success criteria, constraints, stakeholders) as a JSON list" in skill
        assert "a fact of another shape is refused before the user is asked" in skill

    drive(world, tmp_path, script)


def test_a_migration_preview_says_the_confirmed_facts_carry_over(world: ServerWorld, tmp_path: Path) -> None:
    async def script(model: Any) -> None:
        at_question = await model.follow(await model.start(), "", until_question=True)
        assert not at_question.is_error, at_question.text
        preview = await model.call("migrate_run", {"confirm": False, "facts": {"risk_tolerance": "medium"}})
        # before: only "Steps walked again: setup-workspace (...), interview, confirm-contract, select-route."
        assert "Steps walked again:" in preview.text, preview.text
        line = "The facts confirmed so far carry over, not asked for again at the steps walked again: "
        kept = preview.text.split(line)[1].split(".\n")[0].rstrip(".").split(", ")
        assert {"objective", "decision_owner", "options", "success_criteria"} <= set(kept), preview.text

    drive(world, tmp_path, script)
