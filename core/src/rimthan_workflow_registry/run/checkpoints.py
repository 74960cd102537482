"""Checkpoints: the signed, stateless record of where a run is.

A checkpoint binds sequence, workflow, release (id + manifest digest), step,
confirmed-state digest, parent checkpoint digest, artifact and validator
receipts, host binding and issue time. It never holds confirmed-state values.
Claims are compact (receipts are the part that grows with a run) and checked
against a closed schema after the HMAC verifies, so a validly signed token of
the wrong shape is still refused.
"""

from __future__ import annotations

import marshal
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from typing import Any

from rimthan_workflow_registry.errors import FailureCode, TokenError
from rimthan_workflow_registry.run.checkpoint_claims import (
    accepted_fast,
    claims_problem,
    issued_text_accepted,
    receipts_and_host_accepted,
)
from rimthan_workflow_registry.run.issued_tokens import IssuedTokens
from rimthan_workflow_registry.run.receipts import ArtifactReceipt, ArtifactTable, ValidatorReceipt, ValidatorTable
from rimthan_workflow_registry.run.token_mac import AuthenticToken, check_issued_at
from rimthan_workflow_registry.run.token_wire import claim_json, claims_payload, composed_payload, token_digest
from rimthan_workflow_registry.run.tokens import CHECKPOINT_TYPE, CheckpointKeyring

__all__ = [
    "ArtifactReceipt",
    "Checkpoint",
    "HostBinding",
    "IssuedCheckpoint",
    "ValidatorReceipt",
    "issue_checkpoint",
    "verify_checkpoint",
]


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
class Checkpoint:
    sequence: int
    workflow_id: str
    workflow_version: str
    release_id: str
    manifest_digest: str
    step_id: str
    state_digest: str
    parent_digest: str | None
    # Any mapping of receipts is accepted and kept as a table (see ``receipts``).
    artifacts: ArtifactTable = field(default_factory=ArtifactTable)
    validators: ValidatorTable = field(default_factory=ValidatorTable)
    host: HostBinding = field(default_factory=lambda: HostBinding("", "", (), ()))
    issued_at: int = 0
    failed_findings: int | None = None  # set only by a failed validation round, for the offline audit

    def __post_init__(self) -> None:
        object.__setattr__(self, "artifacts", ArtifactTable.of(self.artifacts))
        object.__setattr__(self, "validators", ValidatorTable.of(self.validators))

    def to_claims(self) -> dict[str, Any]:
        claims: dict[str, Any] = {
            "seq": self.sequence,
            "workflow": {"id": self.workflow_id, "version": self.workflow_version},
            "release": {"id": self.release_id, "manifest_digest": self.manifest_digest},
            "step": self.step_id,
            "state": self.state_digest,
            "parent": self.parent_digest,
            "artifacts": self.artifacts.claims(),
            "validators": self.validators.claims(),
            "host": self.host.to_json(),
            "iat": self.issued_at,
        }
        if self.failed_findings is not None:
            claims["findings"] = self.failed_findings
        return claims

    @classmethod
    def from_claims(cls, claims: Mapping[str, Any]) -> Checkpoint:
        """The checkpoint of well-formed ``claims``, or ``TokenError``."""
        problem = claims_problem(claims)
        if problem is not None:
            raise TokenError(FailureCode.CHECKPOINT_INVALID, f"the checkpoint's claims are malformed ({problem})")
        return cls._of_claims(claims)

    @classmethod
    def _of_claims(cls, claims: Mapping[str, Any]) -> Checkpoint:
        """The checkpoint of claims already found well-formed."""
        host = claims["host"]
        return cls._of_fields(
            {
                "sequence": claims["seq"],
                "workflow_id": claims["workflow"]["id"],
                "workflow_version": claims["workflow"]["version"],
                "release_id": claims["release"]["id"],
                "manifest_digest": claims["release"]["manifest_digest"],
                "step_id": claims["step"],
                "state_digest": claims["state"],
                "parent_digest": claims["parent"],
                "artifacts": ArtifactTable.from_claims(claims["artifacts"]),
                "validators": ValidatorTable.from_claims(claims["validators"]),
                "host": HostBinding(
                    host["harness"],
                    host["adapter_version"],
                    tuple(host["capabilities"]),
                    tuple(host["validator_capabilities"]),
                ),
                "issued_at": claims["iat"],
                "failed_findings": claims.get("findings"),
            }
        )

    @classmethod
    def _of_fields(cls, values: dict[str, Any]) -> Checkpoint:
        """``cls(**values)``: the same checkpoint, built without the generated ``__init__`` when it can be.

        A frozen dataclass's ``__init__`` sets each of the 13 fields through
        ``object.__setattr__``; with ``values`` naming exactly the fields, in
        their order, of this very class, the instance's dictionary is filled
        at once and ``__post_init__`` runs as ``__init__`` would run it (unless
        both receipt fields are already exact tables, which it would keep as
        they are): about a third fewer instructions for a checkpoint built from
        claims, and for a successor (every issue builds both). Any other
        ``values`` go to ``__init__``.
        """
        if cls is not Checkpoint or tuple(values) != _FIELD_NAMES:
            return cls(**values)
        made = object.__new__(cls)
        made.__dict__.update(values)
        if type(values["artifacts"]) is not ArtifactTable or type(values["validators"]) is not ValidatorTable:
            made.__post_init__()
        return made

    def successor(self, parent: str | IssuedCheckpoint, *, issued_at: int, **changes: Any) -> Checkpoint:
        """The next checkpoint: sequence + 1, parent = digest of the ``parent`` token; findings are never inherited."""
        moved = {
            "sequence": self.sequence + 1,
            "parent_digest": parent.digest if isinstance(parent, IssuedCheckpoint) else token_digest(parent),
            "issued_at": issued_at,
            "failed_findings": None,
            **changes,
        }
        if type(self) is not Checkpoint or not moved.keys() <= _FIELD_SET:
            return replace(self, **moved)  # its refusal (a name that is no field), or a subclass's own fields
        return Checkpoint._of_fields({name: moved.get(name, getattr(self, name)) for name in _FIELD_NAMES})


