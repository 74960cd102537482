"""Confirmed state: what the user has explicitly confirmed, and proof that they did.

The client sends the whole state with a confirmation per top-level field on
every call; the server keeps only its digest (in the checkpoint), so the
objective never leaks into a token. A confirmation names the digest of the
value it confirms and when it was given; a changed field needs one that is
newer than the checkpoint (contemporaneous), so a stale "yes" cannot carry a
new value. A removed field is a change too: its confirmation stays in the
projection, names :data:`REMOVAL_DIGEST` (the digest of JSON ``null``: no
value) and is newer than the checkpoint. No confirmation may be dated after
the server's clock (beyond ``CLOCK_SKEW_SECONDS``): it would be fresh for every
later checkpoint, so a "yes" given once could be replayed to revert a value.
A state larger than ``MAX_CONFIRMED_STATE_BYTES`` as canonical JSON is refused
before anything else looks at it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from rimthan_workflow_registry.canonical import (
    MemberDigests,
    digest_value,
    member_digests,
    recurring_member_digests,
)
from rimthan_workflow_registry.errors import QUOTE_MAX_CHARS, FailureCode, WorkflowProtocolError, quoted
from rimthan_workflow_registry.failures import Failure
from rimthan_workflow_registry.limits import CLOCK_SKEW_SECONDS, MAX_CONFIRMED_STATE_BYTES

if TYPE_CHECKING:
    from rimthan_workflow_registry.release.catalogue_schema import CatalogueSchema

REMOVAL_DIGEST = digest_value(None)
"""What the confirmation of a removed field names: the digest of JSON ``null``, the value the field no longer has."""


@dataclass(frozen=True, init=False)
class Confirmation:
    """One field's confirmation: the digest of the value confirmed, and when.

    Every call that carries a state builds one per field, so its ``__init__``
    is written here rather than generated: it fills the instance's dictionary
    at once instead of setting each field through ``object.__setattr__`` (the
    same fields, equality and frozenness).
    """

    value_digest: str
    confirmed_at: int

    def __init__(self, value_digest: str, confirmed_at: int) -> None:
        self.__dict__.update(value_digest=value_digest, confirmed_at=confirmed_at)


@dataclass(frozen=True)
class ConfirmedState:
    """A confirmed-state projection as sent by the client (already schema-shaped).

    ``memo_scope`` is the state digest of the MAC-verified checkpoint this
    state was sent with as the state that checkpoint binds, or ``None`` (a
    start, a proposed ``next_confirmed_state``): with a scope, digests are
    remembered for later calls that carry a checkpoint of the same state
    (:func:`~rimthan_workflow_registry.canonical.recurring_member_digests`),
    only when the values are that state (their digest is the scope). A proposed
    state must never get one: another run in the same state would find it.
    """

    values: Mapping[str, Any]
    confirmations: Mapping[str, Confirmation]
    memo_scope: str | None = None

    @classmethod
    def from_json(cls, projection: Mapping[str, Any], *, memo_scope: str | None = None) -> ConfirmedState:
        """The projection as records; refused if its values have no canonical (digestible) form."""
        confirmations = {
            name: Confirmation(value_digest=c["value_digest"], confirmed_at=c["confirmed_at"])
            for name, c in projection.get("confirmations", {}).items()
        }
        state = cls(values=dict(projection.get("state", {})), confirmations=confirmations, memo_scope=memo_scope)
        try:
            size = state.size  # computed (and cached) now for its refusal: later digests cover these values
        except (ValueError, TypeError, RecursionError) as exc:  # rfc8785: integers beyond 2**53, non-JSON values
            raise WorkflowProtocolError(
                FailureCode.CONFIRMED_STATE_INVALID,
                f"the state holds a value that has no canonical JSON form (RFC 8785): {exc}",
            ) from None
        if size > MAX_CONFIRMED_STATE_BYTES:
            raise WorkflowProtocolError(FailureCode.CONFIRMED_STATE_INVALID, _too_large_message(size))
        return state

    @cached_property
    def _digests(self) -> MemberDigests:
        """The values' digest and each field's, every field canonicalised once (remembered within a scope)."""
        if self.memo_scope is None:
            return member_digests(dict(self.values))
        return recurring_member_digests(dict(self.values), self.memo_scope)

    @property
    def size(self) -> int:
        """The length of the values' canonical bytes (RFC 8785): what :data:`MAX_CONFIRMED_STATE_BYTES` bounds."""
        return self._digests[2]

    @cached_property
    def digest(self) -> str:
        """Canonical digest of the values only: what a checkpoint binds."""
        return self._digests[0]

    def field_digest(self, name: str) -> str:
        """The digest of one field's value, canonicalised once however often a call compares it."""
        return self._digests[1][name]


def _too_large_message(size: int) -> str:
    """Why a confirmed state of ``size`` canonical bytes is refused, in words a harness's model can act on."""
    return (
        f"the confirmed state is {size} bytes as canonical JSON (RFC 8785), past the {MAX_CONFIRMED_STATE_BYTES} "
        "bytes a confirmed state may hold: confirm short facts (an objective, answers, choices) and keep long "
        "texts in files the workflow's steps write"
    )


