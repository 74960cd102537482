"""Clauses of the four-tool protocol text that no other test pinned down.

Each test here was written against a check whose removal left every other
protocol test green; each drives the real engine over real signed releases.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rimthan_workflow_registry.errors import CatalogueError, FailureCode, TokenError, WorkflowProtocolError
from rimthan_workflow_registry.run.artifact_checks import check_input_bindings
from rimthan_workflow_registry.run.token_wire import peek_claims
from support.engines import Engines, TickingClock, WireEngine, engine_for, example_state, examples, make_engines
from support.releases import packaged_source


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory) -> Engines:
    return make_engines(tmp_path_factory.mktemp("clauses"), TickingClock())


def test_migration_target_of_another_scope_is_refused_by_the_engine(engines: Engines, tmp_path: Path) -> None:
    """ "target release must match the verified target scope": a newer research-decision published under
    another scope is refused even when the request names it exactly."""
    source = tmp_path / "foreign"
    shutil.copytree(packaged_source("1.3.0"), source)
    catalogue = source / "catalogue.toml"
    text = catalogue.read_text("utf-8")
    assert 'name = "rimthan.research"' in text
    catalogue.write_text(text.replace('name = "rimthan.research"', 'name = "someone.else"'), "utf-8")
    foreign = engine_for(source, tmp_path, engines)
    engine, harness = engines.wire("1.2.0"), engines.harness("foreign-scope")
    state = harness.confirm(example_state("1.2.0"))
    started = engine.start_workflow({"workflow": "research", "confirmed_state": state, "host": harness.host()})
    engines.clock.tick()
    target_state = harness.confirm({**example_state("1.2.0"), "risk_tolerance": "medium"})
    request: dict[str, Any] = {
        "target_release": foreign.module.release.release_id,
        "confirmed_state": target_state,
        "confirm": True,
    }
    with pytest.raises(WorkflowProtocolError) as err:
        engine.migrate_workflow(
            foreign.module, {"checkpoint": started["checkpoint"], "confirmed_state": state, "migration": request}
        )
    assert err.value.code is FailureCode.MIGRATION_SCOPE_MISMATCH
    assert "someone.else" in err.value.message or "not in the scope" in err.value.message


def _prepared_setup(engines: Engines, name: str) -> tuple[WireEngine, Any, dict[str, Any], str, dict[str, Any]]:
    """A run started and its setup-workspace prepared: (engine, kit, state, checkpoint, prepare result)."""
    engine, harness = engines.wire("1.2.0"), engines.harness(name)
    state = harness.confirm(example_state("1.2.0"))
    started = engine.start_workflow({"workflow": "research", "confirmed_state": state, "host": harness.host()})
    cp = started["checkpoint"]
    artifacts = harness.deliver_workspace(started["step"])
    ready = engine.prepare_step_validation(
        {"checkpoint": cp, "confirmed_state": state, "host": harness.host(), "artifacts": artifacts}
    )
    assert ready["status"] == "ready_for_semantic_validation"
    return engine, harness, state, cp, ready


def test_a_validation_bundle_is_refused_with_any_checkpoint_but_its_own(engines: Engines) -> None:
    """ "verifies ... HMAC-signed bundle payload" for *this* checkpoint: a bundle prepared on one checkpoint
    cannot be submitted with a later checkpoint of the same step (here: reissued by a confirmed state change)."""
    engine, harness, state, first, ready = _prepared_setup(engines, "bundle-replay")
    engines.clock.tick()
    changed = harness.confirm({**example_state("1.2.0"), "objective": "A sharper question?"}, previous=state)
    moved = engine.continue_workflow({"checkpoint": first, "confirmed_state": state, "next_confirmed_state": changed})
    later = moved["checkpoint"]
    assert (moved["status"], moved["step"]["id"]) == ("active", "setup-workspace") and later != first
    with pytest.raises(TokenError) as err:
        engine.submit_step_validation(
            {
                "checkpoint": later,
                "confirmed_state": changed,
                "validation_bundle": ready["validation_bundle"],
                "reports": [],
            }
        )
    assert err.value.code is FailureCode.VALIDATION_BUNDLE_INVALID
    # the bundle still serves the checkpoint it was prepared on
    advanced = engine.submit_step_validation(
        {"checkpoint": first, "confirmed_state": state, "validation_bundle": ready["validation_bundle"], "reports": []}
    )
    assert advanced["status"] == "advanced"


def _reach_desk_research(engine: WireEngine, harness: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Start a run routed to desk-research, pass setup and the ungated steps: (state, the result showing it)."""
    state = harness.confirm({**example_state("1.2.0"), "research_route": "desk-research"})
    started = engine.start_workflow({"workflow": "research", "confirmed_state": state, "host": harness.host()})
    moved = harness.pass_setup(engine, started, state)
    while moved["step"]["id"] != "desk-research":
        moved = engine.continue_workflow({"checkpoint": moved["checkpoint"], "confirmed_state": state})
        assert moved["status"] == "active", moved
    return state, moved


