"""A follower's releases directory on disk: the copies it pulled, what a killed pull left, and the copies whose
tag the registry no longer has.

:func:`fingerprint` tells a copy changed on disk since it was pulled (pulled again, so verified: a damaged one is
replaced); :func:`sweep_stale_downloads` removes, at start, what a follower killed mid-pull left; and
:func:`untagged_copies` is what a restarted follower's first sync compares with the registry's tags: a copy held
whose version has no tag any more was withdrawn while the replica was down, and is warned of as a running follower
warns of a tag deleted under it.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from rimthan_workflow_registry.release import SYNC_DEADLINE

from .logs import get_logger
from .release_scan import release_dir_version

_log = get_logger("follow")


def untagged_copies(releases_dir: Path, tags: set[str]) -> list[tuple[str, Path]]:
    """Each release directory held (``<catalogue>-<version>``) whose version is no tag in ``tags``, as (version,
    directory), in name order; downloads and copies renamed aside (``.*``) are no release held."""
    try:
        entries = sorted(releases_dir.iterdir())
    except OSError:
        return []
    held = [(version, entry) for entry in entries if (version := release_dir_version(entry)) is not None]
    return [(version, entry) for version, entry in held if version not in tags and entry.is_dir()]


# A pull ends by its sync's deadline (plus one read timeout): a download untouched for twice that is no live pull's.
STALE_AFTER = 2 * SYNC_DEADLINE
_LEFT_BEHIND = (".pull-*", ".damaged-*")  # a pull's download directory; a copy renamed aside by a replacement


def sweep_stale_downloads(releases_dir: Path, now: float | None = None) -> None:
    """Remove what a follower killed mid-pull (SIGKILL, OOM, a node drained) left: each restart added one.

    Only entries untouched for :data:`STALE_AFTER` go, so a pull still running in another process is spared.
    """
    moment = time.time() if now is None else now
    for pattern in _LEFT_BEHIND:
        for stale in sorted(releases_dir.glob(pattern)):
            if stale.is_dir() and not stale.is_symlink() and moment - _last_touched(stale) > STALE_AFTER:
                shutil.rmtree(stale, ignore_errors=True)
                if not stale.exists():
                    _log.info("stale download removed", extra={"path": str(stale)})


def _last_touched(directory: Path) -> float:
    """The newest mtime of ``directory`` and everything under it (``inf`` if it cannot be read: kept)."""
    try:
        return max(p.lstat().st_mtime for p in (directory, *directory.rglob("*")))
    except OSError:
        return float("inf")


Fingerprint = frozenset[tuple[str, int, int, int]]


def fingerprint(directory: Path) -> Fingerprint:
    """Every entry of ``directory`` (itself included) by relative path, size, mtime and inode; empty if it is gone.

    Cheap enough for every refresh (no file is read); an edit, a deletion, an added file or a directory
    replaced changes it. An edit that also restores the mtime is caught at the next start, which pulls every tag.
    """
    entries: set[tuple[str, int, int, int]] = set()
    try:
        for where in (directory, *sorted(directory.rglob("*"))):
            st = where.lstat()
            entries.add((str(where.relative_to(directory)), st.st_size, st.st_mtime_ns, st.st_ino))
    except OSError:
        return frozenset()
    return frozenset(entries)
