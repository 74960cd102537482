"""The host-protocol test vectors cannot drift, and the core agrees with them.

``docs/test-vectors/host-protocol.json`` is what harness authors in other
languages check their implementation against. This test regenerates it with
``interop/host_vectors.py`` and compares byte for byte, then checks each
vector against the core's own functions (and against hashlib directly, as
another implementation would), over a release built independently here.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import subprocess
import sys
import unicodedata
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from rimthan_workflow_registry.canonical import canonical_text, digest_value
from rimthan_workflow_registry.errors import FailureCode
from rimthan_workflow_registry.release.catalogue import HostAdapter
from rimthan_workflow_registry.release.trust import load_trust
from rimthan_workflow_registry.release.verified import VerifiedRelease
from rimthan_workflow_registry.release.verify import verify_release
from rimthan_workflow_registry.run import ArtifactReceipt, attestations
from rimthan_workflow_registry.run.artifact_checks import SubmittedArtifact
from rimthan_workflow_registry.run.audit import audit_run, read_log
from rimthan_workflow_registry.run.checkpoints import HostBinding
from rimthan_workflow_registry.run.host_binding import binding_for, bound_adapter
from rimthan_workflow_registry.run.token_wire import peek_claims, token_digest
from rimthan_workflow_registry.run.tokens import CheckpointKeyring
from rimthan_workflow_registry.run.validation_bundle import input_digest
from support.releases import build_release, make_keypair, packaged_source, trust_dir

ROOT = Path(__file__).resolve().parents[2]
VECTORS = ROOT / "docs" / "test-vectors" / "host-protocol.json"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("host_vectors", ROOT / "interop" / "host_vectors.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def vectors() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(VECTORS.read_text("utf-8"))
    return document


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> VerifiedRelease:
    root = tmp_path_factory.mktemp("vectors")
    key = make_keypair(root / "keys", "k")
    built = build_release(packaged_source("1.2.0"), root / "out", [key])
    return verify_release(built, load_trust(trust_dir(root / "trust", key)))


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_the_committed_vectors_are_exactly_what_the_generator_makes_now() -> None:
    generator = _generator()
    written: list[str] = []
    assert generator.main([], write=written.append) == 0
    stale = "docs/test-vectors/host-protocol.json is stale: run make test-vectors"
    assert written == [VECTORS.read_text("utf-8")], stale


def test_value_digests_are_rfc8785_sha256(vectors: dict[str, Any]) -> None:
    cases = vectors["value_digests"]
    assert len(cases) >= 10
    for case in cases:
        assert canonical_text(case["value"]) == case["canonical_json"], case["name"]
        assert "sha256:" + _sha256(case["canonical_json"]) == case["value_digest"], case["name"]
        assert digest_value(case["value"]) == case["value_digest"], case["name"]
    ordered = next(c for c in cases if c["name"].startswith("object key order"))
    # UTF-16 code unit order: U+1D11E (surrogates D834 DD1E) sorts before U+FB01, unlike code point order
    assert ordered["canonical_json"] == '{"Z":4,"a":2,"aa":7,"b":1,"é":3,"€":5,"𝄞":6,"ﬁ":8}'


def _naive(value: Any) -> str:
    """What a host gets from a plain JSON encoder with sorted keys (Python's): right for most values, not all."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def test_the_value_cases_tell_every_byte_rule_apart(vectors: dict[str, Any]) -> None:
    """Each rule the README names has a case an implementation that breaks it gets wrong.

    Numbers in ECMAScript form (a float encoder writes ``100.0``, ``-0.0``,
    ``1e-07``); no Unicode normalisation (NFC and NFD spellings of one word
    digest apart); JSON's short escapes for control characters; ``/``, DEL,
    ``<``, ``>``, ``&`` and U+2028 written as they are (Go's encoder escapes some).
    """
    cases = vectors["value_digests"]
    numbers = [c for c in cases if isinstance(c["value"], list) and any(isinstance(v, float) for v in c["value"])]
    assert numbers and all(_naive(c["value"]) != c["canonical_json"] for c in numbers)
    assert numbers[0]["canonical_json"] == "[1.5,0.1,100,0,1e+21,1e-7,123456789.125,-2.5e-8]"
    texts = [c for c in cases if isinstance(c["value"], str)]
    pairs = [
        (a, b)
        for a in texts
        for b in texts
        if a["value"] < b["value"]
        and unicodedata.normalize("NFC", a["value"]) == unicodedata.normalize("NFC", b["value"])
    ]
    assert pairs and all(a["value_digest"] != b["value_digest"] for a, b in pairs)
    written = "".join(c["canonical_json"] for c in texts)
    assert all(ch in written for ch in ("/", "\x7f", "<", ">", "&", "\u2028", "\u2029"))
    assert all(escape in written for escape in ("\\b", "\\f", "\\r", "\\u0000", "\\u001e"))


def test_the_test_key_tells_the_base64_alphabets_apart(vectors: dict[str, Any]) -> None:
    """The key file holds standard, padded base64 (RFC 4648 section 4); the test key's text has ``+``, ``/``
    and ``=``, so a host that decodes it as base64url (as it decodes a token's header and signature) fails."""
    (entry,) = vectors["fixed"]["checkpoint_keys"]["keys"]
    text = entry["key"]
    assert "+" in text and "/" in text and text.endswith("=")
    assert len(base64.b64decode(text, validate=True)) == 32
    with pytest.raises(ValueError):
        base64.b64decode(text.replace("+", "-").replace("/", "_"), validate=True)


def test_confirmed_state_digests(vectors: dict[str, Any]) -> None:
    confirmed = vectors["confirmed_state"]
    state, confirmations = confirmed["projection"]["state"], confirmed["projection"]["confirmations"]
    assert digest_value(state) == confirmed["state_digest"]
    assert sorted(confirmations) == sorted(state) == sorted(confirmed["field_digests"])
    for name, value in state.items():
        assert digest_value(value) == confirmed["field_digests"][name] == confirmations[name]["value_digest"]
        assert confirmations[name]["confirmed_at"] == vectors["fixed"]["clock_start"]


def test_release_identity_is_reproducible_from_the_catalogue(vectors: dict[str, Any], release: VerifiedRelease) -> None:
    assert vectors["release"] == {"id": release.release_id, "manifest_digest": release.manifest_digest}


def _workspace_contract(
    vectors: dict[str, Any], release: VerifiedRelease
) -> tuple[HostBinding, HostAdapter, list[dict[str, str]]]:
    """The vectors' host binding, the adapter it binds to and the workspace the release expects it to deliver."""
    workflow = release.catalogue.workflow("research-decision", "1.2.0")
    assert workflow is not None
    binding = binding_for(vectors["fixed"]["host"])
    adapter = bound_adapter(release.catalogue, workflow, binding)
    assert adapter is not None

    def sha256_of(path: str) -> str:
        return hashlib.sha256(release.read_file(path)).hexdigest()

    return binding, adapter, attestations.expected_deliveries(workflow, workflow.steps[0], adapter, sha256_of)


def test_workspace_manifest_matches_the_release_contract(vectors: dict[str, Any], release: VerifiedRelease) -> None:
    workspace = vectors["workspace_manifest"]
    binding, adapter, expected = _workspace_contract(vectors, release)
    listed = [{k: row[k] for k in ("asset", "kind", "path", "sha256")} for row in workspace["expected_deliveries"]]
    assert sorted(listed, key=lambda r: (r["kind"], r["asset"])) == expected
    assert workspace["manifest"]["delivered"] == sorted(listed, key=lambda r: (r["kind"], r["asset"]))
    artifact = workspace["artifact"]
    assert json.loads(artifact["content"]) == workspace["manifest"]
    assert _sha256(artifact["content"]) == workspace["artifact_sha256"]
    assert (
        attestations.check_workspace_manifest(SubmittedArtifact.from_json(artifact), binding, adapter, expected) == []
    )


ODD_MANIFESTS: dict[str, Callable[[dict[str, Any]], None]] = {
    "capabilities of mixed types": lambda m: m.update(capabilities=[1, "skills"]),
    "capabilities a number": lambda m: m.update(capabilities=5),
    "capabilities absent": lambda m: m.pop("capabilities"),
    "a delivered kind a list": lambda m: m["delivered"][0].update(kind=["prompt"]),
    "a delivered asset an object": lambda m: m["delivered"][0].update(asset={}),
    "a delivered row a number": lambda m: m["delivered"].__setitem__(0, 1),
    "delivered a string": lambda m: m.update(delivered="everything"),
    "delivered an object": lambda m: m.update(delivered={"prompt": "research"}),
}


@pytest.mark.parametrize("edit", sorted(ODD_MANIFESTS))
def test_a_workspace_manifest_of_odd_json_types_is_a_contract_mismatch(
    vectors: dict[str, Any], release: VerifiedRelease, edit: str
) -> None:
    """Whatever JSON the manifest holds where the contract reads it, the answer is a mismatch, never an error."""
    binding, adapter, expected = _workspace_contract(vectors, release)
    artifact = dict(vectors["workspace_manifest"]["artifact"])
    manifest = json.loads(artifact["content"])
    ODD_MANIFESTS[edit](manifest)
    artifact["content"] = json.dumps(manifest)
    failures = attestations.check_workspace_manifest(SubmittedArtifact.from_json(artifact), binding, adapter, expected)
    assert failures and {f.code for f in failures} == {FailureCode.WORKSPACE_MANIFEST_CONTRACT_MISMATCH}


def test_output_attestations_are_readback_digests(vectors: dict[str, Any], release: VerifiedRelease) -> None:
    outputs = vectors["output_attestations"]
    workflow = release.catalogue.workflow("research-decision", "1.2.0")
    assert workflow is not None
    step = workflow.step(outputs["step"])
    assert step is not None
    artifacts = [SubmittedArtifact.from_json(a) for a in outputs["artifacts"]]
    for raw in outputs["artifacts"]:
        data = raw["content"].encode("utf-8")
        assert raw["attestation"]["sha256"] == hashlib.sha256(data).hexdigest()
        assert raw["attestation"]["size"] == len(data) and raw["attestation"]["path"] == raw["path"]
    assert attestations.check_output_attestations(step, artifacts) == []
    tampered = [SubmittedArtifact.from_json({**outputs["artifacts"][0], "content": "{}"})]
    assert [f.code.value for f in attestations.check_output_attestations(step, tampered)] == [
        "output_attestation_mismatch"
    ]


def test_report_bindings(vectors: dict[str, Any], release: VerifiedRelease) -> None:
    bindings = vectors["report_bindings"]
    receipts = {k: ArtifactReceipt(r["sha256"], r["size"]) for k, r in bindings["artifact_receipts"].items()}
    outputs = {a["artifact_id"]: a for a in vectors["output_attestations"]["artifacts"]}
    assert {k: r.sha256 for k, r in receipts.items()} == {k: a["attestation"]["sha256"] for k, a in outputs.items()}
    expected_input = "sha256:" + _sha256(canonical_text({k: r.sha256 for k, r in sorted(receipts.items())}))
    assert input_digest(receipts) == expected_input
    assert len(bindings["validators"]) == 2
    for validator, report in zip(bindings["validators"], bindings["reports"], strict=True):
        instruction = release.read_file(validator["instruction_file"])
        assert validator["instruction_digest"] == "sha256:" + hashlib.sha256(instruction).hexdigest()
        assert validator["input_digest"] == expected_input
        assert report["instruction_digest"] == validator["instruction_digest"]
        assert report["input_artifacts"] == {k: r.sha256 for k, r in receipts.items()}
        assert report["validated_by"] == {"harness": "claude-code", "adapter_version": "1.0.0"}


def test_checkpoint_log_audits_with_the_published_test_key(vectors: dict[str, Any]) -> None:
    log = vectors["checkpoint_log"]
    keys = vectors["fixed"]["checkpoint_keys"]
    keyring = CheckpointKeyring(
        signing_key_id=keys["signing_key_id"],
        keys={k["id"]: base64.b64decode(k["key"]) for k in keys["keys"]},
    )
    history = audit_run(read_log(log["log_text"]), keyring)
    assert len(history.checkpoints) == len(log["tokens"]) == 6
    assert [token_digest(t) for t in log["tokens"]] == log["token_digests"]
    assert [peek_claims(t) for t in log["tokens"]] == log["claims"]
    steps = [c["step"] for c in log["claims"]]
    assert steps == [
        "setup-workspace",
        "interview",
        "confirm-contract",
        "select-route",
        "desk-research",
        "desk-research",
    ]
    assert [c["iat"] for c in log["claims"]] == sorted(c["iat"] for c in log["claims"])
    # start reads the clock twice: for its confirmations (none may be dated after it), then to issue
    assert log["claims"][0]["iat"] == vectors["fixed"]["clock_start"] + 1
    assert log["calls"][-1] == {"tool": "rimthan.submit_step_validation", "status": "completed", "sequence": 6}


def test_the_installed_audit_command_accepts_the_vector_log(vectors: dict[str, Any], tmp_path: Path) -> None:
    keys = {k: v for k, v in vectors["fixed"]["checkpoint_keys"].items() if k != "note"}
    (tmp_path / "keys.json").write_text(json.dumps(keys), "utf-8")
    (tmp_path / "run.log").write_text(vectors["checkpoint_log"]["log_text"], "utf-8")
    command = [str(Path(sys.executable).with_name("rimthan-mcp")), "audit", "run.log", "--checkpoint-keys", "keys.json"]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "desk-research" in done.stdout and vectors["release"]["manifest_digest"] in done.stdout
