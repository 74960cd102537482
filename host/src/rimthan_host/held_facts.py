"""Facts the person confirmed in a form for a move that did not happen: not asked again on its retry.

A start or a migration refused because the person declined one of its facts (or the migration itself, or
the verifier refused it), or a step that moves on only once another field is confirmed
(``confirmed_field_missing``), records nothing: the model calls again with every fact, and the person would
confirm each again. The bridge holds what they confirmed, in this process only, for the same move (one scope
at a time: the start of one workflow, a run at one checkpoint, or its migration from there to one release): a
fact passed again for the same field with the same value (the exact bytes of its RFC 8785 JSON) is not put to them
again. Anything else is asked: another field, another value, another scope (which forgets what was held),
a client that cannot ask (its facts are relayed by the model, so none is taken as the person's), a value
too large to hold, or more fields than :data:`MOST_FIELDS`. The model never says a fact is confirmed: only
a yes the bridge received in a form is held. A new bridge process holds nothing: a held yes is no record
the verifier or the run's log keeps, and one kept on disk would be one the model could write.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rimthan_workflow_registry.canonical import canonical_bytes
from rimthan_workflow_registry.errors import quoted

MOST_FIELDS = 64  # fields held for one move at most (a workflow's confirmed state has a handful)
MOST_BYTES = 16 * 1024  # the canonical JSON of a value held, at most


def _bytes(value: Any) -> bytes | None:
    """``value``'s RFC 8785 bytes, None if it has none."""
    try:
        return canonical_bytes(value)
    except (TypeError, ValueError):  # (rfc8785's CanonicalizationError is a ValueError)
        return None


class HeldFacts:
    """The facts the person confirmed in a form for the move of one scope that did not happen yet."""

    def __init__(self) -> None:
        self._scope: tuple[str, ...] | None = None
        self._values: dict[str, bytes] = {}

    def _enter(self, scope: tuple[str, ...]) -> None:
        """Hold for ``scope`` from now on: what was held for another is forgotten."""
        if scope != self._scope:
            self._scope, self._values = scope, {}

    def split(self, scope: tuple[str, ...], facts: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """``facts`` as (those to put to the person, those they confirmed already for ``scope`` with that value)."""
        self._enter(scope)
        kept = {k: v for k, v in facts.items() if k in self._values and _bytes(v) == self._values[k]}
        return {k: v for k, v in facts.items() if k not in kept}, kept

    def hold(self, scope: tuple[str, ...], confirmed: Mapping[str, Any]) -> None:
        """Hold the values the person confirmed in a form for ``scope`` (one too large, or past the count, is not)."""
        self._enter(scope)
        for name, value in confirmed.items():
            data = _bytes(value)
            if data is None or len(data) > MOST_BYTES:
                self._values.pop(name, None)
            elif name in self._values or len(self._values) < MOST_FIELDS:
                self._values[name] = data

    def forget(self) -> None:
        """The move happened (its facts are in the run's confirmed state) or cannot: hold nothing."""
        self._scope, self._values = None, {}


@dataclass(frozen=True)
class Holding:
    """The facts held for one move: ``scope`` names it (("start", workflow), ("run", run, checkpoint),
    ("migrate", run, checkpoint, release))."""

    facts: HeldFacts
    scope: tuple[str, ...]

    def split(self, facts: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        return self.facts.split(self.scope, facts)

    def hold(self, confirmed: Mapping[str, Any]) -> None:
        self.facts.hold(self.scope, confirmed)


def kept_words(kept: Mapping[str, Any], tool: str) -> list[str]:
    """The line telling the model and the user which facts were not put to the user again."""
    if not kept:
        return []
    return [f"Already confirmed by the user: {quoted(', '.join(kept))} (the same value, confirmed in a form for this "
            f"{tool}); the user was not asked again."]  # fmt: skip


def held_words(held: Sequence[str], tool: str) -> list[str]:
    """The line telling the model the user's yes to ``held`` is kept for the retry of a move that did not happen."""
    if not held:
        return []
    return [f"Already confirmed by the user: {quoted(', '.join(held))}; call {tool} again with the same value for "
            "each and the user is not asked again for it (another value is put to them)."]  # fmt: skip
