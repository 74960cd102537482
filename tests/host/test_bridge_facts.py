"""Facts confirmed mid-run: the interview asks the model to confirm options, criteria and a deadline with the user.

The real ``rimthan-host serve`` over stdio (its real verifier as its child).
``step_done`` takes them in ``facts``; the bridge records each as confirmed,
with a fresh confirmation, and the verifier checks them against the
workflow's schema: a value it refuses is named in words, nothing recorded,
the run still at its step. Before, no tool took facts after ``start_run``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rimthan_host.confirmations import BY_MODEL
from rimthan_host.runlog import RunLog
from rimthan_host.standin import StandIn
from rimthan_host.words import BRIDGE_NOTE
from support.bridge import audited_only_run, drive, example_text, refused
from support.servers import ServerWorld, build_world


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("facts-world"))


def test_facts_confirmed_in_the_interview_go_in_with_step_done(world: ServerWorld, tmp_path: Path) -> None:
    example = json.loads(example_text("1.2.0", "confirmed-state.json"))
    first = {k: example[k] for k in ("objective", "decision_owner")}
    later = {k: v for k, v in example.items() if k not in first}

    async def script(model: StandIn) -> None:
        started = await model.start(first)
        run = started.data["run"]
        log = RunLog(model.project, run)
        assert started.data["step"]["id"] == "interview" and BRIDGE_NOTE in started.text, started.text
        vague = await model.call("step_done", {"step": "interview", "facts": {**later, "deadline": "next spring"}})
        refused(vague, "deadline takes a date written YYYY-MM-DD (e.g. 2027-03-31), and you passed next spring: if "
                "the user named a day, pass it written that way; if not, ask them for the day")  # fmt: skip
        assert vague.data["status"] == "facts_refused", vague.data  # (a date's form: checked before the verifier)
        wrong = await model.call("step_done", {"step": "interview", "facts": {**later, "options": ["Only one"]}})
        refused(wrong, "Nothing was recorded: the verifier refused the facts", "options",
                "the run stays at step interview", "call step_done again with every fact in facts")  # fmt: skip
        assert wrong.data["status"] == "facts_refused", wrong.data
        assert "deadline" not in log.load_state()["confirmed_state"]["state"]
        assert "Ask the user for a value that fits" in wrong.text  # a value: the user's to change
        assert "the confirmed state with these facts does not satisfy" in wrong.text, wrong.text
        assert "next_confirmed_state" not in wrong.text  # the verifier's argument, which the model never passes
        misnamed = await model.call("step_done", {"step": "interview", "facts": {**later, "dead line": "2026-03-31"}})
        refused(misnamed, "'dead line' was unexpected", "A fact's name is not a field of this workflow",
                "exactly as the step's instructions spell its field")  # fmt: skip
        assert "Ask the user for a value" not in misnamed.text  # a name: the model's to fix
        assert (await model.call("show_step")).data["step"]["id"] == "interview"
        done = await model.call("step_done", {"step": "interview", "facts": later})
        assert done.data["step"]["id"] == "confirm-contract", done.text  # recorded and moved on: one move
        assert "Recorded options, success_criteria, deadline, constraints as confirmed" in done.text, done.text
        confirmed = log.load_state()["confirmed_state"]
        assert confirmed["state"] == example
        assert {confirmed["confirmations"][k]["confirmed_by"] for k in later} == {BY_MODEL}
        assert (await model.follow(done, "desk-research")).data["status"] == "completed"

    model, state = drive(world, tmp_path, script)
    assert audited_only_run(model.project, state)["steps"][-1] == "desk-research"


def test_a_refused_fact_is_quoted_as_the_user_gave_it(world: ServerWorld, tmp_path: Path) -> None:
    """The refusal is built from the verifier's parts (pointer, problem), said of "the confirmed state with these
    facts". Before, the verifier's message had its argument's name replaced wherever it stood: a value naming it
    was quoted back to the user changed."""
    example = json.loads(example_text("1.2.0", "confirmed-state.json"))
    first = {k: example[k] for k in ("objective", "decision_owner")}
    later = {k: v for k, v in example.items() if k not in first}

    async def script(model: StandIn) -> None:
        await model.start(first)
        value = "next_confirmed_state by spring"
        wrong = await model.call("step_done", {"step": "interview", "facts": {**later, "options": [value]}})
        refused(wrong, "(confirmed_state_invalid: the confirmed state with these facts does not satisfy the "
                f"workflow's confirmed-state schema at /options: ['{value}'] is too short)")  # fmt: skip
        assert wrong.data["status"] == "facts_refused", wrong.data

    drive(world, tmp_path, script)
