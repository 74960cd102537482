"""Build outputs a figure is done with: moved aside during the run, deleted once it is over.

Deleting a 10,000-file tree just before a timed build makes the build pay for
the deletion: on ext4 without a journal (this machine's root file system) the
inode allocator checks every free inode it passes for a deletion in the last 60
seconds (300 more while the inode's table block is dirty) and skips those
(``recently_deleted`` in ``find_inode_bit``; ``RECENTCY_MIN`` and
``RECENTCY_DIRTY`` in ``fs/ext4/ialloc.c``), so each new file scans past the
inodes just freed. A kernel profile of a build right after such a deletion
spent 40% of its samples there, and ``cp -R`` as much. Neither a build nor its
floor should be timed on that, so a finished output is renamed into the run's
trash (no inode is freed) and the trash is deleted at the end of the run. The
next run waits, before its first build, until the inodes that deletion freed
are no longer recent (:func:`quiet_wait`): ``make bench`` twice in a row timed
its 1 MiB builds on them (3-8x against 1.6x, the disk otherwise as quiet).

The wait is the kernel's whole window, 360 s: a freed inode whose table block a
new file has dirtied again (as the next run's copies do) counts as recent for
300 s more. Measured on 5 December 2026 with a wait of 60 s plus margin (after
``sync``): a run started right after another still timed its P2 floor of the
256 MiB tree, the first of each pair, at 3.1 s against 1.4-1.6 s, and a run
1.5-3.5 minutes after some 400,000 files were deleted its 256 MiB builds at
2.0 s against 1.2-1.4 s. The wait used to be 35 s (older kernels' 5 + 30 s).
"""

from __future__ import annotations

import itertools
import os
import shutil
import time
from pathlib import Path

TRASH_DIR = "trash"
PURGED_AT = "trash-purged-at"  # beside the trash: when the last run deleted it (seconds since the epoch)
# ext4's recently_deleted(): RECENTCY_MIN + RECENTCY_DIRTY, and 5 s for the whole seconds it compares
RECENT_DELETION_S = 365.0
_names = itertools.count()


def trash_dir(work: Path) -> Path:
    return work / TRASH_DIR


def retire(path: Path, trash: Path) -> None:
    """Move ``path`` into ``trash`` (same file system: a rename, nothing freed)."""
    trash.mkdir(parents=True, exist_ok=True)
    os.rename(path, trash / f"{os.getpid()}-{next(_names)}-{path.name}")


def purge(trash: Path) -> None:
    """Delete everything retired (after the last timed figure), and note when."""
    shutil.rmtree(trash, ignore_errors=True)
    (trash.parent / PURGED_AT).write_text(repr(time.time()), "utf-8")


def quiet_wait(work: Path, now: float | None = None) -> float:
    """Seconds until the inodes the last purge in ``work`` freed stop being recent (0: none are, or no purge noted)."""
    try:
        purged = float((work / PURGED_AT).read_text("utf-8"))
    except (OSError, ValueError):
        return 0.0
    left = purged + RECENT_DELETION_S - (time.time() if now is None else now)
    return min(max(left, 0.0), RECENT_DELETION_S)
