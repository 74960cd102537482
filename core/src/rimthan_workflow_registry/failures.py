"""Closed failure objects: what deterministic checks accumulate instead of raising.

Checks that must report *everything* wrong at once (preparation, host
compatibility, confirmations) return lists of :class:`Failure`; checks that
must stop the call raise a :class:`RegistryError` instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rimthan_workflow_registry.errors import FailureCode


@dataclass(frozen=True)
class Failure:
    """One reason a call cannot go on: its code, what to say, and where (artifact, file, JSON pointer)."""

    code: FailureCode
    message: str
    artifact_id: str | None = None
    path: str | None = None
    pointer: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": FailureCode(self.code).value, "message": self.message}
        for key in ("artifact_id", "path", "pointer"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.details:
            out["details"] = dict(self.details)
        return out
