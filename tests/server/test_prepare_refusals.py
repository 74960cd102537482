"""prepare_step_validation refuses, with closed failures, what its deterministic checks must catch.

A workspace manifest whose JSON has the wrong types fails its schema and its
contract (never a crash), and a host that presents itself with anything of its binding
changed (harness, adapter, capabilities, validator capabilities) is refused.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from support.engines import Engines, StepKit, TickingClock, WireEngine, example_state, make_engines


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory) -> Engines:
    return make_engines(tmp_path_factory.mktemp("prepare"), TickingClock())


def _started(engines: Engines, name: str) -> tuple[WireEngine, StepKit, dict[str, Any], dict[str, Any]]:
    engine, kit = engines.wire("1.2.0"), engines.harness(name)
    state = kit.confirm(example_state("1.2.0"))
    started = engine.start_workflow({"workflow": "research", "confirmed_state": state, "host": kit.host()})
    assert started["status"] == "active", started
    return engine, kit, state, started


def _codes(result: dict[str, Any]) -> set[str]:
    assert result["status"] == "deterministic_validation_failed" and result["validation_bundle"] is None, result
    return {f["code"] for f in result["failures"]}


ODD_MANIFESTS: dict[str, Callable[[dict[str, Any]], None]] = {
    "capabilities of mixed types": lambda m: m.update(capabilities=[1, "skills"]),
    "capabilities a number": lambda m: m.update(capabilities=5),
    "a delivered kind a list": lambda m: m["delivered"][0].update(kind=["prompt"]),
}


@pytest.mark.parametrize("edit", sorted(ODD_MANIFESTS))
def test_a_workspace_manifest_of_wrong_types_fails_schema_and_contract(engines: Engines, edit: str) -> None:
    engine, kit, state, started = _started(engines, "odd-" + edit.replace(" ", "-"))
    (artifact,) = kit.deliver_workspace(started["step"])
    manifest = json.loads(artifact["content"])
    ODD_MANIFESTS[edit](manifest)
    artifact["content"] = json.dumps(manifest)
    result = engine.prepare_step_validation(
        {"checkpoint": started["checkpoint"], "confirmed_state": state, "host": kit.host(), "artifacts": [artifact]}
    )
    # the contract check reads the same JSON; the bytes sent are not those read back: reported too, nothing else
    expected = {"json_schema_failed", "workspace_manifest_contract_mismatch", "output_attestation_mismatch"}
    assert _codes(result) == expected


HOST_DRIFT: dict[str, tuple[Callable[[dict[str, Any]], dict[str, Any]], set[str]]] = {
    "no capabilities": (lambda h: {**h, "capabilities": []}, {"host_mismatch"}),
    "one capability more": (lambda h: {**h, "capabilities": [*h["capabilities"], "web.fetch"]}, {"host_mismatch"}),
    "another pinned adapter id": (
        lambda h: {**h, "adapter": {**h["adapter"], "id": "opencode"}},
        {"host_mismatch"},
    ),
    "an unknown adapter id": (
        lambda h: {**h, "adapter": {**h["adapter"], "id": "no-such-adapter"}},
        {"host_mismatch"},
    ),
    "another validator capability": (
        lambda h: {**h, "validator_capabilities": [*h["validator_capabilities"], "web.fetch"]},
        {"validator_capabilities_mismatch"},
    ),
}


@pytest.mark.parametrize("drift", sorted(HOST_DRIFT))
def test_a_host_whose_binding_drifted_is_refused(engines: Engines, drift: str) -> None:
    engine, kit, state, started = _started(engines, "drift-" + drift.replace(" ", "-"))
    artifacts = kit.deliver_workspace(started["step"])
    base = {"checkpoint": started["checkpoint"], "confirmed_state": state, "artifacts": artifacts}
    change, codes = HOST_DRIFT[drift]
    assert _codes(engine.prepare_step_validation({**base, "host": change(kit.host())})) == codes
    same_reordered = {**kit.host(), "capabilities": sorted(kit.host()["capabilities"], reverse=True)}
    assert engine.prepare_step_validation({**base, "host": same_reordered})["status"] == "ready_for_semantic_validation"
