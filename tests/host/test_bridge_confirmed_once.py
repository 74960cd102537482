"""A fact the person confirmed in a form is not put to them again for the retry of the move that did not happen.

The real ``rimthan-host serve`` over stdio (its verifier its child, serving releases built by the real packager
and signed with a real key), a real SDK client whose elicitation callback plays the person. Before, a start the
person declined one fact of asked every fact again on the model's retry, those they had just confirmed too; and
at research-decision 1.3.1's interview, an options the person confirmed was dropped when success_criteria was
still missing (``confirmed_field_missing``), so the next step_done asked for it again. Only the same field with
the same value (its RFC 8785 bytes), for the same pending start or the same run at the same checkpoint, in the
same bridge process, is kept; anything else is asked.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import StdioServerParameters, types
from rimthan_host.confirmations import BY_ELICITATION
from rimthan_host.held_facts import MOST_BYTES, MOST_FIELDS, HeldFacts
from rimthan_host.runlog import RunLog
from rimthan_host.standin import StandIn
from support.bridge import BIN, as_shown, bridge_params, check_replies, stand_in
from support.checked_client import CheckedClient
from support.processes import serve_options
from support.releases import KeyPair, build_release, make_keypair, packaged_source, trust_dir
from support.servers import ServerWorld, build_world

INTERVIEW = "1.3.1"
EXAMPLE = json.loads((packaged_source(INTERVIEW) / "examples" / "confirmed-state.json").read_text("utf-8"))
FIRST = {k: EXAMPLE[k] for k in ("objective", "decision_owner", "risk_tolerance")}


class Person:
    """The user: notes the field of each fact form put to them, declines the field ``declines`` names, accepts
    every other form as shown (desk-research to the route question)."""

    def __init__(self, declines: str = "") -> None:
        self.declines = declines
        self.asked: list[str] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        properties: dict[str, Any] = params.requested_schema["properties"]
        if "answer" in properties:
            return types.ElicitResult(action="accept", content={"answer": "desk-research"})
        field = params.message.split()[1]
        self.asked.append(field)
        if field == self.declines:
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content=as_shown(properties))


def _run(
    params: StdioServerParameters, project: Path, person: Person, mode: str, script: Any, version: str = ""
) -> None:
    """``script`` drives the bridge ``params`` start, its client eliciting in ``mode``; every reply checked."""

    async def go() -> None:
        async with CheckedClient(params, mode=mode, elicitation_callback=person) as client:
            examples = {version: packaged_source(version) / "examples"}
            model = StandIn(client, project, examples, version=version) if version else stand_in(client, project)
            await script(model)
            check_replies(model)

    anyio.run(go)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The project the bridge serves: an empty folder."""
    (tmp_path / "project").mkdir()
    return tmp_path / "project"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("confirmed-once-world"))


