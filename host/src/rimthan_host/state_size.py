"""Why a run's resume state would be too large to save: the part that takes the most, and what to do.

A saved state holds the confirmed values, the run's position (a step's
result), which outputs existed, and the evidence (each file the run
validated). The refusal names the part that takes the most bytes of the
states the file would hold - not always the confirmed values - and what the
model or the user can do about that part.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .protocol import HarnessError

# Each part: what it is, in words, and what to do about it (the confirmed values, the one the model may shorten).
_PARTS = {
    "confirmed_state": (
        "these confirmed values",
        "Make the values shorter (ask the user) and try again; for facts given at the start, call start_run with "
        "new_run true and the shorter facts.",
    ),
    "validated": (
        "the files this run validated ({count}: each one's artifact id, path and SHA-256)",
        "The run cannot keep more files than that: call start_run with new_run true for a new run (a run that "
        "migrated keeps its earlier versions' files too), and tell the workflow's maintainer that its outputs' "
        "ids and paths are too many or too long.",
    ),
}
_OTHER = (
    "the saved {part}",
    "Tell the host kit's maintainers; call start_run with new_run true for a new run meanwhile.",
)


def largest_part(states: Sequence[Mapping[str, Any]]) -> tuple[str, int]:
    """The key of the saved states' part that takes the most bytes (summed over the states), and its entries."""
    sizes: dict[str, int] = {}
    for state in states:
        for key, value in state.items():
            sizes[key] = sizes.get(key, 0) + len(json.dumps(value, separators=(",", ":")))
    part = max(sizes, key=lambda k: sizes[k])
    value = states[0].get(part)
    return part, len(value) if isinstance(value, Mapping) else 0


class StateTooLarge(HarnessError):
    """A resume state past ``limit`` bytes: not written, so the move it belongs to is not recorded."""

    def __init__(self, run: str, size: int, limit: int, part: tuple[str, int], *, started: bool) -> None:
        where = f"run {run} stays at its last logged checkpoint" if started else "no run was started"
        what, todo = _PARTS.get(part[0], _OTHER)
        super().__init__(
            f"Nothing was recorded: with {what.format(count=part[1], part=part[0])} the resume state of run {run} "
            f"would be {size} bytes, past the {limit} bytes a run state file may hold, so the run could not be "
            f"resumed; {where}. {todo}"
        )
        self.size = size
        self.part = part[0]
