"""Build outputs a figure is done with: moved aside during the run, deleted once it is over.

Deleting a 10,000-file tree just before a timed build makes the build pay for
the deletion: on ext4 without a journal (this machine's root file system) the
inode allocator checks every free inode it passes for a deletion in the last
30 seconds and skips those (``recently_deleted`` in ``find_inode_bit``), so
each new file scans past the inodes just freed. A kernel profile of a build
right after such a deletion spent 40% of its samples there, and ``cp -R`` as
much. Neither a build nor its floor should be timed on that, so a finished
output is renamed into the run's trash (no inode is freed) and the trash is
deleted at the end of the run.
"""

from __future__ import annotations

import itertools
import os
import shutil
from pathlib import Path

TRASH_DIR = "trash"
_names = itertools.count()


def trash_dir(work: Path) -> Path:
    return work / TRASH_DIR


def retire(path: Path, trash: Path) -> None:
    """Move ``path`` into ``trash`` (same file system: a rename, nothing freed)."""
    trash.mkdir(parents=True, exist_ok=True)
    os.rename(path, trash / f"{os.getpid()}-{next(_names)}-{path.name}")


def purge(trash: Path) -> None:
    """Delete everything retired (after the last timed figure)."""
    shutil.rmtree(trash, ignore_errors=True)