@pytest.fixture(scope="module")
def interview(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("confirmed-once-interview")
    key: KeyPair = make_keypair(root / "keys", "release-engineer")
    return build_release(packaged_source(INTERVIEW), root / "built", [key]), trust_dir(root / "trust", key)


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_a_start_declined_for_one_fact_asks_only_that_fact_on_the_retry(
    world: ServerWorld, tmp_path: Path, project: Path, mode: str
) -> None:
    person = Person(declines="success_criteria")

    async def script(model: StandIn) -> None:
        facts: dict[str, Any] = json.loads((model.examples[model.version] / "confirmed-state.json").read_text())
        declined = await model.call("start_run", {"workflow": "research", "facts": facts})
        assert declined.is_error and declined.data["status"] == "not_started", declined.text
        before = list(facts)[: list(facts).index("success_criteria")]  # (objective, decision_owner, options)
        assert person.asked[: len(before) + 1] == [*before, "success_criteria"], person.asked
        said = "Already confirmed by the user: " + ", ".join(before)
        assert said in declined.text and "\nnext: " in declined.text, declined.text
        assert declined.text.index(said) < declined.text.index("\nnext: "), declined.text

        person.declines, person.asked = "", []
        criteria = facts["success_criteria"][:2]  # (what the user said in the conversation)
        changed = {**facts, "success_criteria": criteria, "deadline": "2026-04-30"}
        started = await model.call("start_run", {"workflow": "research", "facts": changed})
        assert not started.is_error and "Started run" in started.text, started.text
        # before: every fact asked again; now not those confirmed with the same value (in the 2026-07-28 era every
        # form came at once, so the constraints were confirmed too)
        assert not set(before) & set(person.asked), person.asked
        assert {"success_criteria", "deadline"} <= set(person.asked), person.asked
        assert f"Already confirmed by the user: {', '.join(before)}" in started.text, started.text
        assert "the user was not asked again" in started.text, started.text
        saved = RunLog(project, started.data["run"]).load_state()["confirmed_state"]
        assert saved["state"]["success_criteria"] == criteria and saved["state"]["deadline"] == "2026-04-30"
        assert {c["confirmed_by"] for c in saved["confirmations"].values()} == {BY_ELICITATION}

        person.asked = []  # a run started: what was held for its start is gone, a new run's start asks each fact
        again = await model.call("start_run", {"workflow": "research", "facts": changed, "new_run": True})
        assert not again.is_error, again.text
        assert sorted(person.asked) == sorted(changed), person.asked

    _run(bridge_params(project, world, tmp_path / "state"), project, person, mode, script)


def test_an_interview_fact_confirmed_while_another_is_missing_is_not_asked_again(
    interview: tuple[Path, Path], tmp_path: Path, project: Path
) -> None:
    release, trust = interview
    params = StdioServerParameters(
        command=str(BIN / "rimthan-host"),
        args=["serve", "--project", str(project), "--",
              *serve_options(release, trust, tmp_path / "state", log_level="warning")],
    )  # fmt: skip
    person = Person()

    async def script(model: StandIn) -> None:
        started = await model.call("start_run", {"workflow": "research", "facts": FIRST})
        assert started.data["step"]["id"] == "interview", started.text
        person.asked = []
        options = {"options": EXAMPLE["options"]}
        partly = await model.call("step_done", {"step": "interview", "facts": options})
        assert partly.data["failures"] == ["confirmed_field_missing"], partly.text
        assert person.asked == ["options"], person.asked
        assert "Already confirmed by the user: options; call step_done again" in partly.text, partly.text

        other = {"options": EXAMPLE["options"][:2]}  # another value of the field: put to the person again
        person.asked = []
        await model.call("step_done", {"step": "interview", "facts": other})
        assert person.asked == ["options"], person.asked

        person.asked = []  # (the value held is now the two options: the three are another value again)
        both = {"options": EXAMPLE["options"][:2], "success_criteria": EXAMPLE["success_criteria"]}
        done = await model.call("step_done", {"step": "interview", "facts": both})
        assert done.data["step"]["id"] == "confirm-contract", done.text
        assert person.asked == ["success_criteria"], person.asked  # before: ["options", "success_criteria"]
        assert "Already confirmed by the user: options (the same value" in done.text, done.text
        saved = RunLog(project, started.data["run"]).load_state()["confirmed_state"]
        assert saved["state"]["options"] == EXAMPLE["options"][:2]
        assert saved["confirmations"]["options"]["confirmed_by"] == BY_ELICITATION

    _run(params, project, person, "legacy", script, INTERVIEW)


def test_only_the_same_field_value_and_move_is_held_and_within_bounds() -> None:
    held, start = HeldFacts(), ("start", "research")
    held.hold(start, {"deadline": 1, "big": "x" * (MOST_BYTES + 1)})
    assert held.split(start, {"deadline": 1.0, "big": "x" * (MOST_BYTES + 1)}) == (
        {"big": "x" * (MOST_BYTES + 1)},
        {"deadline": 1.0},
    )  # (1 and 1.0: one RFC 8785 value; a value over the bound is asked again)
    assert held.split(start, {"deadline": "1"})[1] == {}  # another value
    assert held.split(("start", "other"), {"deadline": 1})[1] == {}  # another move forgets what was held
    assert held.split(start, {"deadline": 1})[1] == {}
    many = {f"f{n}": n for n in range(MOST_FIELDS + 5)}
    held.hold(start, many)
    assert len(held.split(start, many)[1]) == MOST_FIELDS
    held.forget()
    assert held.split(start, many)[1] == {}