_FIELD_NAMES = tuple(f.name for f in fields(Checkpoint))  # in the order the generated __init__ sets them
_FIELD_SET = frozenset(_FIELD_NAMES)


@dataclass(frozen=True)
class IssuedCheckpoint:
    checkpoint: Checkpoint
    token: str

    @cached_property
    def digest(self) -> str:
        return token_digest(self.token)


# Receipts from which a checkpoint's payload is written table by table (below, one json.dumps is as fast).
_COMPOSED_FROM = 32
_RECEIPT_CLAIMS = ("artifacts", "validators")  # the claims holding the receipt tables, in Checkpoint's field order

# The checkpoints this process issued, with their verified form (see ``issued_tokens``).
ISSUED: IssuedTokens[IssuedCheckpoint] = IssuedTokens()


def issue_checkpoint(keyring: CheckpointKeyring, checkpoint: Checkpoint) -> IssuedCheckpoint:
    """Sign ``checkpoint``; remember the token with what a verification of its payload yields.

    That is what the full path's payload step (:func:`_payload_checkpoint`)
    computes from the exact payload signed (:func:`_verified_form`), so a later
    verification of this token that answers from :data:`ISSUED` gets what the
    full path would. Claims the full path would refuse are not remembered
    (their verification refuses them as before), and the checkpoint returned
    is then ``checkpoint`` itself.
    """
    claims = checkpoint.to_claims()
    payload = _payload(checkpoint, claims)
    token = keyring.sign_payload(payload, CHECKPOINT_TYPE)
    try:
        issued = IssuedCheckpoint(_verified_form(claims, payload), token)
    except TokenError:
        return IssuedCheckpoint(checkpoint, token)
    ISSUED.remember(issued, keyring.signing_key)
    return issued


def _payload(checkpoint: Checkpoint, claims: dict[str, Any]) -> bytes:
    """:func:`claims_payload` of ``claims`` (``checkpoint.to_claims()``), a long run's receipts written by their tables.

    From :data:`_COMPOSED_FROM` receipts on, most of the payload is the receipt
    columns, which :meth:`~rimthan_workflow_registry.run.receipts.ArtifactTable.claims_json`
    writes without the encoder's scan of every digest character; the bytes are the same.
    """
    if len(checkpoint.artifacts) + len(checkpoint.validators) < _COMPOSED_FROM:
        return claims_payload(claims)
    tables: dict[str, ArtifactTable | ValidatorTable] = dict(
        zip(_RECEIPT_CLAIMS, (checkpoint.artifacts, checkpoint.validators), strict=True)
    )
    return composed_payload(
        (key, tables[key].claims_json() if key in tables else claim_json(value)) for key, value in claims.items()
    )


