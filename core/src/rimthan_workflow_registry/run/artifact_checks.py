"""Deterministic artifact checks for ``prepare_step_validation``.

Every check appends closed :class:`Failure` objects rather than stopping, so a
harness sees every problem with its artifacts in one round trip. Nothing here
judges meaning: that is what semantic validators are for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from rimthan_workflow_registry.canonical import sha256_hex
from rimthan_workflow_registry.errors import FailureCode, RegistryError
from rimthan_workflow_registry.failures import Failure
from rimthan_workflow_registry.release.catalogue import StepDefinition
from rimthan_workflow_registry.run.checkpoints import ArtifactReceipt, Checkpoint
from rimthan_workflow_registry.strict_json import NOT_JSON_PREFIX, parse_strict_json

if TYPE_CHECKING:
    from rimthan_workflow_registry.release.catalogue_schema import CatalogueSchema

MAX_SCHEMA_FAILURES_PER_ARTIFACT = 20


@dataclass(frozen=True)
class SubmittedArtifact:
    """One artifact as the harness sent it, with its exact bytes.

    Its SHA-256 is computed once, when first asked for (the output attestation's
    check and the receipt both compare it): the bytes never change, so every
    comparison still sees the digest of exactly the bytes sent.
    """

    artifact_id: str
    path: str
    media_type: str
    data: bytes
    attestation: Mapping[str, Any] | None

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> SubmittedArtifact:
        return cls(
            raw["artifact_id"], raw["path"], raw["media_type"], raw["content"].encode("utf-8"), raw.get("attestation")
        )

    @cached_property
    def sha256(self) -> str:
        return sha256_hex(self.data)

    def receipt(self) -> ArtifactReceipt:
        return ArtifactReceipt(self.sha256, len(self.data))


def check_artifact_set(step: StepDefinition, artifacts: Sequence[SubmittedArtifact]) -> list[Failure]:
    """Exactly the declared artifacts, once each."""
    failures: list[Failure] = []
    declared = {o.id for o in step.outputs}
    seen: set[str] = set()
    for artifact in artifacts:
        if artifact.artifact_id in seen:
            failures.append(
                Failure(
                    FailureCode.ARTIFACT_DUPLICATE,
                    f"artifact {artifact.artifact_id!r} is sent twice",
                    artifact_id=artifact.artifact_id,
                )
            )
        elif artifact.artifact_id not in declared:
            failures.append(
                Failure(
                    FailureCode.ARTIFACT_UNDECLARED,
                    f"step {step.id} declares no artifact {artifact.artifact_id!r}",
                    artifact_id=artifact.artifact_id,
                )
            )
        seen.add(artifact.artifact_id)
    for missing in sorted(declared - seen):
        failures.append(
            Failure(FailureCode.ARTIFACT_MISSING, f"declared artifact {missing!r} was not sent", artifact_id=missing)
        )
    if len(artifacts) != len(declared):
        failures.append(
            Failure(
                FailureCode.ARTIFACT_COUNT_MISMATCH,
                f"step {step.id} declares {len(declared)} artifact(s), {len(artifacts)} were sent",
            )
        )
    return failures


def check_artifact_contents(
    step: StepDefinition, artifacts: Sequence[SubmittedArtifact], validators: Mapping[str, CatalogueSchema]
) -> list[Failure]:
    """Path, media type, size caps and (for JSON) the declared schema."""
    failures: list[Failure] = []
    total = 0
    for artifact in artifacts:
        output = step.output(artifact.artifact_id)
        if output is None:
            continue
        aid = artifact.artifact_id
        total += len(artifact.data)
        failures += _must_be(
            FailureCode.OUTPUT_ATTESTATION_MISMATCH, aid, output.path, artifact.path, "written to ", path=artifact.path
        )
        failures += _must_be(FailureCode.MEDIA_TYPE_MISMATCH, aid, output.media_type, artifact.media_type)
        if len(artifact.data) > output.max_bytes:
            failures.append(
                Failure(
                    FailureCode.ARTIFACT_TOO_LARGE,
                    f"artifact {aid!r} is {len(artifact.data)} bytes; at most {output.max_bytes}",
                    artifact_id=aid,
                    details={"size": len(artifact.data), "max": output.max_bytes},
                )
            )
        if output.schema is not None and artifact.media_type == output.media_type:
            failures += _check_json(aid, artifact.data, validators[output.schema])
    if step.max_total_bytes is not None and total > step.max_total_bytes:
        failures.append(
            Failure(
                FailureCode.ARTIFACTS_TOTAL_TOO_LARGE,
                f"step {step.id} artifacts total {total} bytes; at most {step.max_total_bytes}",
                details={"size": total, "max": step.max_total_bytes},
            )
        )
    return failures


def parse_json_artifact(data: bytes) -> Any:
    """A JSON artifact's document, read as strictly as a release's JSON (``strict_json.parse_strict_json``).

    ``ValueError`` (reported as ``json_parse_failed``) for bytes that are not
    UTF-8 JSON, a key repeated in one object, ``NaN``/``Infinity`` (``1e999``
    too) and nesting past ``MAX_JSON_DEPTH``. Python's ``json.loads`` takes the
    first three: ``{"confidence": NaN}`` passed ``"minimum": 0, "maximum": 1``
    (every comparison with NaN is false), and of a repeated key the schema saw
    the last value while a validator reading the file may take the first.
    """
    try:
        return parse_strict_json(data, where="artifact", code=FailureCode.JSON_PARSE_FAILED)
    except RegistryError as exc:
        raise ValueError(exc.message.removeprefix(NOT_JSON_PREFIX)) from None


def _check_json(artifact_id: str, data: bytes, validator: CatalogueSchema) -> list[Failure]:
    try:
        document = parse_json_artifact(data)
    except (UnicodeDecodeError, ValueError) as exc:
        return [
            Failure(
                FailureCode.JSON_PARSE_FAILED,
                f"artifact {artifact_id!r} is not valid JSON: {exc}",
                artifact_id=artifact_id,
            )
        ]
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
    return [
        Failure(
            FailureCode.JSON_SCHEMA_FAILED,
            f"artifact {artifact_id!r}: {e.message}",
            artifact_id=artifact_id,
            pointer="/" + "/".join(str(p) for p in e.absolute_path),
        )
        for e in errors[:MAX_SCHEMA_FAILURES_PER_ARTIFACT]
    ]


def check_input_bindings(
    step: StepDefinition, checkpoint: Checkpoint, bindings: Sequence[Mapping[str, Any]]
) -> list[Failure]:
    """Each input the step reads is bound to the digest the checkpoint recorded."""
    failures: list[Failure] = []
    sent = {b["artifact_id"]: b["sha256"] for b in bindings}
    if len(sent) != len(bindings):
        failures.append(Failure(FailureCode.INPUT_BINDING_MISMATCH, "an input artifact is bound twice"))
    for extra in sorted(set(sent) - set(step.inputs)):
        failures.append(
            Failure(FailureCode.INPUT_BINDING_MISMATCH, f"step {step.id} does not read {extra!r}", artifact_id=extra)
        )
    for artifact_id in step.inputs:
        receipt = checkpoint.artifacts.get(artifact_id)
        if receipt is None:
            failures.append(
                Failure(
                    FailureCode.INPUT_BINDING_MISMATCH,
                    f"input {artifact_id!r} has no receipt in this run",
                    artifact_id=artifact_id,
                )
            )
        elif sent.get(artifact_id) != receipt.sha256:
            failures.append(
                Failure(
                    FailureCode.INPUT_BINDING_MISMATCH,
                    f"input {artifact_id!r} must be bound to sha256 {receipt.sha256}",
                    artifact_id=artifact_id,
                    details={"expected": receipt.sha256},
                )
            )
    return failures


def _must_be(
    code: FailureCode, aid: str, wanted: str, got: str, phrase: str = "", path: str | None = None
) -> list[Failure]:
    """No failure when the artifact's ``got`` is the declared ``wanted``, else one saying which it must be."""
    if got == wanted:
        return []
    return [Failure(code, f"artifact {aid!r} must be {phrase}{wanted}, not {got}", artifact_id=aid, path=path)]
