"""Host attestations: the workspace manifest at setup, output readback on every gated step.

At ``setup-workspace`` the harness proves it delivered exactly the assets the
release pins, byte for byte, at the adapter's project-local paths. On every
gated step, ``setup-workspace`` included (the workspace manifest is an output
like any other), it proves each output was written where declared, under the
declared write policy, and read back through a symlink-free path with the same
digest as the bytes it sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeGuard

from rimthan_workflow_registry.errors import FailureCode
from rimthan_workflow_registry.failures import Failure
from rimthan_workflow_registry.release.catalogue import HostAdapter, StepDefinition, WorkflowDefinition
from rimthan_workflow_registry.run.artifact_checks import SubmittedArtifact, parse_json_artifact
from rimthan_workflow_registry.run.checkpoints import HostBinding

WRITES_ALLOWED = {"create": {"created"}, "replace": {"replaced"}, "create_or_replace": {"created", "replaced"}}


def expected_deliveries(
    workflow: WorkflowDefinition, step: StepDefinition, adapter: HostAdapter, sha256_of: Any
) -> list[dict[str, str]]:
    """What the workspace manifest must list: every host asset, every validator subagent, the adapter.

    The catalogue rules already put every validator subagent in setup's
    ``host_assets``; requiring them here too keeps the engine's contract
    independent of which checks a release went through.
    """
    rows = []
    required = dict.fromkeys([*step.host_assets, *(v.subagent for v in workflow.validators)])
    for asset_id in required:
        asset = workflow.asset(asset_id)
        assert asset is not None  # guaranteed by the catalogue rules
        rows.append(
            {
                "asset": asset.id,
                "kind": asset.kind,
                "path": adapter.install_path(asset.kind, asset.id),
                "sha256": sha256_of(asset.file),
            }
        )
    rows.append(
        {
            "asset": adapter.id,
            "kind": "adapter",
            "path": adapter.install_path("adapter", adapter.id),
            "sha256": sha256_of(adapter.instruction),
        }
    )
    return sorted(rows, key=lambda r: (r["kind"], r["asset"]))


def check_workspace_manifest(
    artifact: SubmittedArtifact, binding: HostBinding, adapter: HostAdapter, expected: list[dict[str, str]]
) -> list[Failure]:
    """The attested workspace matches the release's asset contract exactly.

    The manifest is the harness's JSON, checked against the release's schema
    separately (and a release's schema may be looser): every value is read
    here as any JSON, so a wrong type is a mismatch reported beside the schema
    failures, never an error.
    """
    try:
        manifest = parse_json_artifact(artifact.data)
    except (UnicodeDecodeError, ValueError):
        return []  # already reported as json_parse_failed
    if not isinstance(manifest, dict):
        return []
    aid = artifact.artifact_id
    return [
        Failure(FailureCode.WORKSPACE_MANIFEST_CONTRACT_MISMATCH, message, artifact_id=aid, details=details)
        for message, details in _host_mismatches(manifest, binding, adapter) + _delivery_mismatches(manifest, expected)
    ]


_Mismatch = tuple[str, dict[str, Any]]


def _host_mismatches(manifest: dict[str, Any], binding: HostBinding, adapter: HostAdapter) -> list[_Mismatch]:
    """How the manifest's harness, adapter, capabilities and symlink attestation differ from the run's."""
    mismatches: list[_Mismatch] = []
    if manifest.get("harness") != binding.harness:
        named = manifest.get("harness")
        mismatches.append((f"workspace manifest names harness {named!r}, the run is bound to {binding.harness!r}", {}))
    if manifest.get("adapter") != {"id": adapter.id, "version": adapter.version}:
        mismatches.append((f"workspace manifest must name adapter {adapter.key}", {}))
    capabilities = manifest.get("capabilities")
    if not _is_strings(capabilities) or sorted(capabilities) != list(binding.capabilities):
        mismatches.append(
            (
                "workspace manifest capabilities differ from the run's host binding",
                {"expected": list(binding.capabilities)},
            )
        )
    if manifest.get("symlink_free") is not True:
        mismatches.append(("the workspace must be attested symlink-free", {}))
    return mismatches


def _delivery_mismatches(manifest: dict[str, Any], expected: list[dict[str, str]]) -> list[_Mismatch]:
    """How the manifest's ``delivered`` rows differ from the release's asset contract ``expected``."""
    delivered = manifest.get("delivered")
    rows = [d for d in delivered if isinstance(d, dict)] if isinstance(delivered, list) else []
    named = [d for d in rows if isinstance(d.get("kind"), str) and isinstance(d.get("asset"), str)]
    by_key: dict[tuple[str, str], dict[str, Any]] = {(d["kind"], d["asset"]): d for d in named}
    mismatches: list[_Mismatch] = []
    if not isinstance(delivered, list) or len(by_key) != len(delivered):
        mismatches.append(
            ("an asset is attested twice, or a delivered row is not an object naming its kind and asset", {})
        )
    wanted = {(e["kind"], e["asset"]): e for e in expected}
    for (kind, asset), row in sorted(wanted.items()):
        got = by_key.get((kind, asset))
        if got is None:
            mismatches.append((f"{kind} asset {asset!r} was not delivered", {"expected": row}))
        elif got.get("path") != row["path"]:
            mismatches.append((f"{kind} asset {asset!r} must be delivered to {row['path']}", {"expected": row}))
        elif got.get("sha256") != row["sha256"]:
            mismatches.append((f"{kind} asset {asset!r} was delivered with different bytes", {"expected": row}))
    for extra_kind, extra_asset in sorted(set(by_key) - set(wanted)):
        mismatches.append((f"{extra_kind} asset {extra_asset!r} is not part of this release's workspace", {}))
    return mismatches


def _is_strings(value: Any) -> TypeGuard[list[str]]:
    """``value`` is a JSON array of strings only."""
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def check_output_attestations(step: StepDefinition, artifacts: Sequence[SubmittedArtifact]) -> list[Failure]:
    """Every output was written where declared and read back, symlink-free, unchanged."""
    failures: list[Failure] = []
    for artifact in artifacts:
        output = step.output(artifact.artifact_id)
        if output is None:
            continue
        aid = artifact.artifact_id
        att = artifact.attestation
        if att is None:
            failures.append(
                Failure(
                    FailureCode.OUTPUT_ATTESTATION_REQUIRED,
                    f"artifact {aid!r} needs an attestation: write it to {output.path}, read it back "
                    "and attest path, sha256, size, symlink_free and write",
                    artifact_id=aid,
                )
            )
            continue
        problems = []
        if att["path"] != output.path:
            problems.append(f"attested path {att['path']} is not the declared {output.path}")
        if att["sha256"] != artifact.sha256 or att["size"] != len(artifact.data):
            problems.append("the bytes read back differ from the bytes sent")
        if att["symlink_free"] is not True:
            problems.append("the output path was not read back symlink-free")
        if att["write"] not in WRITES_ALLOWED[output.write_policy]:
            problems.append(f"write {att['write']!r} breaks the write policy {output.write_policy!r}")
        failures += [
            Failure(
                FailureCode.OUTPUT_ATTESTATION_MISMATCH,
                f"artifact {aid!r}: {problem}",
                artifact_id=aid,
                path=att["path"],
            )
            for problem in problems
        ]
    return failures
