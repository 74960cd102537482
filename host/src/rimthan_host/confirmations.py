"""Confirmed state: the values the person confirmed, each with an RFC 8785 value digest and a time.

The verifier accepts a changed field only with a confirmation made after the
checkpoint it continues from, so every confirmation carries the clock at the
moment the person said yes, and ``confirmed_by`` records *how* they said it:
through the client's own elicitation interface, relayed by the model after it
asked the user, or scripted (tests, the demo). Removing a field is confirmed
too (:meth:`ConfirmedStateBook.remove`). A declined or cancelled
elicitation never reaches :meth:`ConfirmedStateBook.confirm`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from rimthan_workflow_registry.canonical import digest_value
from rimthan_workflow_registry.run import REMOVAL_DIGEST

BY_SCRIPT = "decision owner"
BY_ELICITATION = "user via elicitation"
BY_MODEL = "user, asked by the model"


class ConfirmedStateBook:
    """The confirmed state sent on every call, with a confirmation per top-level field."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.values: dict[str, Any] = {}
        self.confirmations: dict[str, dict[str, Any]] = {}

    def confirm(self, name: str, value: Any, by: str = BY_SCRIPT) -> None:
        """Record that the person confirmed ``value`` for ``name`` now, and how."""
        self.values[name] = value
        self.confirmations[name] = {
            "value_digest": digest_value(value),
            "confirmed_at": int(self.clock()),
            "confirmed_by": by,
        }

    def remove(self, name: str, by: str = BY_SCRIPT) -> None:
        """Record that the person confirmed removing ``name`` now: the confirmation names the digest of null."""
        self.values.pop(name, None)
        self.confirmations[name] = {
            "value_digest": REMOVAL_DIGEST,
            "confirmed_at": int(self.clock()),
            "confirmed_by": by,
        }

    def holds(self, name: str, value: Any) -> bool:
        """Whether ``name`` is confirmed with ``value`` (as RFC 8785 JSON: ``1`` and ``1.0`` are one value), by the
        digest its confirmation keeps: the value confirmed is not hashed again."""
        confirmation = self.confirmations.get(name)
        return name in self.values and confirmation is not None and confirmation["value_digest"] == digest_value(value)

    def projection(self) -> dict[str, Any]:
        """The ``confirmed-state-projection`` argument."""
        return {"state": dict(self.values), "confirmations": {k: dict(v) for k, v in self.confirmations.items()}}

    @classmethod
    def from_projection(
        cls, projection: Mapping[str, Any], clock: Callable[[], float] = time.time
    ) -> ConfirmedStateBook:
        """A book restored from a projection (resume after a crash)."""
        book = cls(clock)
        book.values = dict(projection.get("state") or {})
        book.confirmations = {k: dict(v) for k, v in (projection.get("confirmations") or {}).items()}
        return book


def carried_values(values: Mapping[str, Any], offer: Mapping[str, Any] | None, target_release: str) -> dict[str, Any]:
    """The run's ``values`` a migration to ``target_release`` carries: those of the fields the offer says the target's
    confirmed state has (``target_needs.confirmed_state``), every one when no offer for that release is known.

    A field the target's schema dropped would have the verifier refuse the migration (``confirmed_state_invalid``):
    the run's value of it stays behind; an unknown target is left to the verifier to judge.
    """
    needs = _state_needs(offer) if offers(offer, target_release) else None
    if needs is None:
        return dict(values)
    fields = {need.get("field") for need in needs if isinstance(need, Mapping)}
    return {field: value for field, value in values.items() if field in fields}


def offers(offer: Mapping[str, Any] | None, target_release: str) -> bool:
    """Whether ``offer`` (a migration preview) is of ``target_release`` (its id or manifest digest) and names the
    fields the target's confirmed state has."""
    to = (offer or {}).get("to") or {}
    return target_release in (to.get("release"), to.get("manifest_digest")) and _state_needs(offer) is not None


def _state_needs(offer: Mapping[str, Any] | None) -> list[Any] | None:
    needs = ((offer or {}).get("target_needs") or {}).get("confirmed_state")
    return needs if isinstance(needs, list) else None