def _at_desk_research(engines: Engines, name: str) -> tuple[WireEngine, Any, dict[str, Any], str, dict[str, Any]]:
    """A run at gated desk-research, its outputs prepared: (engine, kit, state, cp, ready)."""
    engine, harness = engines.wire("1.2.0"), engines.harness(name)
    state, moved = _reach_desk_research(engine, harness)
    cp = moved["checkpoint"]
    outputs = harness.write_outputs(moved["step"], examples("1.2.0"))
    ready = engine.prepare_step_validation(
        {"checkpoint": cp, "confirmed_state": state, "host": harness.host(), "artifacts": outputs}
    )
    assert ready["status"] == "ready_for_semantic_validation"
    return engine, harness, state, cp, ready


def _desk_research_reading(artifact_id: str, engines: Engines, root: Path) -> WireEngine:
    """An engine over research-decision 1.2.0 whose desk-research step declares ``artifact_id`` as its input."""
    source = root / "reads"
    shutil.copytree(packaged_source("1.2.0"), source)
    workflow = source / "workflows" / "research-decision.toml"
    text = workflow.read_text("utf-8")
    declared = 'id = "desk-research"\ntitle = "Desk research"\ninstruction = "assets/instructions/desk-research.md"\n'
    assert declared + "inputs = []\n" in text
    workflow.write_text(text.replace(declared + "inputs = []\n", f"{declared}inputs = [{artifact_id!r}]\n"), "utf-8")
    return engine_for(source, root, engines)


def test_a_step_input_must_be_bound_once_to_the_digest_its_receipt_records(engines: Engines, tmp_path: Path) -> None:
    """ "prior artifact digest bindings for step inputs": desk-research made to read the workspace manifest must
    bind it, once, to the digest of the setup step's receipt."""
    engine, harness = _desk_research_reading("workspace-manifest", engines, tmp_path), engines.harness("inputs")
    state, moved = _reach_desk_research(engine, harness)
    receipts = peek_claims(moved["checkpoint"])
    assert receipts is not None and receipts["artifacts"]["names"][-1] == "workspace-manifest"
    recorded = receipts["artifacts"]["sha256"][-64:]
    outputs = harness.write_outputs(moved["step"], examples("1.2.0"))

    def prepare(inputs: list[dict[str, str]]) -> dict[str, Any]:
        return engine.prepare_step_validation(
            {
                "checkpoint": moved["checkpoint"],
                "confirmed_state": state,
                "host": harness.host(),
                "artifacts": outputs,
                "inputs": inputs,
            }
        )

    bound = {"artifact_id": "workspace-manifest", "sha256": recorded}
    for wrong in ([], [{**bound, "sha256": "0" * 64}], [bound, bound]):
        failed = prepare(wrong)
        assert failed["status"] == "deterministic_validation_failed", wrong
        assert [f["code"] for f in failed["failures"]] == ["input_binding_mismatch"], failed["failures"]
    assert prepare([bound])["status"] == "ready_for_semantic_validation"


def _another_instruction(report: dict[str, Any]) -> dict[str, Any]:
    return dict(report, instruction_digest="sha256:" + "e" * 64)


def _another_adapter_version(report: dict[str, Any]) -> dict[str, Any]:
    return dict(report, validated_by={**report["validated_by"], "adapter_version": "9.9.9"})


@pytest.mark.parametrize(
    ("edit", "code", "words"),
    [
        # "new reports must match instruction digest": a validator run from an edited or older instruction is stale
        (_another_instruction, FailureCode.REPORT_STALE, "another instruction"),
        # "validated_by.harness and adapter version must match the checkpoint host binding": the right harness
        # running another adapter version is a host mismatch too
        (_another_adapter_version, FailureCode.REPORT_HOST_MISMATCH, "the run is bound to"),
    ],
    ids=["instruction", "adapter-version"],
)
def test_a_report_not_bound_to_the_bundle_and_host_is_refused(
    engines: Engines, edit: Callable[[dict[str, Any]], dict[str, Any]], code: FailureCode, words: str
) -> None:
    engine, harness, state, cp, ready = _at_desk_research(engines, f"report-{code.value}")
    reports = harness.reports(ready)
    edited = [edit(reports[0]), *reports[1:]]
    with pytest.raises(WorkflowProtocolError) as err:
        engine.submit_step_validation(
            {
                "checkpoint": cp,
                "confirmed_state": state,
                "validation_bundle": ready["validation_bundle"],
                "reports": edited,
            }
        )
    assert err.value.code is code and words in err.value.message


