"""A change to the confirmed state is taken only with a contemporaneous confirmation.

Contemporaneous means given at or after the checkpoint the change continues
from and not after the server's clock: a removed field needs one (naming the
digest of null, ``REMOVAL_DIGEST``), an old or invented one is refused, and a
confirmation dated in the future, which would be fresh for every later
checkpoint, is refused wherever it appears. Each refusal of a change is
``blocked`` / ``confirmation_required`` on the same checkpoint.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from rimthan_host.confirmations import ConfirmedStateBook
from rimthan_workflow_registry.canonical import digest_value
from rimthan_workflow_registry.errors import FailureCode, WorkflowProtocolError
from rimthan_workflow_registry.limits import CLOCK_SKEW_SECONDS
from rimthan_workflow_registry.run.confirmed_state import REMOVAL_DIGEST
from rimthan_workflow_registry.run.token_wire import peek_claims
from support.engines import Engines, StepKit, TickingClock, WireEngine, example_state, make_engines

FAR_FUTURE = 253402300799  # the schema's largest confirmed_at (9999-12-31T23:59:59Z)


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory) -> Engines:
    return make_engines(tmp_path_factory.mktemp("freshness"), TickingClock())


def _at_route_question(engines: Engines, name: str) -> tuple[WireEngine, StepKit, dict[str, Any], str]:
    """A run past setup, interview and confirm-contract, asked for its route: engine, kit, state, checkpoint."""
    engine, kit = engines.wire("1.2.0"), engines.harness(name)
    state = kit.confirm(example_state("1.2.0"))
    started = engine.start_workflow({"workflow": "research", "confirmed_state": state, "host": kit.host()})
    checkpoint = kit.pass_setup(engine, started, state)["checkpoint"]
    engines.clock.tick(10)
    for _ in range(3):
        result = engine.continue_workflow({"checkpoint": checkpoint, "confirmed_state": state})
        checkpoint = result["checkpoint"]
    assert result["status"] == "input_required", result
    engines.clock.tick(5)
    return engine, kit, state, checkpoint


def _propose(engine: WireEngine, checkpoint: str, state: dict[str, Any], proposed: dict[str, Any]) -> dict[str, Any]:
    arguments = {"checkpoint": checkpoint, "confirmed_state": state, "next_confirmed_state": proposed}
    return engine.continue_workflow(arguments)


def _claim(checkpoint: str, name: str) -> Any:
    claims = peek_claims(checkpoint)
    assert claims is not None
    return claims[name]


def _refused(result: dict[str, Any], checkpoint: str, field: str) -> bool:
    """``blocked`` on the same checkpoint with exactly one ``confirmation_required`` for ``field``."""
    failures = [(f["code"], f["pointer"]) for f in result["failures"]]
    return (
        result["status"] == "blocked"
        and result["checkpoint"] == checkpoint
        and failures == [("confirmation_required", f"/{field}")]
    )


def _without(state: dict[str, Any], field: str, confirmation: dict[str, Any] | None) -> dict[str, Any]:
    """``state`` with ``field`` removed, its confirmation replaced by ``confirmation`` (or dropped for ``None``)."""
    proposed = copy.deepcopy(state)
    del proposed["state"][field]
    del proposed["confirmations"][field]
    if confirmation is not None:
        proposed["confirmations"][field] = confirmation
    return proposed


def test_removing_a_field_needs_a_contemporaneous_confirmation_of_the_removal(engines: Engines) -> None:
    engine, _, state, checkpoint = _at_route_question(engines, "remove")
    now, old = int(engines.clock()), state["confirmations"]["constraints"]
    assert old["confirmed_at"] < _claim(checkpoint, "iat")
    not_a_removal = [
        old,  # the field's own confirmation, from before the checkpoint
        {"value_digest": "sha256:" + "0" * 64, "confirmed_at": 0},  # an invented one
        None,  # none at all
        {**old, "confirmed_at": now},  # fresh, but for the value removed
        {"value_digest": REMOVAL_DIGEST, "confirmed_at": _claim(checkpoint, "iat") - 1},
        {"value_digest": REMOVAL_DIGEST, "confirmed_at": now + CLOCK_SKEW_SECONDS + 1},  # past the server's clock
    ]
    for confirmation in not_a_removal:
        result = _propose(engine, checkpoint, state, _without(state, "constraints", confirmation))
        assert _refused(result, checkpoint, "constraints"), (confirmation, result)
        assert result["failures"][0]["details"] == {"value_digest": REMOVAL_DIGEST}
    book = ConfirmedStateBook.from_projection(state, clock=engines.clock)
    book.remove("constraints")
    moved = _propose(engine, checkpoint, state, book.projection())
    assert moved["status"] == "input_required" and moved["checkpoint"] != checkpoint, moved
    assert _claim(moved["checkpoint"], "state") == digest_value(book.values)
    assert digest_value(None) == REMOVAL_DIGEST
    next_call = engine.continue_workflow({"checkpoint": moved["checkpoint"], "confirmed_state": book.projection()})
    assert next_call["status"] == "input_required", next_call


def test_a_confirmation_dated_after_the_servers_clock_is_not_contemporaneous(engines: Engines) -> None:
    engine, kit, state, checkpoint = _at_route_question(engines, "future")
    now = int(engines.clock())
    for future in (now + CLOCK_SKEW_SECONDS + 1, FAR_FUTURE):
        proposed = kit.confirm({**state["state"], "deadline": "2026-06-30"}, previous=state, at=future)
        assert _refused(_propose(engine, checkpoint, state, proposed), checkpoint, "deadline")
    on_time = kit.confirm({**state["state"], "deadline": "2026-06-30"}, previous=state, at=now)
    assert _propose(engine, checkpoint, state, on_time)["status"] == "input_required"


def test_a_future_dated_yes_cannot_be_replayed_to_revert_a_value(engines: Engines) -> None:
    """The replay the rule closes: a far-future "yes" for A, a later change to B, then A again with that "yes"."""
    engine, kit, state, checkpoint = _at_route_question(engines, "replay")
    forever = kit.confirm({**state["state"], "deadline": "2026-06-30"}, previous=state, at=FAR_FUTURE)
    assert _refused(_propose(engine, checkpoint, state, forever), checkpoint, "deadline")
    engines.clock.tick(10)
    later = kit.confirm({**state["state"], "deadline": "2026-09-30"}, previous=state)
    moved = _propose(engine, checkpoint, state, later)
    assert moved["status"] == "input_required", moved
    engines.clock.tick(3600)
    replayed = copy.deepcopy(forever)
    assert _refused(_propose(engine, moved["checkpoint"], later, replayed), moved["checkpoint"], "deadline")


def test_future_dated_confirmations_are_refused_at_start_and_on_every_call(engines: Engines) -> None:
    engine, kit, state, checkpoint = _at_route_question(engines, "every-call")
    ahead = kit.confirm(example_state("1.2.0"), at=int(engines.clock()) + CLOCK_SKEW_SECONDS + 1)
    started = engine.start_workflow({"workflow": "research", "confirmed_state": ahead, "host": kit.host()})
    assert started["status"] == "blocked" and started["checkpoint"] is None
    assert {f["code"] for f in started["failures"]} == {"confirmation_required"}
    sent = copy.deepcopy(state)
    sent["confirmations"]["objective"]["confirmed_at"] = FAR_FUTURE
    with pytest.raises(WorkflowProtocolError) as refused:
        engine.continue_workflow({"checkpoint": checkpoint, "confirmed_state": sent})
    assert refused.value.code is FailureCode.CONFIRMATION_REQUIRED


def test_a_host_clock_a_moment_ahead_is_within_the_leeway(engines: Engines) -> None:
    """Times are whole seconds: a host whose clock rounds up to the server's next second still starts its run."""
    engine, kit, _, _ = _at_route_question(engines, "leeway")
    ahead = kit.confirm(example_state("1.2.0"), at=int(engines.clock()) + CLOCK_SKEW_SECONDS)
    started = engine.start_workflow({"workflow": "research", "confirmed_state": ahead, "host": kit.host()})
    assert started["status"] == "active", started
