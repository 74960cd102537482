"""prepare_step_validation hashes each artifact's bytes once, and still checks every attestation against them.

The output attestation's check and the receipt the bundle binds both compare
the SHA-256 of the bytes sent; it is computed once per artifact (the bytes of
a :class:`SubmittedArtifact` never change). A real release, a real keyring and
the real SHA-256: the counting wrapper only records each call before the real
function runs.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from rimthan_workflow_registry.canonical import sha256_hex
from rimthan_workflow_registry.run import artifact_checks
from support.engines import Engines, TickingClock, example_state, make_engines


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory) -> Engines:
    return make_engines(tmp_path_factory.mktemp("hashes-once"), TickingClock())


def _prepare(
    engines: Engines, name: str, monkeypatch: pytest.MonkeyPatch, *, edit: bool
) -> tuple[dict[str, Any], Counter[bytes]]:
    engine, kit = engines.wire("1.2.0"), engines.harness(name)
    state = kit.confirm(example_state("1.2.0"))
    started = engine.start_workflow({"workflow": "research", "confirmed_state": state, "host": kit.host()})
    assert started["status"] == "active", started
    artifacts = kit.deliver_workspace(started["step"])
    if edit:  # the bytes sent are no longer those the attestation read back
        manifest = json.loads(artifacts[0]["content"])
        manifest["capabilities"] = sorted(manifest["capabilities"], reverse=True)
        artifacts[0]["content"] = json.dumps(manifest)
    hashed: Counter[bytes] = Counter()

    def counted(data: bytes | memoryview) -> str:
        hashed[bytes(data)] += 1
        return sha256_hex(data)

    monkeypatch.setattr(artifact_checks, "sha256_hex", counted)
    arguments = {"checkpoint": started["checkpoint"], "confirmed_state": state, "host": kit.host()}
    return engine.prepare_step_validation({**arguments, "artifacts": artifacts}), hashed


def test_each_artifact_is_hashed_once_and_its_receipt_is_that_digest(
    engines: Engines, monkeypatch: pytest.MonkeyPatch
) -> None:
    result, hashed = _prepare(engines, "once", monkeypatch, edit=False)
    assert result["status"] == "ready_for_semantic_validation", result
    assert hashed and set(hashed.values()) == {1}, hashed
    receipts = result["validation_bundle"]["artifacts"]
    assert {r["sha256"] for r in receipts.values()} == {sha256_hex(data) for data in hashed}


def test_bytes_that_differ_from_the_attested_ones_are_still_refused(
    engines: Engines, monkeypatch: pytest.MonkeyPatch
) -> None:
    result, hashed = _prepare(engines, "differs", monkeypatch, edit=True)
    assert result["status"] == "deterministic_validation_failed", result
    assert "output_attestation_mismatch" in {f["code"] for f in result["failures"]}
    assert set(hashed.values()) == {1}, hashed
