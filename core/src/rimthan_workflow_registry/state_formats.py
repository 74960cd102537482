"""A state file written by a newer Rimthan version: told apart from a damaged one, never read or overwritten.

Every file in a state directory carries a ``format`` member, ``<name>/<n>``
(``rimthan.checkpoint-keys/1``). A version reads the one ``n`` it writes. A
file of the same name and a higher ``n`` was written by a newer version: after
a rollback, or by a newer replica sharing the directory during a rolling
upgrade. Such a file is refused (keys, floor) or left as it is (caches), never
read as damaged nor rewritten in the older format: rolling forward again finds
it as the newer version left it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_FORMAT = re.compile(r"(?P<name>[a-z][a-z.-]*)/(?P<n>[1-9][0-9]{0,8})")
ROLLBACK_NEXT = (
    "run the Rimthan version that wrote it (or a later one); to roll back, restore the state directory's copy "
    "backed up before the upgrade"
)


@dataclass(frozen=True)
class NewerFormat:
    """A state file's ``format`` that a newer version wrote: what it says, and what this version reads."""

    found: str
    known: str

    def reason(self) -> str:
        return f"it was written by a newer Rimthan version (format {self.found}; this version reads {self.known})"


def newer_format(found: object, known: str) -> NewerFormat | None:
    """``found`` (a file's ``format`` member) if it is ``known``'s name at a higher number, else None."""
    theirs = _FORMAT.fullmatch(found) if isinstance(found, str) else None
    ours = _FORMAT.fullmatch(known)
    if theirs is None or ours is None or theirs["name"] != ours["name"] or int(theirs["n"]) <= int(ours["n"]):
        return None
    return NewerFormat(theirs.group(0), known)
