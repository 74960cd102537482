"""Engine protocol details: selection, confirmations, statuses, failure codes, tokens.

Complements tests/test_workflow_engine.py (the protocol file's named tests)
with one focused test per rule, all against real signed releases.
"""

from __future__ import annotations

import base64
import dataclasses
import inspect
import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from rimthan_workflow_mcp.results import ReleaseRef, ToolResult, WorkflowRef
from rimthan_workflow_mcp.workflow_selection import select_workflow
from rimthan_workflow_registry.errors import FailureCode, TokenError, WorkflowProtocolError
from rimthan_workflow_registry.run.checkpoints import Checkpoint, HostBinding, issue_checkpoint, verify_checkpoint
from rimthan_workflow_registry.run.token_wire import peek_claims
from rimthan_workflow_registry.run.tokens import CheckpointKeyring
from support.engines import Engines, TickingClock, WireEngine, engine_for, example_state, examples, make_engines
from support.releases import branching_setup_source, packaged_source


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory) -> Engines:
    return make_engines(tmp_path_factory.mktemp("protocol"), TickingClock())


def _claims(token: str) -> dict[str, Any]:
    """The token's claims, unverified (what the test inspects after the engine issued it)."""
    claims = peek_claims(token)
    assert claims is not None, token
    return claims


