"""The step payload: everything a harness needs to perform one step.

Built from verified release bytes only: the exact step definition, its
instruction, the host assets with their project-local install paths (at
setup), the bound host adapter, validator instructions and the immutable
resource URIs of every file referenced, so a harness can re-read any of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from rimthan_workflow_registry.canonical import DIGEST_PREFIX, CanonicalParts
from rimthan_workflow_registry.protocol_names import SETUP_STEP_ID
from rimthan_workflow_registry.release.catalogue import HostAdapter, StepDefinition, WorkflowDefinition

if TYPE_CHECKING:
    from rimthan_workflow_registry.run.checkpoints import Checkpoint

RESOURCE_SCHEME = "rimthan"


class ReleaseReader(Protocol):
    @property
    def manifest_digest(self) -> str: ...

    def read_file(self, path: str) -> bytes: ...

    def file_entry(self, path: str) -> Any: ...

    def holds_in_memory(self, path: str) -> bool: ...


def release_file_uri(manifest_digest: str, path: str) -> str:
    """Immutable URI of a release file: the manifest digest is part of it."""
    return f"{RESOURCE_SCHEME}://releases/{manifest_digest.removeprefix(DIGEST_PREFIX)}/{path}"


def _asset_ref(
    release: ReleaseReader, *, asset_id: str, kind: str, path: str, install_path: str | None = None
) -> dict[str, Any]:
    entry = release.file_entry(path)
    ref = {
        "id": asset_id,
        "kind": kind,
        "uri": release_file_uri(release.manifest_digest, path),
        "path": path,
        "sha256": entry.sha256,
        "media_type": entry.media_type,
        "text": release.read_file(path).decode("utf-8"),
    }
    if install_path is not None:
        ref["install_path"] = install_path
    return ref


def build_step_payload(
    release: ReleaseReader,
    workflow: WorkflowDefinition,
    step: StepDefinition,
    adapter: HostAdapter,
    checkpoint: Checkpoint | None,
) -> dict[str, Any]:
    return _with_inputs(_release_constant(release, workflow, step, adapter), _inputs(step, checkpoint))


# A step's release-constant payload part, with the definitions it was built from (identity decides reuse).
_Kept = tuple[WorkflowDefinition, StepDefinition, HostAdapter, dict[str, Any]]


class StepPayloads:
    """The step payloads of one release; each step's release-constant part built once, with its RFC 8785 text.

    Everything in a payload but ``inputs`` (the checkpoint's receipts) depends
    only on the release, the workflow, the step and the host adapter. That part
    is kept, and its values are kept in :attr:`canonical`, when every file it
    quotes is held in memory by the release (a file read from disk on each call
    stays read, and checked, on each call). Kept values are shared by every
    result that carries them: read-only. A step whose checkpoint holds none of
    its inputs gets the kept payload itself (its ``inputs`` is ``[]``), one kept part.
    """

    def __init__(self, release: ReleaseReader) -> None:
        self.release = release
        self.canonical = CanonicalParts()
        self._kept: dict[tuple[str, str, str], _Kept] = {}

    def payload(
        self, workflow: WorkflowDefinition, step: StepDefinition, adapter: HostAdapter, checkpoint: Checkpoint | None
    ) -> dict[str, Any]:
        """What :func:`build_step_payload` returns, its release-constant values shared when they can be."""
        inputs = _inputs(step, checkpoint)
        constant = self._constant(workflow, step, adapter)
        return constant if not inputs else _with_inputs(constant, inputs)

    def _constant(self, workflow: WorkflowDefinition, step: StepDefinition, adapter: HostAdapter) -> dict[str, Any]:
        kept = self._kept.get((workflow.key, step.id, adapter.key))
        if kept is not None and kept[0] is workflow and kept[1] is step and kept[2] is adapter:
            return kept[3]
        constant = _release_constant(self.release, workflow, step, adapter)
        if all(self.release.holds_in_memory(path) for path in _quoted_files(constant)):
            for value in constant.values():
                if isinstance(value, (dict, list)) and value is not constant["inputs"]:
                    self.canonical.keep(value)
            self.canonical.keep(constant)  # a step that takes no inputs: the whole payload is one kept part
            self._kept[(workflow.key, step.id, adapter.key)] = (workflow, step, adapter, constant)
        return constant


def _quoted_files(constant: dict[str, Any]) -> list[str]:
    """The release files whose text ``constant`` carries."""
    refs = [constant["instruction"], *constant["host_assets"], *(v["instruction"] for v in constant["validators"])]
    return [ref["path"] for ref in refs]


def _inputs(step: StepDefinition, checkpoint: Checkpoint | None) -> list[dict[str, Any]]:
    """The step's inputs the checkpoint holds receipts for, with their digests."""
    receipts = checkpoint.artifacts if checkpoint is not None else {}
    return [{"artifact_id": a, "sha256": receipts[a].sha256} for a in step.inputs if a in receipts]


def _with_inputs(constant: dict[str, Any], inputs: list[dict[str, Any]]) -> dict[str, Any]:
    return {key: inputs if key == "inputs" else value for key, value in constant.items()}


def _release_constant(
    release: ReleaseReader, workflow: WorkflowDefinition, step: StepDefinition, adapter: HostAdapter
) -> dict[str, Any]:
    host_assets = []
    if step.id == SETUP_STEP_ID:
        for asset_id in step.host_assets:
            asset = workflow.asset(asset_id)
            assert asset is not None
            host_assets.append(
                _asset_ref(
                    release,
                    asset_id=asset.id,
                    kind=asset.kind,
                    path=asset.file,
                    install_path=adapter.install_path(asset.kind, asset.id),
                )
            )
        host_assets.append(
            _asset_ref(
                release,
                asset_id=adapter.id,
                kind="adapter",
                path=adapter.instruction,
                install_path=adapter.install_path("adapter", adapter.id),
            )
        )
    validators: list[dict[str, Any]] = []
    for key in step.validators:
        validator = workflow.validator(key)
        assert validator is not None
        validators.append(
            {
                "id": validator.id,
                "version": validator.version,
                "key": validator.key,
                "subagent": validator.subagent,
                "required_capabilities": list(validator.required_capabilities),
                "instruction": _asset_ref(release, asset_id=validator.id, kind="validator", path=validator.instruction),
            }
        )
    outputs = [
        {
            "id": o.id,
            "path": o.path,
            "media_type": o.media_type,
            "max_bytes": o.max_bytes,
            "write_policy": o.write_policy,
            **(
                {"schema": o.schema, "schema_uri": release_file_uri(release.manifest_digest, o.schema)}
                if o.schema
                else {}
            ),
        }
        for o in step.outputs
    ]
    instruction = _asset_ref(release, asset_id=step.id, kind="instruction", path=step.instruction)
    referenced = [
        instruction["path"],
        *(a["path"] for a in host_assets),
        *(v["instruction"]["path"] for v in validators),
        *(o["schema"] for o in outputs if "schema" in o),
        workflow.confirmed_state_schema,
    ]
    return {
        "id": step.id,
        "title": step.title,
        "gated": step.gated,
        "terminal": step.terminal,
        "definition": dict(step.definition),
        "instruction": instruction,
        "host_assets": host_assets,
        "host_adapter": adapter.to_json(),
        "outputs": outputs,
        "inputs": [],
        "validators": validators,
        "resources": sorted({release_file_uri(release.manifest_digest, p) for p in referenced}),
    }
