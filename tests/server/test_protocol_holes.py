"""Protocol promises the engine must keep even when a client probes for gaps.

Each test drives a real ``WorkflowEngineQueryModule`` over a real signed
release: a gated step revisited by a looping workflow is never advanced by
``continue_workflow`` alone, the workspace manifest's own attestation is
checked, every field of a validation bundle is signed and compared, and every
call re-checks every confirmation.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rimthan_workflow_mcp.workflow_engine import WorkflowEngineQueryModule
from rimthan_workflow_registry.errors import FailureCode, RegistryError
from rimthan_workflow_registry.release.trust import load_trust
from rimthan_workflow_registry.release.verify import verify_release
from rimthan_workflow_registry.run.token_wire import peek_claims
from rimthan_workflow_registry.run.tokens import CheckpointKeyring
from support.engines import StepKit, TickingClock, WireEngine
from support.releases import build_release, make_keypair, resign_release, scaffold_source, trust_dir

LOOP_BRANCHES = """
[[steps]]
id = "plan"
title = "Plan the work"
instruction = "assets/instructions/plan.md"
question = { field = "more", prompt = "Another summary?", choices = [true, false] }

[[steps.branches]]
target = "write-summary"
when = { field = "more", equals = true }

[[steps.branches]]
target = "finish"
when = { field = "more", equals = false }
"""

FINISH = """
[[steps]]
id = "finish"
title = "Finish"
instruction = "assets/instructions/plan.md"
"""

SUMMARY = {"goal": "ship", "outcome": "shipped", "next_steps": ["celebrate"]}


def loop_source(directory: Path) -> Path:
    """The scaffold catalogue, rewired so write-summary (gated) loops back to plan."""
    source = scaffold_source(directory)
    workflow = source / "workflows" / "demo.toml"
    text = workflow.read_text("utf-8")
    plan = (
        '[[steps]]\nid = "plan"\ntitle = "Plan the work"\n'
        'instruction = "assets/instructions/plan.md"\nnext = "write-summary"\n'
    )
    assert plan in text
    text = text.replace(plan, LOOP_BRANCHES.lstrip())
    text = text.replace(
        'validators = [\n    "reviewer@1.0.0",\n]\n', 'validators = [\n    "reviewer@1.0.0",\n]\nnext = "plan"\n'
    )
    text = text.replace('path = "out/summary.json"', 'path = "research/summary.json"')
    workflow.write_text(text + FINISH, "utf-8")
    schema_path = source / "schemas" / "confirmed-state.schema.json"
    schema = json.loads(schema_path.read_text("utf-8"))
    schema["properties"]["more"] = {"type": "boolean"}
    schema_path.write_text(json.dumps(schema, indent=2), "utf-8")
    return source


@pytest.fixture
def looping(tmp_path: Path) -> tuple[WireEngine, StepKit, TickingClock]:
    key = make_keypair(tmp_path / "keys", "loop-signer")
    release = build_release(loop_source(tmp_path / "source"), tmp_path / "releases", [key])
    verified = verify_release(release, load_trust(trust_dir(tmp_path / "trust", key)))
    clock = TickingClock()
    project = tmp_path / "project"
    project.mkdir()
    return (
        WireEngine(WorkflowEngineQueryModule(verified, CheckpointKeyring.generate(), clock=clock)),
        StepKit(project, clock=clock),
        clock,
    )


def _constant(text: str) -> Callable[[str, str], str]:
    """Output content that is ``text`` whatever the output."""
    return lambda _output_id, _media_type: text


def _summary(output_id: str, media_type: str) -> str:
    return json.dumps(SUMMARY)


def _setup(engine: WireEngine, kit: StepKit, state: dict[str, Any]) -> dict[str, Any]:
    started = engine.start_workflow({"workflow": "demo", "confirmed_state": state, "host": kit.host()})
    return kit.pass_setup(engine, started, state)


def _validate(engine: WireEngine, kit: StepKit, state: dict[str, Any], at: dict[str, Any]) -> dict[str, Any]:
    artifacts = kit.write_outputs(at["step"], _summary)
    ready = engine.prepare_step_validation(
        {"checkpoint": at["checkpoint"], "confirmed_state": state, "host": kit.host(), "artifacts": artifacts}
    )
    assert ready["status"] == "ready_for_semantic_validation", ready["failures"]
    return engine.submit_step_validation(
        {
            "checkpoint": at["checkpoint"],
            "confirmed_state": state,
            "validation_bundle": ready["validation_bundle"],
            "reports": kit.reports(ready),
        }
    )


def test_continue_never_advances_a_revisited_gated_step(looping: Any) -> None:
    engine, kit, _clock = looping
    state = kit.confirm({"goal": "ship", "more": True})
    at_plan = _setup(engine, kit, state)
    assert (at_plan["status"], at_plan["step"]["id"]) == ("advanced", "plan")
    first = engine.continue_workflow({"checkpoint": at_plan["checkpoint"], "confirmed_state": state})
    assert (first["status"], first["step"]["id"]) == ("active", "write-summary")
    back = _validate(engine, kit, state, first)
    assert (back["status"], back["step"]["id"]) == ("advanced", "plan")
    second = engine.continue_workflow({"checkpoint": back["checkpoint"], "confirmed_state": state})
    assert (second["status"], second["step"]["id"]) == ("active", "write-summary")
    # entering the step again drops its own receipts from the checkpoint (they belonged to the first visit)
    earned, receipts = peek_claims(back["checkpoint"]), peek_claims(second["checkpoint"])
    assert earned is not None and receipts is not None
    outputs = {o["id"] for o in second["step"]["outputs"]}
    assert outputs and outputs <= set(earned["artifacts"]["names"])
    assert not outputs & set(receipts["artifacts"]["names"]) and receipts["validators"]["names"] == []
    # the first visit's receipts must not carry the second visit past its gate
    for _ in range(2):
        again = engine.continue_workflow({"checkpoint": second["checkpoint"], "confirmed_state": state})
        assert (again["status"], again["step"]["id"]) == ("active", "write-summary")
    # a submit for this visit still advances it
    moved = _validate(engine, kit, state, second)
    assert (moved["status"], moved["step"]["id"]) == ("advanced", "plan")


def test_workspace_manifest_attestation_is_checked_at_setup(looping: Any) -> None:
    engine, kit, _clock = looping
    state = kit.confirm({"goal": "ship", "more": False})
    started = engine.start_workflow({"workflow": "demo", "confirmed_state": state, "host": kit.host()})
    (manifest,) = kit.deliver_workspace(started["step"])
    zero = {**manifest, "attestation": {**manifest["attestation"], "sha256": "0" * 64, "write": "replaced"}}
    bare = {k: v for k, v in manifest.items() if k != "attestation"}
    moved = {**manifest, "attestation": {**manifest["attestation"], "path": "elsewhere.json"}}
    expected = {
        "zero": FailureCode.OUTPUT_ATTESTATION_MISMATCH,
        "bare": FailureCode.OUTPUT_ATTESTATION_REQUIRED,
        "moved": FailureCode.OUTPUT_ATTESTATION_MISMATCH,
    }
    for name, artifact in {"zero": zero, "bare": bare, "moved": moved}.items():
        result = engine.prepare_step_validation(
            {"checkpoint": started["checkpoint"], "confirmed_state": state, "host": kit.host(), "artifacts": [artifact]}
        )
        assert result["status"] == "deterministic_validation_failed", name
        assert expected[name].value in {f["code"] for f in result["failures"]}, name


def test_every_validation_bundle_field_is_signed_and_compared(looping: Any) -> None:
    engine, kit, _clock = looping
    state = kit.confirm({"goal": "ship", "more": False})
    started = engine.start_workflow({"workflow": "demo", "confirmed_state": state, "host": kit.host()})
    artifacts = kit.deliver_workspace(started["step"])
    base = {"checkpoint": started["checkpoint"], "confirmed_state": state}
    ready = engine.prepare_step_validation({**base, "host": kit.host(), "artifacts": artifacts})
    bundle = ready["validation_bundle"]
    for name in bundle:
        if name == "validation_token":
            continue
        edited = {**bundle, name: "ck-0000000000000000" if isinstance(bundle[name], str) else None}
        with pytest.raises(RegistryError) as err:
            engine.submit_step_validation({**base, "validation_bundle": edited, "reports": []})
        assert err.value.code is FailureCode.VALIDATION_BUNDLE_INVALID, name
    extra = {**bundle, "note": "x"}
    with pytest.raises(RegistryError) as err:
        engine.submit_step_validation({**base, "validation_bundle": extra, "reports": []})
    assert err.value.code is FailureCode.VALIDATION_BUNDLE_INVALID
    accepted = engine.submit_step_validation({**base, "validation_bundle": bundle, "reports": []})
    assert accepted["status"] == "advanced"


def _wrong_digest(state: dict[str, Any], field: str) -> dict[str, Any]:
    confirmations = {
        **state["confirmations"],
        field: {**state["confirmations"][field], "value_digest": "sha256:" + "0" * 64},
    }
    return {**state, "confirmations": confirmations}


def test_every_call_checks_every_confirmation(looping: Any) -> None:
    engine, kit, clock = looping
    state = kit.confirm({"goal": "ship", "more": True})
    at_plan = _setup(engine, kit, state)
    clock.tick()
    # an unchanged field whose confirmation names another value, next to a changed one
    changed = kit.confirm({"goal": "ship", "more": False}, previous=state)
    proposed = _wrong_digest(changed, "goal")
    blocked = engine.continue_workflow(
        {"checkpoint": at_plan["checkpoint"], "confirmed_state": state, "next_confirmed_state": proposed}
    )
    assert blocked["status"] == "blocked" and blocked["checkpoint"] == at_plan["checkpoint"]
    assert [f["pointer"] for f in blocked["failures"]] == ["/goal"]
    assert {f["code"] for f in blocked["failures"]} == {"confirmation_required"}
    # the same mistake in the state the checkpoint binds, on every checkpoint-bearing call
    wrong = _wrong_digest(state, "goal")
    calls: dict[str, Callable[[], object]] = {
        "continue": lambda: engine.continue_workflow({"checkpoint": at_plan["checkpoint"], "confirmed_state": wrong}),
        "prepare": lambda: engine.prepare_step_validation(
            {"checkpoint": at_plan["checkpoint"], "confirmed_state": wrong, "host": kit.host(), "artifacts": []}
        ),
    }
    for name, call in calls.items():
        with pytest.raises(RegistryError) as err:
            call()
        assert err.value.code is FailureCode.CONFIRMATION_REQUIRED, name
    # and without a confirmation at all
    dropped = {**state, "confirmations": {"more": state["confirmations"]["more"]}}
    with pytest.raises(RegistryError) as err:
        engine.continue_workflow({"checkpoint": at_plan["checkpoint"], "confirmed_state": dropped})
    assert err.value.code is FailureCode.CONFIRMATION_REQUIRED
    ok = engine.continue_workflow({"checkpoint": at_plan["checkpoint"], "confirmed_state": state})
    assert ok["step"]["id"] == "write-summary"


# --------------------------------------------------------------------------- setup must deliver what validators need


def _without_reviewer_delivery(catalogue: Path) -> None:
    workflow = catalogue / "workflows" / "demo.toml"
    text = workflow.read_text("utf-8")
    old = 'host_assets = [\n    "brief",\n    "reviewer",\n]'
    assert old in text
    workflow.write_text(text.replace(old, "host_assets = []"), "utf-8")


def test_setup_must_deliver_every_subagent_a_validator_names(tmp_path: Path) -> None:
    key = make_keypair(tmp_path / "keys", "signer")
    source = scaffold_source(tmp_path / "source")
    _without_reviewer_delivery(source)
    with pytest.raises(RegistryError) as err:
        build_release(source, tmp_path / "out", [key])
    assert err.value.code is FailureCode.FIRST_STEP_NOT_SETUP
    assert "reviewer" in err.value.message
    # a trusted signer who skipped the packager: refused again at load
    good = build_release(scaffold_source(tmp_path / "good"), tmp_path / "releases", [key])
    resign_release(good, [key], edit=_without_reviewer_delivery)
    with pytest.raises(RegistryError) as err:
        verify_release(good, load_trust(trust_dir(tmp_path / "trust", key)))
    assert err.value.code is FailureCode.FIRST_STEP_NOT_SETUP


def test_the_workspace_manifest_must_list_validator_subagents_and_the_adapter(looping: Any) -> None:
    engine, kit, _clock = looping
    state = kit.confirm({"goal": "ship", "more": False})
    started = engine.start_workflow({"workflow": "demo", "confirmed_state": state, "host": kit.host()})
    (manifest,) = kit.deliver_workspace(started["step"])
    listed = json.loads(manifest["content"])
    for dropped in ("subagent", "adapter"):
        body = {**listed, "delivered": [d for d in listed["delivered"] if d["kind"] != dropped]}
        content = json.dumps(body)
        kit._write(manifest["path"], content)
        artifact = {
            **manifest,
            "content": content,
            "attestation": {
                **manifest["attestation"],
                "sha256": hashlib.sha256(content.encode()).hexdigest(),
                "size": len(content.encode()),
                "write": "replaced",
            },
        }
        result = engine.prepare_step_validation(
            {"checkpoint": started["checkpoint"], "confirmed_state": state, "host": kit.host(), "artifacts": [artifact]}
        )
        assert result["status"] == "deterministic_validation_failed", dropped
        messages = [f["message"] for f in result["failures"] if f["code"] == "workspace_manifest_contract_mismatch"]
        assert any(f"{dropped} asset" in m and "was not delivered" in m for m in messages), (dropped, messages)


# --------------------------------------------------------------------------- JSON Schema formats


def _summary_format(source: Path, fmt: str, example: str | None = None) -> None:
    """``outcome`` of the summary output in format ``fmt``; its worked example's ``outcome`` set to ``example``
    (the build checks the example as prepare would)."""
    path = source / "schemas" / "summary.schema.json"
    schema = json.loads(path.read_text("utf-8"))
    schema["properties"]["outcome"]["format"] = fmt
    path.write_text(json.dumps(schema, indent=2), "utf-8")
    worked = source / "examples" / "summary.json"
    if example is not None and worked.exists():
        worked.write_text(json.dumps({**json.loads(worked.read_text("utf-8")), "outcome": example}), "utf-8")


@pytest.mark.parametrize(
    ("fmt", "bad", "good"),
    [
        ("uri", "not a uri", "https://example.org/outcome"),
        ("date-time", "yesterday", "2026-01-02T03:04:05Z"),
        ("uri-reference", "http://[bad", "../outcome"),
        ("json-pointer", "no-slash", "/outcome/0"),
        ("uri-template", "http://example.org/{unclosed", "http://example.org/{id}"),
        ("duration", "three days", "P3D"),
        ("hostname", "-bad-.example", "example.org"),
    ],
)
def test_every_schema_format_is_enforced_at_prepare(tmp_path: Path, fmt: str, bad: str, good: str) -> None:
    key = make_keypair(tmp_path / "keys", "signer")
    source = loop_source(tmp_path / "source")
    _summary_format(source, fmt, good)
    release = build_release(source, tmp_path / "releases", [key])
    clock = TickingClock()
    engine = WireEngine(
        WorkflowEngineQueryModule(
            verify_release(release, load_trust(trust_dir(tmp_path / "trust", key))),
            CheckpointKeyring.generate(),
            clock=clock,
        )
    )
    (tmp_path / "project").mkdir()
    kit = StepKit(tmp_path / "project", clock=clock)
    state = kit.confirm({"goal": "ship", "more": True})
    at_plan = _setup(engine, kit, state)
    at = engine.continue_workflow({"checkpoint": at_plan["checkpoint"], "confirmed_state": state})
    for outcome, expected in ((bad, "deterministic_validation_failed"), (good, "ready_for_semantic_validation")):
        text = json.dumps({**SUMMARY, "outcome": outcome})
        artifacts = kit.write_outputs(at["step"], _constant(text))
        result = engine.prepare_step_validation(
            {"checkpoint": at["checkpoint"], "confirmed_state": state, "host": kit.host(), "artifacts": artifacts}
        )
        assert result["status"] == expected, (fmt, outcome, result["failures"])
        if expected == "deterministic_validation_failed":
            assert [f["code"] for f in result["failures"]] == ["json_schema_failed"]


@pytest.mark.parametrize("fmt", ["credit-card-number", "iri", "iri-reference"])
def test_a_schema_format_the_server_cannot_check_is_refused_at_build_and_load(tmp_path: Path, fmt: str) -> None:
    key = make_keypair(tmp_path / "keys", "signer")
    source = scaffold_source(tmp_path / "source")
    _summary_format(source, fmt)
    with pytest.raises(RegistryError) as err:
        build_release(source, tmp_path / "out", [key])
    assert err.value.code is FailureCode.SCHEMA_INVALID and f"format(s) {fmt} " in err.value.message
    good = build_release(scaffold_source(tmp_path / "good"), tmp_path / "releases", [key])
    resign_release(good, [key], edit=lambda catalogue: _summary_format(catalogue, fmt))
    with pytest.raises(RegistryError) as err:
        verify_release(good, load_trust(trust_dir(tmp_path / "trust", key)))
    assert err.value.code is FailureCode.SCHEMA_INVALID and f"format(s) {fmt} " in err.value.message
