"""A fact the person confirmed in a form for a migration that did not happen is not put to them again on its retry.

The real ``rimthan-host serve`` over stdio (its verifier its child, serving research-decision 1.3.0 with 1.3.1 as
the migration target, both built by the real packager and signed with a real key), a real SDK client whose
elicitation callback plays the person and counts the forms put to them. Before, ``migrate_run`` held nothing: a
migration refused because the person declined one fact (or the migration itself) asked every fact again on the
model's retry, those they had just confirmed too. Held as elsewhere (:mod:`rimthan_host.held_facts`): the same
field with the same value, for the same run at the same checkpoint migrating to the same release, in the same
bridge process; a new bridge process asks each again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import StdioServerParameters, types
from rimthan_host.confirmations import BY_ELICITATION
from rimthan_host.runlog import RunLog
from rimthan_host.standin import StandIn
from support.bridge import BIN, as_shown, check_replies
from support.checked_client import CheckedClient
from support.processes import serve_options
from support.releases import KeyPair, build_release, make_keypair, packaged_source, trust_dir

OLD, NEW = "1.3.0", "1.3.1"
TARGET = f"research-decision@{NEW}"
EXAMPLE = json.loads((packaged_source(NEW) / "examples" / "confirmed-state.json").read_text("utf-8"))
FIRST = {k: EXAMPLE[k] for k in ("objective", "decision_owner", "risk_tolerance")}
# What the 1.3.1 interview moves on with, passed with the migration (the person confirms each in its own form).
FACTS = {k: EXAMPLE[k] for k in ("options", "success_criteria", "deadline")}
MIGRATE = "migrate"  # what the person notes for the question to migrate the run itself


class Person:
    """The user: notes each form put to them (a fact's field, or ``migrate``), says ``says`` to the form ``refuses``
    names, and accepts every other as shown."""

    def __init__(self) -> None:
        self.refuses, self.says = "", "decline"
        self.asked: list[str] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        properties: dict[str, Any] = params.requested_schema["properties"]
        form = MIGRATE if params.message.endswith("Migrate this run now?") else params.message.split()[1]
        self.asked.append(form)
        if form == self.refuses:
            return types.ElicitResult(action=self.says)  # type: ignore[arg-type]
        return types.ElicitResult(action="accept", content=as_shown(properties))


@pytest.fixture(scope="module")
def releases(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """research-decision 1.3.0 and 1.3.1, built and signed, and the trust directory naming their key."""
    root = tmp_path_factory.mktemp("migrate-held")
    key: KeyPair = make_keypair(root / "keys", "release-engineer")
    built = [build_release(packaged_source(v), root / "built", [key]) for v in (OLD, NEW)]
    return built[0], built[1], trust_dir(root / "trust", key)


def _params(releases: tuple[Path, Path, Path], project: Path, state: Path) -> StdioServerParameters:
    old, new, trust = releases
    verifier = serve_options(old, trust, state, log_level="warning", migration_target=new)
    return StdioServerParameters(command=str(BIN / "rimthan-host"), args=["serve", "--project", str(project), "--",
                                                                           *verifier])  # fmt: skip


def _drive(params: StdioServerParameters, project: Path, person: Person, mode: str, script: Any) -> None:
    """``script`` drives the bridge ``params`` start, its client eliciting in ``mode``; every reply checked."""

    async def go() -> None:
        async with CheckedClient(params, mode=mode, elicitation_callback=person) as client:
            model = StandIn(client, project, {OLD: packaged_source(OLD) / "examples"}, version=OLD)
            await script(model)
            check_replies(model)

    anyio.run(go)


async def _at_interview(model: StandIn, person: Person) -> str:
    """A 1.3.0 run started and at its interview, 1.3.1 offered; the forms noted so far forgotten. Its id."""
    started = await model.call("start_run", {"workflow": "research", "facts": FIRST})
    assert started.data["step"]["id"] == "interview", started.text
    assert started.data["migration"]["to_release"] == TARGET, started.text
    person.asked = []
    return str(started.data["run"])


def _saved(project: Path, run: str) -> dict[str, Any]:
    state: dict[str, Any] = RunLog(project, run).load_state()
    return state


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_a_migration_declined_for_one_fact_asks_only_that_fact_on_the_retry(
    releases: tuple[Path, Path, Path], tmp_path: Path, mode: str
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    person = Person()
    migrate = {"confirm": True, "facts": FACTS}

    async def script(model: StandIn) -> None:
        run = await _at_interview(model, person)
        person.refuses = "success_criteria"
        declined = await model.call("migrate_run", migrate)
        assert declined.is_error and declined.data["user"] == "decline", declined.text
        # (a 2025-11-25 client is asked one form at a time, up to the no; a 2026-07-28 one every form at once)
        held = ["options"] if mode == "legacy" else ["options", "deadline"]
        assert [f for f in person.asked if f != MIGRATE] == (held[:1] + ["success_criteria"] + held[1:]), person.asked
        assert _saved(project, run)["release"]["id"] == f"research-decision@{OLD}"

        person.refuses, person.asked = "", []
        moved = await model.call("migrate_run", migrate)
        assert not moved.is_error and f"Migrated run {run} to {TARGET}" in moved.text, moved.text
        # before: every fact asked again (options, success_criteria, deadline and the migration: four forms)
        assert sorted(person.asked) == sorted({*FACTS, MIGRATE} - set(held)), person.asked
        said = f"Already confirmed by the user: {', '.join(held)}; call migrate_run again with the same value"
        assert said in declined.text and "\nnext: " in declined.text, declined.text
        assert declined.text.index(said) < declined.text.index("\nnext: "), declined.text
        said = f"Already confirmed by the user: {', '.join(held)} (the same value, confirmed in a form for this "
        assert said + "migrate_run); the user was not asked again." in moved.text, moved.text
        confirmed = _saved(project, run)["confirmed_state"]
        assert {k: confirmed["state"][k] for k in FACTS} == FACTS
        assert {confirmed["confirmations"][k]["confirmed_by"] for k in FACTS} == {BY_ELICITATION}

    _drive(_params(releases, project, tmp_path / "state"), project, person, mode, script)


def test_facts_confirmed_for_a_migration_declined_are_held_for_that_move_and_process_only(
    releases: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """The person confirms every fact and says no to the migration: the retry asks only the migration. Another
    value is asked; a new bridge process holds nothing."""
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()
    person = Person()
    params = _params(releases, project, state)
    changed = {**FACTS, "deadline": "2026-04-30"}

    async def first(model: StandIn) -> None:
        await _at_interview(model, person)
        person.refuses, person.says = MIGRATE, "cancel"
        cancelled = await model.call("migrate_run", {"confirm": True, "facts": FACTS})
        assert cancelled.is_error and cancelled.data["user"] == "cancel", cancelled.text
        assert person.asked == [*FACTS, MIGRATE], person.asked
        said = f"Already confirmed by the user: {', '.join(FACTS)}; call migrate_run again with the same value"
        assert said in cancelled.text, cancelled.text

        person.asked = []  # before: the three facts again
        again = await model.call("migrate_run", {"confirm": True, "facts": changed})
        assert again.is_error and person.asked == ["deadline", MIGRATE], person.asked

    async def restarted(model: StandIn) -> None:  # the same run, picked up by a new bridge process
        person.refuses, person.asked = "", []
        moved = await model.call("migrate_run", {"confirm": True, "facts": changed})
        assert not moved.is_error and "Migrated run" in moved.text, moved.text
        assert person.asked == [*changed, MIGRATE], person.asked
        assert "Already confirmed by the user" not in moved.text, moved.text

    _drive(params, project, person, "legacy", first)
    _drive(params, project, person, "legacy", restarted)


class FillsDeadline(Person):
    """The user: fills in ``deadline`` as ``fills`` (a value of the form's kind the release's schema refuses)."""

    fills = "31 March 2026"

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        if params.message.split()[1] == "deadline" and self.fills:
            self.asked.append("deadline")
            return types.ElicitResult(action="accept", content={"value": self.fills})
        return await super().__call__(context, params)


def test_facts_confirmed_for_a_migration_the_verifier_refused_are_held_for_its_retry(
    releases: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """The person fills in a deadline the release's schema refuses: the verifier refuses the migration, and the
    retry with a deadline that fits asks only for it (and the migration)."""
    project = tmp_path / "project"
    project.mkdir()
    person = FillsDeadline()

    async def script(model: StandIn) -> None:
        run = await _at_interview(model, person)
        refused = await model.call("migrate_run", {"confirm": True, "facts": FACTS})
        assert refused.data == {"status": "refused", "refused": "confirmed_state_invalid"}, refused.text
        assert refused.text.startswith("The verifier refused the migration: confirmed_state_invalid"), refused.text
        assert person.asked == [*FACTS, MIGRATE], person.asked
        person.fills, person.asked = "", []
        moved = await model.call("migrate_run", {"confirm": True, "facts": FACTS})
        assert not moved.is_error and f"Migrated run {run} to {TARGET}" in moved.text, moved.text
        assert person.asked == ["deadline", MIGRATE], person.asked  # before: every fact again
        chose = f"The user chose deadline = 31 March 2026 (you passed {FACTS['deadline']})."
        said = f"Already confirmed by the user: {', '.join(FACTS)}; call migrate_run again with the same value"
        assert chose in refused.text and said in refused.text, refused.text  # (deadline held as the user filled it)
        assert _saved(project, run)["confirmed_state"]["state"]["deadline"] == FACTS["deadline"]

    _drive(_params(releases, project, tmp_path / "state"), project, person, "legacy", script)
