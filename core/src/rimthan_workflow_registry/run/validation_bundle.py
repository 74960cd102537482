"""Validation bundles and validator reports.

``prepare_step_validation`` binds what it checked (release, step, checkpoint,
artifact receipts, validators) into an HMAC-signed bundle; the harness hands
it back with its validators' reports, and ``submit_step_validation`` accepts
reports only against exactly that binding. A validator whose pass receipt
already covers the identical input digest is reused, not re-run. The reports
together are at most ``MAX_VALIDATOR_REPORTS_BYTES`` as JSON
(:func:`check_reports_size`), so every submit a run needs fits every transport.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rimthan_workflow_registry.canonical import digest_value
from rimthan_workflow_registry.errors import FailureCode, TokenError, WorkflowProtocolError
from rimthan_workflow_registry.limits import MAX_VALIDATOR_REPORTS_BYTES
from rimthan_workflow_registry.protocol_names import BUNDLE_FIELDS
from rimthan_workflow_registry.release.catalogue import StepDefinition, WorkflowDefinition
from rimthan_workflow_registry.run.checkpoints import Checkpoint, HostBinding, IssuedCheckpoint
from rimthan_workflow_registry.run.receipts import ArtifactReceipt, ArtifactTable, ValidatorReceipt, ValidatorTable
from rimthan_workflow_registry.run.tokens import BUNDLE_TYPE, CheckpointKeyring


@dataclass(frozen=True)
class ValidatorSummary:
    validator_id: str
    version: str
    instruction_digest: str
    input_digest: str
    subagent: str
    report_required: bool

    @property
    def key(self) -> str:
        return f"{self.validator_id}@{self.version}"

    def to_json(self) -> dict[str, Any]:
        return {
            "validator_id": self.validator_id,
            "version": self.version,
            "instruction_digest": self.instruction_digest,
            "input_digest": self.input_digest,
            "subagent": self.subagent,
            "report_required": self.report_required,
        }


def input_digest(receipts: Mapping[str, ArtifactReceipt]) -> str:
    """Digest of the artifact digest set a validator judges."""
    return digest_value({k: r.sha256 for k, r in sorted(receipts.items())})


def step_validated(step: StepDefinition, checkpoint: Checkpoint) -> bool:
    """Whether ``checkpoint`` holds current receipts for every output and validator of ``step``.

    An ungated step is trivially validated. The engine advances a gated step
    only when this holds; the offline audit uses it to tell what a run waits for.
    """
    if any(o.id not in checkpoint.artifacts for o in step.outputs):
        return False
    digest = input_digest({o.id: checkpoint.artifacts[o.id] for o in step.outputs})
    return all((r := checkpoint.validators.get(k)) is not None and r.input_digest == digest for k in step.validators)


def receipts_on_entry(
    step: StepDefinition,
    artifacts: Mapping[str, ArtifactReceipt],
    validators: Mapping[str, ValidatorReceipt],
) -> dict[str, Any]:
    """Receipts a checkpoint keeps when a run enters ``step``: none of ``step``'s own.

    Receipts are bound to the visit that earned them. A workflow may loop back
    to a gated step; dropping that step's output and validator receipts on
    every entry means only a submit made during the current visit can advance
    it, never receipts left over from an earlier pass through the loop.
    """
    return {
        "artifacts": ArtifactTable.of(artifacts).without(o.id for o in step.outputs),
        "validators": ValidatorTable.of(validators).without(step.validators),
    }


def validator_summaries(
    workflow: WorkflowDefinition,
    step: StepDefinition,
    checkpoint: Checkpoint,
    receipts: Mapping[str, ArtifactReceipt],
    file_digest: Callable[[str], str],
) -> list[ValidatorSummary]:
    """Every validator of ``step``; a report is required unless a pass receipt covers these exact inputs."""
    digest = input_digest(receipts)
    out = []
    for key in step.validators:
        validator = workflow.validator(key)
        assert validator is not None  # catalogue rules guarantee it
        prior = checkpoint.validators.get(key)
        reusable = prior is not None and prior.outcome == "pass" and prior.input_digest == digest
        out.append(
            ValidatorSummary(
                validator.id,
                validator.version,
                file_digest(validator.instruction),
                digest,
                validator.subagent,
                report_required=not reusable,
            )
        )
    return out


def issue_bundle(
    keyring: CheckpointKeyring,
    issued: IssuedCheckpoint,
    step: StepDefinition,
    receipts: Mapping[str, ArtifactReceipt],
    summaries: Sequence[ValidatorSummary],
    issued_at: int,
) -> dict[str, Any]:
    cp = issued.checkpoint
    claims = {
        "workflow": {"id": cp.workflow_id, "version": cp.workflow_version},
        "release": {"id": cp.release_id, "manifest_digest": cp.manifest_digest},
        "manifest_digest": cp.manifest_digest,
        "step_id": step.id,
        "checkpoint_digest": issued.digest,
        "artifacts": {k: {"sha256": r.sha256, "size": r.size} for k, r in sorted(receipts.items())},
        "validators": [s.to_json() for s in summaries],
        "issued_at": issued_at,
        "key_id": keyring.signing_key_id,
    }
    token = keyring.sign({**claims, "iat": issued_at}, BUNDLE_TYPE)
    return {**claims, "validation_token": token}


@dataclass(frozen=True)
class VerifiedBundle:
    step_id: str
    receipts: Mapping[str, ArtifactReceipt]
    validators: tuple[ValidatorSummary, ...]


def verify_bundle(keyring: CheckpointKeyring, bundle: Mapping[str, Any], issued: IssuedCheckpoint) -> VerifiedBundle:
    """The bundle is exactly what this server signed, for this checkpoint and step."""
    claims = keyring.verify(bundle.get("validation_token", ""), BUNDLE_TYPE, FailureCode.VALIDATION_BUNDLE_INVALID)
    claims.pop("iat", None)
    if {k: bundle.get(k) for k in BUNDLE_FIELDS} != claims or set(bundle) != {*BUNDLE_FIELDS, "validation_token"}:
        raise TokenError(
            FailureCode.VALIDATION_BUNDLE_INVALID,
            "the validation bundle differs from what the server signed; send it back unmodified",
        )
    cp = issued.checkpoint
    if (
        bundle["checkpoint_digest"] != issued.digest
        or bundle["step_id"] != cp.step_id
        or bundle["manifest_digest"] != cp.manifest_digest
    ):
        raise TokenError(
            FailureCode.VALIDATION_BUNDLE_INVALID,
            "the validation bundle was issued for another checkpoint; prepare validation again",
        )
    receipts = {k: ArtifactReceipt(v["sha256"], v["size"]) for k, v in bundle["artifacts"].items()}
    summaries = tuple(ValidatorSummary(**v) for v in bundle["validators"])
    return VerifiedBundle(bundle["step_id"], receipts, summaries)


_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))  # built once: json.dumps builds one per call


def reports_size(reports: Sequence[Mapping[str, Any]]) -> int:
    """The reports' size as compact JSON in UTF-8: their RFC 8785 canonical length (they hold no numbers).

    The C encoder, not the canonicaliser: nothing else serialises the reports,
    and this costs 3-7 microseconds on a real submit (about 2% of a tools/call
    in process). A lone surrogate (which only a refused call holds) counts its
    three bytes.
    """
    return len(_COMPACT.encode(reports).encode("utf-8", "surrogatepass"))


def reports_size_problem(reports: Sequence[Mapping[str, Any]]) -> str | None:
    """Why ``reports`` are too large for one submit, in words a model can act on; ``None`` if they fit."""
    size = reports_size(reports)
    if size <= MAX_VALIDATOR_REPORTS_BYTES:
        return None
    return f"the validator reports are {size} bytes as JSON, past the {MAX_VALIDATOR_REPORTS_BYTES} one submit carries"


def check_reports_size(reports: Sequence[Mapping[str, Any]]) -> None:
    """Refuse (``invalid_arguments``, at ``/reports``) reports past :data:`MAX_VALIDATOR_REPORTS_BYTES`."""
    problem = reports_size_problem(reports)
    if problem is not None:
        advice = "report each problem once, in a sentence or two"
        raise WorkflowProtocolError(FailureCode.INVALID_ARGUMENTS, f"{problem}: {advice}", path="/reports")


def check_reports(
    bundle: VerifiedBundle, checkpoint: Checkpoint, reports: Sequence[Mapping[str, Any]]
) -> tuple[dict[str, str], list[str], list[dict[str, Any]]]:
    """Verify the report set against the bundle.

    Returns (passed validator key -> input digest, failed validator keys,
    findings). Missing, extra, duplicate, stale or host-mismatched reports
    raise ``WorkflowProtocolError``.
    """
    required = {s.key: s for s in bundle.validators if s.report_required}
    keys = [f"{r['validator_id']}@{r['version']}" for r in reports]
    duplicates = sorted(k for k, n in Counter(keys).items() if n > 1)
    if duplicates:
        raise WorkflowProtocolError(FailureCode.REPORT_SET_MISMATCH, f"duplicate reports for {duplicates}")
    missing, extra = sorted(set(required) - set(keys)), sorted(set(keys) - set(required))
    if missing or extra:
        raise WorkflowProtocolError(
            FailureCode.REPORT_SET_MISMATCH,
            f"reports must cover exactly the validators the bundle requires; missing {missing}, not expected {extra}",
            details={"missing": missing, "extra": extra},
        )
    passed: dict[str, str] = {}
    for summary in bundle.validators:
        if not summary.report_required:
            prior = checkpoint.validators.get(summary.key)
            if prior is None or prior.input_digest != summary.input_digest:
                raise WorkflowProtocolError(
                    FailureCode.REPORT_STALE, f"validator {summary.key} has no pass receipt for these inputs"
                )
            passed[summary.key] = summary.input_digest
    expected_inputs = {k: r.sha256 for k, r in bundle.receipts.items()}
    failed: list[str] = []
    findings: list[dict[str, Any]] = []
    for report in reports:
        summary = required[f"{report['validator_id']}@{report['version']}"]
        _check_report_binding(report, summary, expected_inputs, checkpoint.host)
        _check_report_verdict(report, summary.key)
        if report["outcome"] == "pass":
            passed[summary.key] = summary.input_digest
        else:
            failed.append(summary.key)
            findings += [{"validator": summary.key, **f} for f in report["findings"]]
            if not report["findings"]:
                findings.append(
                    {"validator": summary.key, "severity": "error", "message": "the validator failed without findings"}
                )
    return passed, failed, findings


def _check_report_verdict(report: Mapping[str, Any], key: str) -> None:
    """A pass carrying an ``error`` finding says two things (an error fails the validator): refuse, never pick one."""
    errors = sum(1 for f in report["findings"] if f["severity"] == "error")
    if report["outcome"] == "pass" and errors:
        raise WorkflowProtocolError(
            FailureCode.REPORT_CONTRADICTORY,
            f"report {key} says pass but carries {errors} error finding(s); an error fails the validator",
        )


def _check_report_binding(
    report: Mapping[str, Any], summary: ValidatorSummary, inputs: Mapping[str, str], host: HostBinding
) -> None:
    key = summary.key
    if report["instruction_digest"] != summary.instruction_digest:
        raise WorkflowProtocolError(
            FailureCode.REPORT_STALE, f"report {key} was produced from another instruction; re-run the validator"
        )
    if dict(report["input_artifacts"]) != dict(inputs):
        raise WorkflowProtocolError(
            FailureCode.REPORT_STALE, f"report {key} judged other artifact bytes than the bundle binds"
        )
    by = report["validated_by"]
    if by["harness"] != host.harness or by["adapter_version"] != host.adapter_version:
        raise WorkflowProtocolError(
            FailureCode.REPORT_HOST_MISMATCH,
            f"report {key} comes from {by['harness']}@{by['adapter_version']}, the run is "
            "bound "
            f"to {host.harness}@{host.adapter_version}",
        )