def start(engine: WireEngine, harness: Any, state: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return engine.start_workflow({"workflow": "research", "confirmed_state": state, "host": harness.host(), **extra})


# ----------------------------------------------------------------------------- start


def test_start_refuses_unconfirmed_initial_fields(engines: Engines) -> None:
    engine, harness = engines.wire("1.2.0"), engines.harness("unconfirmed")
    state = harness.confirm(example_state("1.2.0"))
    del state["confirmations"]["decision_owner"]
    state["confirmations"]["objective"] = {**state["confirmations"]["objective"], "value_digest": "sha256:" + "0" * 64}
    result = start(engine, harness, state)
    assert result["status"] == "blocked" and result["checkpoint"] is None
    assert [(f["code"], f["pointer"]) for f in result["failures"]] == [
        ("confirmation_required", "/decision_owner"),
        ("confirmation_required", "/objective"),
    ]


def test_start_validates_state_against_confirmed_state_schema(engines: Engines) -> None:
    engine, harness = engines.wire("1.2.0"), engines.harness("schema")
    state = harness.confirm({**example_state("1.2.0"), "surprise": 1})
    with pytest.raises(WorkflowProtocolError) as err:
        start(engine, harness, state)
    assert err.value.code is FailureCode.CONFIRMED_STATE_INVALID


def test_start_host_blockers_are_accumulated(engines: Engines) -> None:
    engine, harness = engines.wire("1.2.0"), engines.harness("blockers")
    harness = harness.with_host(adapter_id="opencode", capabilities=("skills",), validator_capabilities=())
    result = start(engine, harness, harness.confirm(example_state("1.2.0")))
    assert result["status"] == "blocked"
    assert [f["code"] for f in result["failures"]] == [
        "host_adapter_incompatible",
        "host_capability_missing",
        "validator_capability_missing",
    ]


def test_results_share_the_identities_built_once_per_release(engines: Engines) -> None:
    """Every result of one engine carries the same release and workflow records, built when the engine was made:
    equal to the ones the release names, and the same on the wire; a workflow of another release gets its own."""
    module, harness = engines.module("1.2.0"), engines.harness("identities")
    arguments = {
        "workflow": "research",
        "confirmed_state": harness.confirm(example_state("1.2.0")),
        "host": harness.host(),
    }
    first, second = module.start_workflow(arguments), module.start_workflow(arguments)
    resumed = module.continue_workflow(
        {"checkpoint": second.to_json()["checkpoint"], "confirmed_state": arguments["confirmed_state"]}
    )
    assert first.status == second.status == "active" and resumed.workflow is not None
    assert first.release is second.release is resumed.release  # not rebuilt per result
    assert first.workflow is second.workflow is resumed.workflow
    release = engines.releases["1.2.0"]
    workflow = select_workflow(release, "research", None)
    assert first.release == ReleaseRef.of(release) and first.workflow == WorkflowRef.of(workflow)
    wire = first.to_json()
    assert wire["release"] == {"id": release.release_id, "manifest_digest": release.manifest_digest}
    assert wire["workflow"] == {"id": workflow.id, "version": workflow.version}
    other = select_workflow(engines.releases["1.3.0"], "research", None)
    assert other.version != workflow.version and module.workflow_ref(other) == WorkflowRef.of(other)


def test_a_result_is_built_without_the_generated_init_and_is_the_same_frozen_record(engines: Engines) -> None:
    """``ToolResult``'s own ``__init__`` (not the frozen dataclass's, which sets each field through
    ``object.__setattr__``) takes exactly its fields, in order, with their defaults: the same record."""
    assert ToolResult.__init__.__code__.co_filename.endswith("results.py")  # generated ones come from "<string>"
    parameters = inspect.signature(ToolResult).parameters
    assert list(parameters) == [f.name for f in dataclasses.fields(ToolResult)]
    module, harness = engines.module("1.2.0"), engines.harness("record")
    arguments = {
        "workflow": "research",
        "confirmed_state": harness.confirm(example_state("1.2.0")),
        "host": harness.host(),
    }
    started = module.start_workflow(arguments)
    rebuilt = ToolResult(**{f.name: getattr(started, f.name) for f in dataclasses.fields(ToolResult)})
    assert rebuilt == started and rebuilt.to_json() == started.to_json()
    bare = ToolResult("blocked", started.release)
    assert bare.to_json() == {
        **dict.fromkeys(("workflow", "checkpoint", "checkpoint_digest", "sequence", "step", "question")),
        **dict.fromkeys(("validation_bundle", "migration")),
        "status": "blocked",
        "release": started.release.to_json(),
        "failures": [],
        "findings": [],
        "validators": [],
        "message": "blocked",
    }
    with pytest.raises(dataclasses.FrozenInstanceError):
        started.status = "completed"  # type: ignore[misc]
    moved = dataclasses.replace(started, message="moved")
    assert moved.message == "moved" and moved.step is started.step and started.message == ""


def test_start_binds_a_second_pinned_adapter(engines: Engines) -> None:
    engine, harness = engines.wire("1.2.0"), engines.harness("opencode")
    harness = harness.with_host(harness="opencode", adapter_id="opencode")
    result = start(engine, harness, harness.confirm(example_state("1.2.0")))
    assert result["status"] == "active"
    paths = {a["install_path"] for a in result["step"]["host_assets"]}
    assert ".opencode/agent/evidence-auditor.md" in paths  # opencode@1.0.0 as released (1.3.1's 1.1.0: plural)
    assert _claims(result["checkpoint"])["host"]["harness"] == "opencode"


def test_unknown_workflow_and_version_are_refused(engines: Engines) -> None:
    engine, harness = engines.wire("1.2.0"), engines.harness("unknown")
    state = harness.confirm(example_state("1.2.0"))
    for extra in ({"workflow": "astrology"}, {"workflow": "research", "workflow_version": "9.0.0"}):
        with pytest.raises(WorkflowProtocolError) as err:
            engine.start_workflow({"confirmed_state": state, "host": harness.host(), **extra})
        assert err.value.code is FailureCode.WORKFLOW_NOT_FOUND


def _multi_version_source(root: Path) -> Path:
    """One catalogue carrying research-decision in several versions, aliases shared."""
    source = root / "multi"
    shutil.copytree(packaged_source("1.2.0"), source)
    base = tomllib.loads((source / "workflows/research-decision.toml").read_text("utf-8"))
    files = []
    for version in ("1.9.0", "1.10.0", "1.11.0-rc.1"):
        name = f"workflows/research-decision-{version}.toml"
        (source / name).write_text(tomli_w.dumps({**base, "version": version}), "utf-8")
        files.append(name)
    catalogue = tomllib.loads((source / "catalogue.toml").read_text("utf-8"))
    catalogue["workflows"] += files
    catalogue["catalogue"]["version"] = "2.0.0"
    (source / "catalogue.toml").write_text(tomli_w.dumps(catalogue), "utf-8")
    return source


def test_alias_resolution_picks_newest_semantic_version_unless_exact(tmp_path: Path, engines: Engines) -> None:
    engine = engine_for(_multi_version_source(tmp_path), tmp_path, engines)
    harness = engines.harness("versions")
    state = harness.confirm(example_state("1.2.0"))
    for name in ("research-decision", "research", "decide"):
        # newest stable: 1.10.0 beats 1.9.0, and a pre-release is never picked implicitly
        result = engine.start_workflow({"workflow": name, "confirmed_state": state, "host": harness.host()})
        assert result["workflow"]["version"] == "1.10.0"
        result = engine.start_workflow(
            {"workflow": name, "workflow_version": "1.11.0-rc.1", "confirmed_state": state, "host": harness.host()}
        )
        assert result["workflow"] == {"id": "research-decision", "version": "1.11.0-rc.1"}


# -------------------------------------------------------------------------- continue


def _started(engines: Engines, name: str) -> tuple[WireEngine, Any, dict[str, Any], dict[str, Any]]:
    engine, harness = engines.wire("1.2.0"), engines.harness(name)
    state = harness.confirm(example_state("1.2.0"))
    return engine, harness, state, start(engine, harness, state)


def test_continue_blocks_unconfirmed_change_and_keeps_checkpoint(engines: Engines) -> None:
    engine, harness, state, started = _started(engines, "change")
    cp = started["checkpoint"]
    changed = {**state, "state": {**state["state"], "objective": "A different question?"}}
    result = engine.continue_workflow({"checkpoint": cp, "confirmed_state": state, "next_confirmed_state": changed})
    assert result["status"] == "blocked" and result["checkpoint"] == cp
    assert [f["code"] for f in result["failures"]] == ["confirmation_required"]
    # a confirmation given before the checkpoint is not contemporaneous
    stale = harness.confirm(changed["state"], previous=state, at=_claims(cp)["iat"] - 1)
    result = engine.continue_workflow({"checkpoint": cp, "confirmed_state": state, "next_confirmed_state": stale})
    assert result["status"] == "blocked"
    # a fresh confirmation is accepted; the gated step is returned again with a reissued checkpoint
    engines.clock.tick()
    fresh = harness.confirm(changed["state"], previous=state)
    result = engine.continue_workflow({"checkpoint": cp, "confirmed_state": state, "next_confirmed_state": fresh})
    assert (result["status"], result["step"]["id"]) == ("active", "setup-workspace")
    assert result["checkpoint"] != cp and _claims(result["checkpoint"])["state"] != _claims(cp)["state"]


def test_prior_state_must_match_checkpoint_digest(engines: Engines) -> None:
    engine, harness, state, started = _started(engines, "digest")
    other = harness.confirm({**state["state"], "decision_owner": "Someone else"})
    with pytest.raises(WorkflowProtocolError) as err:
        engine.continue_workflow({"checkpoint": started["checkpoint"], "confirmed_state": other})
    assert err.value.code is FailureCode.CONFIRMED_STATE_MISMATCH


# --------------------------------------------------------------------------- prepare


def test_prepare_accumulates_every_deterministic_failure(engines: Engines) -> None:
    engine, harness, state, started = _started(engines, "accumulate")
    artifacts = harness.deliver_workspace(started["step"])
    host = dict(
        harness.host(),
        validator_capabilities=["other"],
        repository_policy={"writable_paths": ["research/*"], "protected_paths": [".claude/*"]},
    )
    bogus = [
        artifacts[0],
        artifacts[0],
        {"artifact_id": "extra", "path": "x.md", "media_type": "text/markdown", "content": "x"},
    ]
    result = engine.prepare_step_validation(
        {
            "checkpoint": started["checkpoint"],
            "confirmed_state": state,
            "host": host,
            "artifacts": bogus,
            "inputs": [{"artifact_id": "findings", "sha256": "0" * 64}],
        }
    )
    assert result["status"] == "deterministic_validation_failed" and result["validation_bundle"] is None
    codes = {f["code"] for f in result["failures"]}
    assert {
        "validator_capabilities_mismatch",
        "repository_policy_conflict",
        "artifact_duplicate",
        "artifact_undeclared",
        "artifact_count_mismatch",
        "input_binding_mismatch",
    } <= codes


def test_prepare_checks_media_type_size_and_attestation(engines: Engines) -> None:
    engine, harness = engines.wire("1.2.0"), engines.harness("outputs")
    log_cp, state, step = _at_route_step(engines, engine, harness)
    outputs = harness.write_outputs(step, examples("1.2.0"))
    evidence, findings = outputs
    wrong = [
        {**evidence, "media_type": "text/markdown"},
        {
            **findings,
            "content": "x" * 200_000,
            "attestation": {
                **findings["attestation"],
                "path": "research/other.md",
                "symlink_free": False,
                "write": "replaced",
            },
        },
    ]
    result = engine.prepare_step_validation(
        {"checkpoint": log_cp, "confirmed_state": state, "host": harness.host(), "artifacts": wrong}
    )
    codes = [f["code"] for f in result["failures"]]
    assert {"media_type_mismatch", "artifact_too_large", "output_attestation_mismatch"} <= set(codes)
    assert codes.count("output_attestation_mismatch") >= 2


def _at_route_step(
    engines: Engines, engine: WireEngine, harness: Any, route: str = "desk-research"
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    state = harness.confirm({**example_state("1.2.0"), "research_route": route})
    started = start(engine, harness, state)
    result = harness.pass_setup(engine, started, state)
    while result["step"]["id"] != route:
        result = engine.continue_workflow({"checkpoint": result["checkpoint"], "confirmed_state": state})
    return result["checkpoint"], state, result["step"]


def test_prepare_refuses_ungated_step(engines: Engines) -> None:
    engine, harness, state, started = _started(engines, "ungated")
    moved = harness.pass_setup(engine, started, state)
    with pytest.raises(WorkflowProtocolError) as err:
        engine.prepare_step_validation(
            {"checkpoint": moved["checkpoint"], "confirmed_state": state, "host": harness.host(), "artifacts": []}
        )
    assert err.value.code is FailureCode.STEP_NOT_GATED


# ---------------------------------------------------------------------------- submit


def _prepared(engines: Engines, name: str) -> tuple[WireEngine, Any, str, dict[str, Any], dict[str, Any]]:
    """A run at its route step with the packaged examples prepared: engine, harness, checkpoint, state, result."""
    engine, harness = engines.wire("1.2.0"), engines.harness(name)
    cp, state, step = _at_route_step(engines, engine, harness)
    ready = engine.prepare_step_validation(
        {
            "checkpoint": cp,
            "confirmed_state": state,
            "host": harness.host(),
            "artifacts": harness.write_outputs(step, examples("1.2.0")),
        }
    )
    return engine, harness, cp, state, ready


def test_submit_refuses_tampered_or_foreign_bundle(engines: Engines) -> None:
    engine, harness, cp, state, ready = _prepared(engines, "bundle")
    bundle = ready["validation_bundle"]
    reports = harness.reports(ready)
    forged = {**bundle, "validators": [dict(v, report_required=False) for v in bundle["validators"]]}
    other_cp, _, _ = _at_route_step(engines, engine, engines.harness("bundle-2"), "experiment")
    for bad_bundle, checkpoint in ((forged, cp), (bundle, other_cp)):
        with pytest.raises(WorkflowProtocolError) as err:
            engine.submit_step_validation(
                {
                    "checkpoint": checkpoint,
                    "confirmed_state": state,
                    "validation_bundle": bad_bundle,
                    "reports": reports,
                }
            )
        assert err.value.code in (FailureCode.VALIDATION_BUNDLE_INVALID, FailureCode.CONFIRMED_STATE_MISMATCH)
    with pytest.raises(WorkflowProtocolError) as err:
        engine.submit_step_validation(
            {"checkpoint": cp, "confirmed_state": state, "validation_bundle": forged, "reports": reports}
        )
    assert err.value.code is FailureCode.VALIDATION_BUNDLE_INVALID


def test_a_pass_report_carrying_an_error_finding_is_refused_and_warnings_pass(engines: Engines) -> None:
    """An ``error`` finding fails its validator: a report saying ``pass`` with one has no single verdict, and is
    refused (the findings were once dropped and the step advanced); a ``pass`` with warnings only advances."""
    engine, harness, cp, state, ready = _prepared(engines, "contradictory")
    submit = {"checkpoint": cp, "confirmed_state": state, "validation_bundle": ready["validation_bundle"]}
    reports = harness.reports(ready)
    said_pass = [dict(reports[0], findings=[{"severity": "error", "message": "the evidence is missing"}])]
    with pytest.raises(WorkflowProtocolError) as err:
        engine.submit_step_validation({**submit, "reports": said_pass + reports[1:]})
    assert err.value.code is FailureCode.REPORT_CONTRADICTORY
    assert "says pass but carries 1 error finding" in str(err.value)
    warned = [dict(r, findings=[{"severity": "warning", "message": "thin sourcing"}]) for r in reports]
    moved = engine.submit_step_validation({**submit, "reports": warned})
    assert moved["status"] in ("advanced", "input_required", "completed"), moved


# ---------------------------------------------------------------------------- tokens


def _flip(token: str, index: int) -> str:
    """Another character at ``index``: the next base64url letter, or (in the unencoded claims) the next code point."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    char = token[index]
    if char == ".":
        return token
    replacement = alphabet[(alphabet.index(char) + 1) % 64] if char in alphabet else chr(ord(char) + 1)
    return token[:index] + replacement + token[index + 1 :]


def test_tampered_truncated_foreign_and_other_release_tokens_are_refused(engines: Engines) -> None:
    engine, harness, state, started = _started(engines, "tokens")
    token = started["checkpoint"]
    assert verify_checkpoint(engines.keyring, token).checkpoint.sequence == 1
    for index in range(0, len(token), max(1, len(token) // 40)):
        mutated = _flip(token, index)
        if mutated != token:
            with pytest.raises(TokenError):
                verify_checkpoint(engines.keyring, mutated)
    # the last signature character carries unused bits: a re-encoding of the same bytes is refused too
    last = token[-1]
    twin = token[:-1] + ("B" if last == "A" else "A" if last == "B" else chr(ord(last) ^ 1))
    if twin != token:
        with pytest.raises(TokenError):
            verify_checkpoint(engines.keyring, twin)
    for broken in (token[:-5], token + "A", token.rsplit(".", 1)[0] + ".", "", "a.b", token.replace(".", "..", 1)):
        with pytest.raises(TokenError):
            verify_checkpoint(engines.keyring, broken)
    # signed by an unknown key, or by a retired one
    with pytest.raises(TokenError) as err:
        verify_checkpoint(CheckpointKeyring.generate(), token)
    assert err.value.code is FailureCode.CHECKPOINT_KEY_UNKNOWN
    rotated = engines.keyring.rotated()
    assert verify_checkpoint(rotated, token).checkpoint.sequence == 1  # old key still verifies after rotation
    with pytest.raises(TokenError) as err:
        verify_checkpoint(rotated.retiring(engines.keyring.signing_key_id), token)
    assert err.value.code is FailureCode.CHECKPOINT_KEY_UNKNOWN
    # alg=none / unsigned
    header = base64.urlsafe_b64encode(b'{"alg":"none","typ":"rimthan-checkpoint+jwt"}').rstrip(b"=").decode()
    with pytest.raises(TokenError):
        verify_checkpoint(engines.keyring, f"{header}.{token.split('.')[1]}.")
    # a valid token pinned to another release is refused by this release's engine
    other = engines.wire("1.3.0")
    with pytest.raises(WorkflowProtocolError) as refused:
        other.continue_workflow({"checkpoint": token, "confirmed_state": state})
    assert refused.value.code is FailureCode.PINNED_RELEASE_UNAVAILABLE
    # a validly signed checkpoint naming a step its release lacks
    claims = verify_checkpoint(engines.keyring, token).checkpoint
    from dataclasses import replace

    bogus = issue_checkpoint(engines.keyring, replace(claims, step_id="nowhere")).token
    with pytest.raises(WorkflowProtocolError) as refused:
        engine.continue_workflow({"checkpoint": bogus, "confirmed_state": state})
    assert refused.value.code is FailureCode.CHECKPOINT_INVALID


def test_checkpoint_claims_have_a_closed_shape() -> None:
    keyring = CheckpointKeyring.generate()
    signed = keyring.sign({"seq": 1, "iat": 1, "extra": True}, "rimthan-checkpoint+jwt")
    with pytest.raises(TokenError) as err:
        verify_checkpoint(keyring, signed)
    assert err.value.code is FailureCode.CHECKPOINT_INVALID
    host = HostBinding.of("claude-code", "1.0.0", ["b", "a"], [])
    claims = Checkpoint(
        1, "w", "1.0.0", "r@1", "sha256:" + "0" * 64, "s", "sha256:" + "1" * 64, None, host=host
    ).to_claims()
    assert Checkpoint.from_claims(claims).host.capabilities == ("a", "b")
    broken = [
        {**claims, "host": {**claims["host"], "harness": ""}},
        {**claims, "artifacts": {"a": ["0" * 63, 1]}},
        {**claims, "artifacts": {"a": ["0" * 64, -1]}},
        {**claims, "artifacts": {"a": ["0" * 64, True]}},
        {**claims, "artifacts": {"a": ["0" * 64]}},
        {**claims, "validators": {"v@1.0.0": ["fail", "0" * 64]}},
        {**claims, "validators": {"v@1.0.0": ["pass", "0" * 64, "extra"]}},
    ]
    for bad in broken:
        with pytest.raises(TokenError):
            Checkpoint.from_claims(bad)


STRICT_JSON_BREAKS = {
    # json.loads takes all three; NaN then passed any minimum/maximum (every comparison with NaN is false)
    "NaN": ('"value": NaN', "non-finite number NaN is not JSON"),
    "1e999": ('"value": 1e999', "overflows to infinity"),
    "repeated-key": ('"value": 48, "value": 4.8', "duplicate JSON key 'value'"),
}


@pytest.mark.parametrize("case", sorted(STRICT_JSON_BREAKS))
def test_prepare_refuses_a_json_artifact_that_json_does_not_allow(engines: Engines, case: str) -> None:
    engine, harness = engines.wire("1.2.0"), engines.harness(f"strict-json-{case}")
    cp, state, step = _at_route_step(engines, engine, harness, "experiment")
    replacement, said = STRICT_JSON_BREAKS[case]

    def content(artifact_id: str, media_type: str) -> str:
        text = examples("1.2.0")(artifact_id, media_type)
        if artifact_id != "experiment-results":
            return text
        assert '"value": 48' in text
        return text.replace('"value": 48', replacement, 1)

    artifacts = harness.write_outputs(step, content)
    prepared = engine.prepare_step_validation(
        {"checkpoint": cp, "confirmed_state": state, "host": harness.host(), "artifacts": artifacts}
    )
    failures = prepared.get("failures", [])
    assert [(f["code"], f.get("artifact_id")) for f in failures] == [("json_parse_failed", "experiment-results")]
    assert said in failures[0]["message"], failures[0]["message"]


def test_keyring_file_round_trip_is_private(tmp_path: Path) -> None:
    path = tmp_path / "state" / "checkpoint-keys.json"
    keyring = CheckpointKeyring.load_or_create(path)
    assert path.stat().st_mode & 0o777 == 0o600
    assert CheckpointKeyring.load_or_create(path) == keyring
    rotated = keyring.rotated()
    rotated.save(path)
    assert CheckpointKeyring.load(path).signing_key_id == rotated.signing_key_id
    path.write_text("{not json")
    with pytest.raises(Exception) as err:
        CheckpointKeyring.load(path)
    assert getattr(err.value, "code", None) is FailureCode.KEY_INVALID


def test_prepare_reports_host_mismatch_missing_artifact_bad_json_and_total_size(engines: Engines) -> None:
    engine, harness = engines.wire("1.2.0"), engines.harness("more-failures")
    cp, state, step = _at_route_step(engines, engine, harness, "experiment")
    results, report = harness.write_outputs(step, examples("1.2.0"))
    host = harness.with_host(harness="opencode", adapter_id="opencode").host()
    only_one = engine.prepare_step_validation(
        {"checkpoint": cp, "confirmed_state": state, "host": host, "artifacts": [{**results, "content": "{not json"}]}
    )
    codes = {f["code"] for f in only_one["failures"]}
    assert {"host_mismatch", "artifact_missing", "artifact_count_mismatch", "json_parse_failed"} <= codes
    # 262144 + 131073 bytes: one artifact over its cap and the step over max_total_bytes (393216)
    big = engine.prepare_step_validation(
        {
            "checkpoint": cp,
            "confirmed_state": state,
            "host": harness.host(),
            "artifacts": [{**results, "content": " " * 262_144}, {**report, "content": "x" * 131_073}],
        }
    )
    big_codes = [f["code"] for f in big["failures"]]
    assert "artifacts_total_too_large" in big_codes and "artifact_too_large" in big_codes


def test_migration_to_a_release_whose_workflow_is_not_newer_is_refused(tmp_path: Path, engines: Engines) -> None:
    source = tmp_path / "same-workflow"
    shutil.copytree(packaged_source("1.2.0"), source)
    catalogue = tomllib.loads((source / "catalogue.toml").read_text("utf-8"))
    catalogue["catalogue"]["version"] = "1.2.1"  # a new release carrying the same workflow version
    (source / "catalogue.toml").write_text(tomli_w.dumps(catalogue), "utf-8")
    target = engine_for(source, tmp_path, engines)
    engine, harness, state, started = _started(engines, "not-newer")
    with pytest.raises(WorkflowProtocolError) as err:
        engine.migrate_workflow(
            target.module,
            {
                "checkpoint": started["checkpoint"],
                "confirmed_state": state,
                "migration": {"target_release": "research-decision@1.2.1", "confirmed_state": state, "confirm": True},
            },
        )
    assert err.value.code is FailureCode.MIGRATION_NOT_NEWER


def test_a_migration_with_a_next_confirmed_state_beside_it_is_refused(engines: Engines) -> None:
    """A migration's state travels in ``migration.confirmed_state``; a ``next_confirmed_state`` beside it was
    dropped without a word. It is refused before anything is checked or issued."""
    engine, harness, state, started = _started(engines, "both-states")
    changed = harness.confirm({**state["state"], "research_route": "experiment"}, previous=state)
    request = {"target_release": "research-decision@1.3.0", "confirmed_state": state, "confirm": False}
    arguments = {"checkpoint": started["checkpoint"], "confirmed_state": state, "migration": request}
    with pytest.raises(WorkflowProtocolError) as err:
        engine.migrate_workflow(engines.wire("1.3.0").module, {**arguments, "next_confirmed_state": changed})
    assert err.value.code is FailureCode.INVALID_ARGUMENTS
    assert "migration carries its state in migration.confirmed_state" in str(err.value)
    preview = engine.migrate_workflow(engines.wire("1.3.0").module, arguments)
    assert preview["status"] == "blocked" and preview["migration"] is not None, preview


def test_submit_at_a_branching_gated_step_asks_then_continue_advances(tmp_path: Path, engines: Engines) -> None:
    engine = engine_for(branching_setup_source(tmp_path), tmp_path, engines)
    harness = engines.harness("branching-setup")
    state = harness.confirm(example_state("1.2.0"))
    started = start(engine, harness, state)
    asked = harness.pass_setup(engine, started, state)
    assert asked["status"] == "input_required" and asked["question"]["field"] == "research_route"
    assert _claims(asked["checkpoint"])["step"] == "setup-workspace"
    # the step is validated now: continue with the answer advances instead of returning the gated step
    engines.clock.tick()
    routed = harness.confirm({**state["state"], "research_route": "experiment"}, previous=state)
    moved = engine.continue_workflow(
        {"checkpoint": asked["checkpoint"], "confirmed_state": state, "next_confirmed_state": routed}
    )
    assert (moved["status"], moved["step"]["id"]) == ("active", "experiment")


def test_continue_after_completion_reports_completed_with_the_same_checkpoint(engines: Engines) -> None:
    from support.engines import drive

    run = drive(engines, "1.2.0", "experiment", name="after-completion")
    final = run.checkpoints[-1]
    state = run.harness.state.projection()
    again = engines.wire("1.2.0").continue_workflow({"checkpoint": final, "confirmed_state": state})
    assert (again["status"], again["checkpoint"]) == ("completed", final)