def test_a_validator_that_fails_loses_its_earlier_pass_receipt(engines: Engines) -> None:
    """A validator receipt records a pass: once a validator fails, the checkpoint no longer holds its pass on
    earlier bytes (a revert to those bytes re-runs it rather than reusing a superseded verdict)."""
    engine, harness, state, cp, ready = _at_desk_research(engines, "superseded")

    def submit(at: str, prepared: dict[str, Any], verdicts: dict[str, str]) -> dict[str, Any]:
        return engine.submit_step_validation(
            {
                "checkpoint": at,
                "confirmed_state": state,
                "validation_bundle": prepared["validation_bundle"],
                "reports": harness.reports(prepared, verdicts),
            }
        )

    first = submit(cp, ready, {"evidence-auditor@1.0.0": "fail"})
    assert first["status"] == "validation_failed"
    claims = peek_claims(first["checkpoint"])
    assert claims is not None and claims["validators"]["names"] == ["decision-critic@1.0.0"]

    def edited(artifact_id: str, media_type: str) -> str:
        return examples("1.2.0")(artifact_id, media_type) + ("\nMore evidence.\n" if artifact_id == "findings" else "")

    repaired = harness.write_outputs(first["step"], edited)
    again = engine.prepare_step_validation(
        {"checkpoint": first["checkpoint"], "confirmed_state": state, "host": harness.host(), "artifacts": repaired}
    )
    assert sorted(v["validator_id"] for v in again["validators"]) == ["decision-critic", "evidence-auditor"]
    second = submit(first["checkpoint"], again, {"decision-critic@1.0.0": "fail"})
    assert second["status"] == "validation_failed"
    claims = peek_claims(second["checkpoint"])
    assert claims is not None and claims["validators"]["names"] == ["evidence-auditor@1.0.0"]


def test_a_bundle_token_is_never_taken_for_a_checkpoint_nor_the_other_way(engines: Engines) -> None:
    """Both token kinds are signed with the same checkpoint keys: each is refused by its type where the other
    is expected, before any of its claims are read."""
    engine, _harness, state, cp, ready = _prepared_setup(engines, "token-kinds")
    bundle = ready["validation_bundle"]
    with pytest.raises(TokenError) as err:
        engine.continue_workflow({"checkpoint": bundle["validation_token"], "confirmed_state": state})
    assert err.value.code is FailureCode.CHECKPOINT_INVALID
    assert "not a checkpoint token" in err.value.message
    with pytest.raises(TokenError) as err:
        engine.submit_step_validation(
            {
                "checkpoint": cp,
                "confirmed_state": state,
                "validation_bundle": {**bundle, "validation_token": cp},
                "reports": [],
            }
        )
    assert err.value.code is FailureCode.VALIDATION_BUNDLE_INVALID
    assert "not a validation bundle token" in err.value.message


def test_an_input_the_run_never_produced_is_refused_at_build_and_still_fails_prepare(
    engines: Engines, tmp_path: Path
) -> None:
    """An input produced only on another route would have no receipt on this one, so no run on it could pass
    the step: the catalogue rules refuse that shape at build and load (no engine ever serves it), and prepare
    still fails closed, whatever digest the client binds, on a real checkpoint that holds no receipt for it."""
    with pytest.raises(CatalogueError) as refused:
        _desk_research_reading("experiment-results", engines, tmp_path)
    assert refused.value.code is FailureCode.TERMINAL_UNREACHABLE
    assert "step desk-research reads artifact 'experiment-results'" in refused.value.message

    engine, harness = engines.wire("1.2.0"), engines.harness("no-receipt")
    state, moved = _reach_desk_research(engine, harness)
    issued, workflow, _ = engine.module.resume({"checkpoint": moved["checkpoint"], "confirmed_state": state})
    desk = workflow.step("desk-research")
    assert desk is not None
    reading = dataclasses.replace(desk, inputs=("experiment-results",))
    bound = [{"artifact_id": "experiment-results", "sha256": "0" * 64}]
    failed = check_input_bindings(reading, issued.checkpoint, bound)
    assert [(f.code, f.artifact_id) for f in failed] == [(FailureCode.INPUT_BINDING_MISMATCH, "experiment-results")]
    assert "no receipt" in failed[0].message