def _verified_form(claims: dict[str, Any], payload: bytes) -> Checkpoint:
    """What the full path's payload step yields for ``payload``, the JSON of ``claims``; or ``TokenError``.

    Claims that pass the fast shape check (which takes the receipt columns'
    types exactly) and hold nothing else but exact ``dict``, ``list``,
    ``str``, ``int`` and ``None`` read back from their JSON as equal values of
    the same types, so they give that checkpoint without parsing the payload
    (the shape is read from ``payload`` itself where it can be: :func:`_issued_accepted`).
    Any other claims are parsed and checked as a verification would.
    """
    if _issued_accepted(claims, payload) or (accepted_fast(claims) and _exact_types(claims)):
        return Checkpoint._of_claims(claims)
    return _payload_checkpoint(AuthenticToken(payload.decode("ascii"), "checkpoint", FailureCode.CHECKPOINT_INVALID))


def _issued_accepted(claims: dict[str, Any], payload: bytes) -> bool:
    """``accepted_fast(claims) and _exact_types(claims)``, the shape read from ``payload`` (the claims' JSON).

    ``True`` only when both are (see :func:`~rimthan_workflow_registry.run.checkpoint_claims.issued_text_accepted`,
    which needs exact types); ``False`` means "ask them".
    """
    if not (issued_text_accepted(claims, payload.decode("ascii")) and _exact_types(claims)):
        return False
    return receipts_and_host_accepted(claims)


def _exact_types(claims: dict[str, Any]) -> bool:
    """Claims :func:`accepted_fast` took hold, receipts aside, exact dict, list, str, int and None only.

    That check matched their JSON against a pattern that fixes what each node
    is written as: an object, an array (the two capability lists only), a
    string, digits or ``null``. ``json.dumps`` writes those only for a
    ``dict``, a ``list`` or ``tuple``, a ``str``, an ``int`` and ``None``, or
    a subclass of one (``bool`` is ``true``/``false``, a ``float`` has a
    ``.`` or an ``e`` or is refused, any other type is refused). ``marshal``
    encodes exact built-in types only, so it refuses every subclass, and the
    capability lists are checked to be lists.
    """
    try:
        marshal.dumps({k: v for k, v in claims.items() if k not in _RECEIPT_CLAIMS}, 2)
    except ValueError:  # a type marshal does not encode exactly
        return False
    host = claims["host"]
    return type(host["capabilities"]) is list and type(host["validator_capabilities"]) is list


def verify_checkpoint(keyring: CheckpointKeyring, token: str) -> IssuedCheckpoint:
    """A checkpoint this server issued, unaltered, or ``TokenError``.

    The header rules and the key id (live, not retired) are checked with
    ``keyring`` every time. A token this process issued (character for
    character) with the very key its id names in ``keyring`` then takes its
    checkpoint from :data:`ISSUED`: its MAC is the one this process computed
    over those characters with that key, so it is not computed again, and its
    payload is not parsed and checked again. Any other token takes the full
    path: MAC, then payload. The clock is consulted either way.

    Each thread also remembers the last checkpoint it verified with its token
    and keyring: the same token verified again with the same keyring object
    (the server routes a call by its checkpoint, then the engine resumes it,
    on the call's worker thread) gives the same verified checkpoint without a
    second MAC, whatever other threads verify meanwhile. A keyring that
    changed (rotation, retirement) is a new object, so it verifies anew. Only
    successes are remembered, one token per thread. A ``str`` subclass is
    verified as the plain string of its characters.
    """
    if type(token) is not str and isinstance(token, str):
        token = str.__str__(token)  # its characters as a plain str: a subclass's own ``==`` or ``find`` never decide
    last: _Verified | None = getattr(_last_verified, "entry", None)
    if last is not None and last[0] is keyring and last[1] == token:
        check_issued_at(last[2].checkpoint.issued_at, "checkpoint", FailureCode.CHECKPOINT_INVALID)
        return last[2]
    admitted = keyring.admit(token, CHECKPOINT_TYPE, FailureCode.CHECKPOINT_INVALID)
    issued = ISSUED.recall(token, admitted.key)
    if issued is None:
        issued = IssuedCheckpoint(_payload_checkpoint(admitted.authentic(), check_clock=True), token)
    else:
        check_issued_at(issued.checkpoint.issued_at, "checkpoint", FailureCode.CHECKPOINT_INVALID)
    _last_verified.entry = (keyring, token, issued)
    return issued


def _payload_checkpoint(authentic: AuthenticToken, *, check_clock: bool = False) -> Checkpoint:
    """The checkpoint of an authentic token's payload (parsed, ``iat`` checked, closed shape), or ``TokenError``."""
    claims = authentic.claims()
    if check_clock:
        authentic.check_issued_at(claims["iat"])
    return Checkpoint.from_claims(claims)


_Verified = tuple[CheckpointKeyring, str, IssuedCheckpoint]
_last_verified = threading.local()
