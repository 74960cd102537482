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
from typing import Any

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
    """The attested workspace matches the release's asset contract exactly."""
    aid = artifact.artifact_id
    try:
        manifest = parse_json_artifact(artifact.data)
    except (UnicodeDecodeError, ValueError):
        return []  # already reported as json_parse_failed
    if not isinstance(manifest, dict):
        return []

    def mismatch(message: str, **details: Any) -> Failure:
        return Failure(FailureCode.WORKSPACE_MANIFEST_CONTRACT_MISMATCH, message, artifact_id=aid, details=details)

    failures: list[Failure] = []
    if manifest.get("harness") != binding.harness:
        failures.append(
            mismatch(
                f"workspace manifest names harness {manifest.get('harness')!r}, the run is bound to {binding.harness!r}"
            )
        )
    if manifest.get("adapter") != {"id": adapter.id, "version": adapter.version}:
        failures.append(mismatch(f"workspace manifest must name adapter {adapter.key}"))
    if sorted(manifest.get("capabilities") or []) != list(binding.capabilities):
        failures.append(
            mismatch(
                "workspace manifest capabilities differ from the run's host binding",
                expected=list(binding.capabilities),
            )
        )
    if manifest.get("symlink_free") is not True:
        failures.append(mismatch("the workspace must be attested symlink-free"))
    delivered = manifest.get("delivered") or []
    by_key = {(d.get("kind"), d.get("asset")): d for d in delivered if isinstance(d, dict)}
    if len(by_key) != len(delivered):
        failures.append(mismatch("an asset is attested twice"))
    wanted = {(e["kind"], e["asset"]): e for e in expected}
    for key, row in sorted(wanted.items()):
        got = by_key.get(key)
        if got is None:
            failures.append(mismatch(f"{key[0]} asset {key[1]!r} was not delivered", expected=row))
        elif got.get("path") != row["path"]:
            failures.append(mismatch(f"{key[0]} asset {key[1]!r} must be delivered to {row['path']}", expected=row))
        elif got.get("sha256") != row["sha256"]:
            failures.append(mismatch(f"{key[0]} asset {key[1]!r} was delivered with different bytes", expected=row))
    for kind, asset in sorted(set(by_key) - set(wanted), key=str):
        failures.append(mismatch(f"{kind} asset {asset!r} is not part of this release's workspace"))
    return failures


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