def validate_against_schema(
    state: ConfirmedState, validator: CatalogueSchema, *, label: str, allow_missing: bool = False
) -> None:
    """The values must satisfy the workflow's ``confirmed_state_schema``.

    With ``allow_missing``, absent required top-level fields are left to the
    caller, which reports each one as its own failure
    (:func:`rimthan_workflow_registry.run.requirements.missing_fields`);
    every other schema error still refuses the call.
    """
    errors = sorted(validator.iter_errors(dict(state.values)), key=lambda e: list(e.absolute_path))
    schema = validator.schema if isinstance(validator.schema, Mapping) else {}
    missing = sorted(str(name) for name in schema.get("required") or [] if name not in state.values)
    if allow_missing:
        errors = [e for e in errors if not (e.validator == "required" and not e.absolute_path)]
    if errors:
        first = errors[0]
        pointer = "/" + "/".join(str(p) for p in first.absolute_path)
        details: dict[str, Any] = {"pointer": pointer, "problem": _said(first), "errors": len(errors)}
        if missing:
            details["missing"] = missing
        said = schema_misfit(label, details)
        raise WorkflowProtocolError(FailureCode.CONFIRMED_STATE_INVALID, said or label, details=details)


def schema_misfit(label: str, details: Mapping[str, Any]) -> str | None:
    """A ``confirmed_state_invalid`` refusal in words, said of ``label``, from its details (None if a part is missing).

    The verifier says it of its argument (``next_confirmed_state``); a host
    says it of what its user gave (the bridge: "the confirmed state with these facts").
    """
    pointer, problem, missing = details.get("pointer"), details.get("problem"), details.get("missing") or []
    if not isinstance(pointer, str) or not isinstance(problem, str) or not isinstance(missing, list):
        return None
    fields = f" (missing fields: {', '.join(str(name) for name in missing)})" if missing else ""
    return f"{label} does not satisfy the workflow's confirmed-state schema at {pointer}: {problem}{fields}"


def _said(error: Any) -> str:
    """A schema error's message, which quotes the value: one far past a limit is cut, its rule kept."""
    if len(error.message) <= 4 * QUOTE_MAX_CHARS:
        return str(error.message)
    return f"{quoted(error.instance)} fails its {error.validator} rule ({quoted(error.validator_value, 64)})"


def unconfirmed_fields(
    state: ConfirmedState, fields: list[str] | None = None, *, now: int, newer_than: int | None = None
) -> list[Failure]:
    """Fields among ``fields`` (default: all) lacking a matching confirmation.

    A confirmation matches when it names the digest of the current value
    (:data:`REMOVAL_DIGEST` for a field the state no longer has), is not dated
    after ``now`` and, with ``newer_than``, was given at or after that time.
    """
    failures: list[Failure] = []
    for name in sorted(fields if fields is not None else state.values):
        removed = name not in state.values
        digest = REMOVAL_DIGEST if removed else state.field_digest(name)
        reason = _mismatch(state.confirmations.get(name), digest, now=now, newer_than=newer_than)
        if reason is None:
            continue
        subject = f"removing field {name!r} (confirmed with the digest of null):" if removed else f"field {name!r}"
        failures.append(
            Failure(
                FailureCode.CONFIRMATION_REQUIRED,
                f"{subject} {reason}",
                pointer=f"/{name}",
                details={"value_digest": digest},
            )
        )
    return failures


def _mismatch(confirmation: Confirmation | None, digest: str, *, now: int, newer_than: int | None) -> str | None:
    """Why ``confirmation`` does not confirm the value of digest ``digest`` (given by ``now``), or ``None``."""
    if confirmation is None:
        return "has no confirmation"
    if confirmation.value_digest != digest:
        return "is confirmed for a different value"
    if confirmation.confirmed_at > now + CLOCK_SKEW_SECONDS:
        return f"is confirmed at {confirmation.confirmed_at}, after the server's clock ({now}); confirm it now"
    if newer_than is not None and confirmation.confirmed_at < newer_than:
        return "was confirmed before the current checkpoint; confirm the new value"
    return None


def require_confirmed(state: ConfirmedState, *, now: int) -> None:
    """Every field of a state a checkpoint binds still carries a confirmation of its value.

    Checked on every call, not only when a field changes: a client cannot keep
    a run going on a state whose confirmations it has dropped or rewritten.
    """
    failures = unconfirmed_fields(state, now=now)
    if failures:
        raise WorkflowProtocolError(
            FailureCode.CONFIRMATION_REQUIRED,
            f"confirmed_state: {failures[0].message}; every field needs a confirmation of its current value",
            details={"fields": [f.pointer for f in failures]},
        )


def state_failures(before: ConfirmedState, after: ConfirmedState, *, newer_than: int, now: int) -> list[Failure]:
    """Confirmation failures of a proposed state: changed fields (removed ones too) need a fresh one, the others a
    matching one."""
    changed = changed_fields(before, after)
    unchanged = sorted(set(after.values) - set(changed))
    fresh = unconfirmed_fields(after, changed, now=now, newer_than=newer_than)
    failures = fresh + unconfirmed_fields(after, unchanged, now=now)
    return sorted(failures, key=lambda f: f.pointer or "")


def changed_fields(before: ConfirmedState, after: ConfirmedState) -> list[str]:
    """Top-level fields added, removed or whose value changed."""
    if before is after:
        return []
    names = set(before.values) | set(after.values)
    return sorted(
        n
        for n in names
        if (n in before.values) != (n in after.values)
        or (n in before.values and before.field_digest(n) != after.field_digest(n))
    )


def require_digest(state: ConfirmedState, expected: str) -> None:
    """The state the client sends must be exactly the one the checkpoint binds."""
    if state.digest != expected:
        raise WorkflowProtocolError(
            FailureCode.CONFIRMED_STATE_MISMATCH,
            "confirmed_state is not the state this checkpoint was issued for; send the state exactly as last "
            "confirmed (use next_confirmed_state to propose changes)",
        )
