"""Paths a user hands ``verify`` (and ``inspect``, ``sign``, ``push``) that are no release at all.

The layout walk would list what such a directory holds as files "not part of
the release layout" and advise deleting them: a catalogue source's files, a
releases directory's releases, whatever an unrelated directory holds. Each of
these is said as the wrong path it is, before the walk, with what to pass
instead. A directory that has a ``manifest.json`` (however damaged) or holds
only names of the release layout is left to the walk and the checks after it.
"""

from __future__ import annotations

import os
from pathlib import Path

from rimthan_workflow_registry.errors import FailureCode, ReleaseVerificationError, shell_word
from rimthan_workflow_registry.release.format import (
    CATALOGUE_DIR,
    CATALOGUE_MANIFEST_NAME,
    CHECKSUMS_NAME,
    MANIFEST_NAME,
    SIGNATURES_DIR,
)
from rimthan_workflow_registry.remediation import REMEDIATION

_LAYOUT_NAMES = frozenset({MANIFEST_NAME, CHECKSUMS_NAME, CATALOGUE_DIR, SIGNATURES_DIR})


def refuse_wrong_path(root: Path) -> None:
    """Refuse ``root`` if it is not a directory, a catalogue source, a directory of releases, or holds no release."""
    if not root.is_dir():
        raise _wrong(FailureCode.RELEASE_NOT_FOUND, "no release directory here", root)
    if os.path.lexists(root / MANIFEST_NAME):
        return
    if (root / CATALOGUE_MANIFEST_NAME).is_file():
        raise _wrong(
            FailureCode.MANIFEST_MISSING,
            "this is a catalogue source, not a built release (it has catalogue.toml and no manifest.json)",
            root,
            f"build it first: rimthan-pack build {shell_word(root)} --key KEY, then pass the "
            "release it prints (releases/NAME-VERSION)",
        )
    names = _names(root)
    held = [name for name in names if os.path.lexists(root / name / MANIFEST_NAME)]
    if held:  # a releases directory: its releases would be listed as extra files to delete
        raise _wrong(
            FailureCode.MANIFEST_MISSING,
            f"this is a directory of releases ({len(held)}), not a release (it has no manifest.json)",
            root,
            f"pass one release in it, such as {shell_word(root / held[0])}",
        )
    if names and _LAYOUT_NAMES.isdisjoint(names):
        raise _wrong(
            FailureCode.MANIFEST_MISSING,
            f"no release here: it holds no manifest.json, catalogue/ or signatures/, only other names "
            f"({len(names)}, such as {names[0]!r})",
            root,
            REMEDIATION[FailureCode.RELEASE_NOT_FOUND],  # check the path: not "build it again"
        )


def _names(root: Path) -> list[str]:
    """``root``'s entries, sorted (an unreadable directory: none, for the walk to refuse)."""
    try:
        return sorted(os.listdir(root))
    except OSError:
        return []


def _wrong(code: FailureCode, message: str, root: Path, next_step: str | None = None) -> ReleaseVerificationError:
    return ReleaseVerificationError(code, message, path=str(root), next_step=next_step)
