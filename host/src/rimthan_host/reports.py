"""Validator reports: a verdict bound to the validator's instruction and the exact artifacts it read.

The validation bundle names each validator to run with the SHA-256 of its
instruction; the host checks that the step's instruction text hashes to it
(so the verdict is about the instruction the verifier meant), then binds the
report to the artifact digests it validated. Findings past what the verifier
takes (:func:`findings_problem`) are refused before anything is sent.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

from rimthan_workflow_registry.canonical import digest_bytes
from rimthan_workflow_registry.limits import MAX_REPORT_FINDINGS
from rimthan_workflow_registry.run import reports_size_problem

from .project_files import WrittenFile
from .protocol import HarnessError, HostProfile
from .result_parts import validator_key as validator_key  # (re-exported: where the bridge and the session take it)

_REPORT_POINTER = re.compile(r"^/reports/(\d+)(/|$)")
_FINDING_SHAPE = 'a finding is {"severity": "error" or "warning", "message": "...", optionally "artifact_id": "..."}'


def validator_payload(step: Mapping[str, Any], summary: Mapping[str, Any]) -> Mapping[str, Any]:
    """The step's payload for a validator the bundle names, its instruction checked against the bundle."""
    payload: Mapping[str, Any] | None = next(
        (v for v in step["validators"] if v["id"] == summary["validator_id"] and v["version"] == summary["version"]),
        None,
    )
    if payload is None:
        raise HarnessError(f"the bundle names validator {summary['validator_id']} the step does not list")
    text = payload["instruction"]["text"]
    if digest_bytes(text.encode("utf-8")) != summary["instruction_digest"]:
        raise HarnessError(f"validator {summary['validator_id']} instruction does not match the bundle digest")
    return payload


def validator_report(
    summary: Mapping[str, Any],
    outcome: str,
    findings: Sequence[Mapping[str, Any]],
    artifacts: Sequence[WrittenFile],
    host: HostProfile,
) -> dict[str, Any]:
    """One ``report`` for ``submit_step_validation``."""
    if outcome not in ("pass", "fail"):
        raise HarnessError(f"a verdict is pass or fail, not {outcome!r}")
    return {
        "validator_id": summary["validator_id"],
        "version": summary["version"],
        "outcome": outcome,
        "instruction_digest": summary["instruction_digest"],
        "input_artifacts": {a.artifact_id: a.sha256 for a in artifacts},
        "findings": [dict(f) for f in findings],
        "validated_by": {"harness": host.harness, "adapter_version": host.adapter_version},
    }


def findings_problem(
    outcome: str, findings: Sequence[Mapping[str, Any]], reports: Sequence[Mapping[str, Any]]
) -> str | None:
    """Why the verifier would refuse a verdict's ``findings`` (one that is no finding, an error in a pass, too many,
    one too long), or the round's ``reports`` with it (past ``MAX_VALIDATOR_REPORTS_BYTES`` together); ``None`` if
    it takes them."""
    if len(findings) > MAX_REPORT_FINDINGS:
        return f"{len(findings)} findings, past the {MAX_REPORT_FINDINGS} one verdict may carry"
    for number, finding in enumerate(findings, 1):
        problem = _finding_problem(number, finding)
        if problem is not None:
            return problem
    if outcome == "pass" and any(f.get("severity") == "error" for f in findings):
        return "a pass carries an error finding (an error fails the validator): send fail, or make it a warning"
    return reports_size_problem(reports)


@cache
def _finding_check() -> Any:
    """A checker of the verifier's ``finding`` contract, made on first use (``rimthan-host --help`` loads no
    jsonschema: ``test_host_cli_imports.py``)."""
    from rimthan_workflow_mcp.contract_schemas import FINDING
    from rimthan_workflow_registry.jsonschema_formats import Draft202012Validator

    return Draft202012Validator(FINDING)


def _finding_problem(number: int, finding: object) -> str | None:
    """Why finding ``number`` is not one the verifier takes (its ``finding`` contract), or ``None``."""
    if not isinstance(finding, Mapping):
        return f"finding {number} is a {type(finding).__name__}, not an object; {_FINDING_SHAPE}"
    error = next(iter(_finding_check().iter_errors(finding)), None)
    if error is None:
        return None
    where = "".join(f"/{part}" for part in error.absolute_path)
    if error.validator == "maxLength":  # which bound, never the over-long text echoed back
        subject = f"finding {number}" if where == "/message" else f"finding {number}{where}"
        return f"{subject} is {len(error.instance)} characters, past the {error.validator_value} a finding may hold"
    return f"finding {number}{where}: {error.message}; {_FINDING_SHAPE}"


def refused_report(error: Mapping[str, Any], summaries: Sequence[Mapping[str, Any]]) -> str | None:
    """The validator (``id@version``) whose report a submit refusal points at; None if it names no single one.

    Reports are sent in the order of ``summaries``; a refused argument's JSON
    pointer (``/reports/<i>/...``) says which one the verifier refused.
    """
    match = _REPORT_POINTER.match(str(error.get("path") or ""))
    if match is None or int(match.group(1)) >= len(summaries):
        return None
    return validator_key(summaries[int(match.group(1))])
