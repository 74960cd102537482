"""The deterministic checks of ``prepare_step_validation``, collected before any semantic validator runs.

Plain Python over the core (no MCP imports): every failure is collected, in
the order the engine always reported them, and none stops the others.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rimthan_workflow_registry.failures import Failure
from rimthan_workflow_registry.protocol_names import SETUP_STEP_ID
from rimthan_workflow_registry.release import HostAdapter, StepDefinition, VerifiedRelease, WorkflowDefinition
from rimthan_workflow_registry.run import Checkpoint, artifact_checks, attestations, binding_drift, repository_policy


def deterministic_failures(
    release: VerifiedRelease,
    workflow: WorkflowDefinition,
    step: StepDefinition,
    cp: Checkpoint,
    adapter: HostAdapter,
    arguments: Mapping[str, Any],
    artifacts: Sequence[artifact_checks.SubmittedArtifact],
) -> list[Failure]:
    """Every reason the submitted ``artifacts`` (and the call's host) cannot go to semantic validation."""
    host = arguments["host"]
    failures = binding_drift(workflow, step, cp.host, adapter, host)
    failures += repository_policy.conflict(host["repository_policy"], write_paths(workflow, step, adapter))
    failures += artifact_checks.check_artifact_set(step, artifacts)
    failures += artifact_checks.check_artifact_contents(step, artifacts, release.schemas.validators)
    failures += artifact_checks.check_input_bindings(step, cp, arguments.get("inputs", []))
    if step.id == SETUP_STEP_ID:
        expected = attestations.expected_deliveries(workflow, step, adapter, lambda path: file_sha256(release, path))
        for artifact in artifacts:
            if step.output(artifact.artifact_id) is not None:
                failures += attestations.check_workspace_manifest(artifact, cp.host, adapter, expected)
    failures += attestations.check_output_attestations(step, artifacts)
    return failures


def write_paths(workflow: WorkflowDefinition, step: StepDefinition, adapter: HostAdapter) -> list[str]:
    """Where ``step`` writes: its outputs, and at setup every host asset's and the adapter's install path."""
    paths = [o.path for o in step.outputs]
    if step.id == SETUP_STEP_ID:
        for asset_id in step.host_assets:
            asset = workflow.asset(asset_id)
            assert asset is not None
            paths.append(adapter.install_path(asset.kind, asset.id))
        paths.append(adapter.install_path("adapter", adapter.id))
    return paths


def file_sha256(release: VerifiedRelease, path: str) -> str:
    """The SHA-256 hex the verified manifest lists for ``path`` (a file the catalogue rules guarantee)."""
    entry = release.file_entry(path)
    assert entry is not None
    return entry.sha256
