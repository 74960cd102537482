"""How a file or a release directory looks on disk, by its stat alone: what a refresh compares to notice a change.

Nothing is opened or read: a look is the inode (a file or directory replaced
by a rename), the size and the mtime (one written in place). A release
directory is looked at with its signatures directory, since a signature added
in place (``rimthan-pack sign``: co-signed) changes only the latter. A :class:`Stamp` is stricter, for a file whose
bytes a refresh would otherwise read again each time: its device and ctime too,
so a file written in place with its mtime set back, or its mode changed, has
another.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rimthan_workflow_registry.release import SIGNATURES_DIR


@dataclass(frozen=True)
class Look:
    """A path's inode, size and mtime (ns), as ``stat`` gave them."""

    inode: int
    size: int
    mtime_ns: int


def look_at(path: Path) -> Look | None:
    """How ``path`` looks now; ``None`` if it cannot be looked at (gone, unreadable)."""
    stamp = stamp_of(path)
    return None if stamp is None else Look(stamp.inode, stamp.size, stamp.mtime_ns)


@dataclass(frozen=True)
class Stamp:
    """A file's device, inode, size, mtime and ctime (ns), as ``stat`` gave them: the file replaced (a rename),
    written or chmod-ed since has another (ctime is set by the kernel, never by a caller)."""

    device: int
    inode: int
    size: int
    mtime_ns: int
    ctime_ns: int


def stamp_of(path: Path) -> Stamp | None:
    """``path``'s stamp now; ``None`` if it cannot be looked at (gone, unreadable)."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return Stamp(stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


ReleaseLook = tuple[Look | None, Look | None]


def release_look(root: Path) -> ReleaseLook:
    """How a release directory and its signatures directory look now (a follower's exchange changes the former, a
    co-signature added in place the latter)."""
    return look_at(root), look_at(root / SIGNATURES_DIR)
