"""A release refused below the activation floor, as a program reads it: the record the verifier logs, the bridge
reads.

``rimthan-mcp serve`` refused at start because a release is below its activation floor logs, before its
``error:``/``next:`` lines, one JSON log record per such release (level error): event :data:`BELOW_FLOOR_EVENT`
and the fields of :class:`BelowFloor` (``catalogue``, ``version``, ``floor``, the refusal's ``details``). The
host kit's bridge names the withdrawn release from it (:func:`read_below_floor`), never from the English message.
One copy of the format, here, for both.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, fields
from typing import Any

from rimthan_workflow_registry.errors import FailureCode, RegistryError
from rimthan_workflow_registry.release import ID_PATTERN, is_semver

BELOW_FLOOR_EVENT = "start refused below the activation floor"
"""The ``event`` of the log record ``rimthan-mcp serve`` writes per release below the floor that refused its start
(its fields: :class:`BelowFloor`'s)."""
_CATALOGUE = re.compile(ID_PATTERN)


@dataclass(frozen=True)
class BelowFloor:
    """A release refused as a rollback: ``catalogue@version`` is below the activation floor ``floor``."""

    catalogue: str
    version: str
    floor: str

    @classmethod
    def all_of(cls, error: RegistryError) -> list[BelowFloor]:
        """Each release ``error`` refuses below the floor, from its details: its own, or (no release of a releases
        directory verifies) each rejected release's, in order; none for any other refusal."""
        if error.code != FailureCode.ROLLBACK_REFUSED:
            return []
        rejected = error.details.get("rejected")
        errors = [r.get("error") for r in rejected if isinstance(r, dict)] if isinstance(rejected, list) else []
        said = [error.to_dict(), *errors]
        found = (_below_floor(e.get("details")) for e in said if isinstance(e, dict) and e.get("code") == error.code)
        return [below for below in found if below is not None]


def read_below_floor(line: str) -> BelowFloor | None:
    """The release a below-floor record names, if ``line`` is one; None for any other line, or one
    whose fields are not a catalogue name and two semantic versions."""
    if BELOW_FLOOR_EVENT not in line:  # (most lines: no JSON parsed)
        return None
    try:
        said = json.loads(line)
    except ValueError:
        return None
    return _below_floor(said) if isinstance(said, dict) and said.get("event") == BELOW_FLOOR_EVENT else None


def _below_floor(said: Any) -> BelowFloor | None:
    if not isinstance(said, dict):
        return None
    catalogue, version, floor = (
        value if isinstance(value := said.get(f.name), str) else "" for f in fields(BelowFloor)
    )
    if not _CATALOGUE.fullmatch(catalogue) or not is_semver(version) or not is_semver(floor):
        return None
    return BelowFloor(catalogue, version, floor)
