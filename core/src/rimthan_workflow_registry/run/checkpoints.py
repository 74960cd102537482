"""Checkpoints: the signed, stateless record of where a run is.

A checkpoint binds sequence, workflow, release (id + manifest digest), step,
confirmed-state digest, parent checkpoint digest, artifact and validator
receipts, host binding and issue time. It never holds confirmed-state values.
Claims are compact (receipts are the part that grows with a run) and checked
against a closed schema after the HMAC verifies, so a validly signed token of
the wrong shape is still refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from jsonschema import Draft202012Validator

from rimthan_workflow_registry.errors import FailureCode, TokenError
from rimthan_workflow_registry.run.tokens import CHECKPOINT_TYPE, CheckpointKeyring, token_digest

_DIGEST = {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"}
_STR = {"type": "string", "minLength": 1, "maxLength": 128}
_STRS = {"type": "array", "items": _STR, "uniqueItems": True}

CLAIMS_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["seq", "workflow", "release", "step", "state", "parent", "artifacts", "validators", "host", "iat"],
    "properties": {
        "seq": {"type": "integer", "minimum": 1},
        "workflow": {
            "type": "object",
            "additionalProperties": False,
            "required": ["id", "version"],
            "properties": {"id": _STR, "version": _STR},
        },
        "release": {
            "type": "object",
            "additionalProperties": False,
            "required": ["id", "manifest_digest"],
            "properties": {"id": _STR, "manifest_digest": _DIGEST},
        },
        "step": _STR,
        "state": _DIGEST,
        "parent": {"oneOf": [{"type": "null"}, _DIGEST]},
        # receipts grow with the run: their entries are checked by _receipt_problem, not jsonschema
        "artifacts": {"type": "object"},
        "validators": {"type": "object"},
        "host": {
            "type": "object",
            "additionalProperties": False,
            "required": ["harness", "adapter_version", "capabilities", "validator_capabilities"],
            "properties": {
                "harness": _STR,
                "adapter_version": _STR,
                "capabilities": _STRS,
                "validator_capabilities": _STRS,
            },
        },
        "iat": {"type": "integer", "minimum": 0},
        # only on a checkpoint a failed validation round issued: how many findings the reports gave
        "findings": {"type": "integer", "minimum": 0},
    },
}
_CLAIMS = Draft202012Validator(CLAIMS_SCHEMA)
_HEX64 = re.compile(r"[0-9a-f]{64}")


def _receipt_problem(claims: Mapping[str, Any]) -> str | None:
    """Shape of every receipt: artifacts ``[sha256-hex, size>=0]``, validators ``["pass", sha256-hex]``.

    The equivalent JSON Schema (prefixItems per entry) costs milliseconds per
    call on a long run's checkpoint; this loop checks the same shape directly.
    """
    for name, receipt in claims["artifacts"].items():
        if not (
            isinstance(receipt, list)
            and len(receipt) == 2
            and isinstance(receipt[0], str)
            and _HEX64.fullmatch(receipt[0])
            and type(receipt[1]) is int
            and receipt[1] >= 0
        ):
            return f"artifact receipt {name!r} is malformed"
    for name, receipt in claims["validators"].items():
        if not (
            isinstance(receipt, list)
            and len(receipt) == 2
            and receipt[0] == "pass"
            and isinstance(receipt[1], str)
            and _HEX64.fullmatch(receipt[1])
        ):
            return f"validator receipt {name!r} is malformed"
    return None


@dataclass(frozen=True)
class HostBinding:
    """The host a run is bound to: only harness, adapter version and sorted capabilities."""

    harness: str
    adapter_version: str
    capabilities: tuple[str, ...]
    validator_capabilities: tuple[str, ...]

    @classmethod
    def of(cls, harness: str, adapter_version: str, capabilities: Any, validator_capabilities: Any) -> HostBinding:
        return cls(harness, adapter_version, tuple(sorted(capabilities)), tuple(sorted(validator_capabilities)))

    def to_json(self) -> dict[str, Any]:
        return {
            "harness": self.harness,
            "adapter_version": self.adapter_version,
            "capabilities": list(self.capabilities),
            "validator_capabilities": list(self.validator_capabilities),
        }


@dataclass(frozen=True)
class ArtifactReceipt:
    sha256: str
    size: int


@dataclass(frozen=True)
class ValidatorReceipt:
    """A validator that passed, and the digest of the inputs it passed on."""

    outcome: str
    input_digest: str  # sha256:<hex>


@dataclass(frozen=True)
class Checkpoint:
    sequence: int
    workflow_id: str
    workflow_version: str
    release_id: str
    manifest_digest: str
    step_id: str
    state_digest: str
    parent_digest: str | None
    artifacts: Mapping[str, ArtifactReceipt] = field(default_factory=dict)
    validators: Mapping[str, ValidatorReceipt] = field(default_factory=dict)
    host: HostBinding = field(default_factory=lambda: HostBinding("", "", (), ()))
    issued_at: int = 0
    failed_findings: int | None = None  # set only by a failed validation round, for the offline audit

    def to_claims(self) -> dict[str, Any]:
        claims = {
            "seq": self.sequence,
            "workflow": {"id": self.workflow_id, "version": self.workflow_version},
            "release": {"id": self.release_id, "manifest_digest": self.manifest_digest},
            "step": self.step_id,
            "state": self.state_digest,
            "parent": self.parent_digest,
            "artifacts": {k: [r.sha256, r.size] for k, r in sorted(self.artifacts.items())},
            "validators": {
                k: [r.outcome, r.input_digest.removeprefix("sha256:")] for k, r in sorted(self.validators.items())
            },
            "host": self.host.to_json(),
            "iat": self.issued_at,
        }
        if self.failed_findings is not None:
            claims["findings"] = self.failed_findings
        return claims

    @classmethod
    def from_claims(cls, claims: Mapping[str, Any]) -> Checkpoint:
        error = next(_CLAIMS.iter_errors(dict(claims)), None)
        problem = error.message if error is not None else _receipt_problem(claims)
        if problem is not None:
            raise TokenError(FailureCode.CHECKPOINT_INVALID, f"the checkpoint's claims are malformed ({problem})")
        host = claims["host"]
        return cls(
            sequence=claims["seq"],
            workflow_id=claims["workflow"]["id"],
            workflow_version=claims["workflow"]["version"],
            release_id=claims["release"]["id"],
            manifest_digest=claims["release"]["manifest_digest"],
            step_id=claims["step"],
            state_digest=claims["state"],
            parent_digest=claims["parent"],
            artifacts={k: ArtifactReceipt(v[0], v[1]) for k, v in claims["artifacts"].items()},
            validators={k: ValidatorReceipt(v[0], "sha256:" + v[1]) for k, v in claims["validators"].items()},
            host=HostBinding(
                host["harness"],
                host["adapter_version"],
                tuple(host["capabilities"]),
                tuple(host["validator_capabilities"]),
            ),
            issued_at=claims["iat"],
            failed_findings=claims.get("findings"),
        )

    def successor(self, token: str, *, issued_at: int, **changes: Any) -> Checkpoint:
        """The next checkpoint: sequence + 1, parent = digest of ``token``; a findings count is never inherited."""
        return replace(
            self,
            sequence=self.sequence + 1,
            parent_digest=token_digest(token),
            issued_at=issued_at,
            **{"failed_findings": None, **changes},
        )


@dataclass(frozen=True)
class IssuedCheckpoint:
    checkpoint: Checkpoint
    token: str

    @property
    def digest(self) -> str:
        return token_digest(self.token)


def issue_checkpoint(keyring: CheckpointKeyring, checkpoint: Checkpoint) -> IssuedCheckpoint:
    return IssuedCheckpoint(checkpoint, keyring.sign(checkpoint.to_claims(), CHECKPOINT_TYPE))


def verify_checkpoint(keyring: CheckpointKeyring, token: str) -> IssuedCheckpoint:
    """A checkpoint this server issued, unaltered, or ``TokenError``."""
    claims = keyring.verify(token, CHECKPOINT_TYPE, FailureCode.CHECKPOINT_INVALID)
    return IssuedCheckpoint(Checkpoint.from_claims(claims), token)
