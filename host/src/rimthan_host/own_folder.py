"""The bridge's own folder, ``.rimthan``, kept out of the project's git: a ``.gitignore`` of ``*`` in it.

``.rimthan`` holds the run logs (checkpoint tokens), the confirmed state, the
locks and the kept copies of delivered assets: nothing a user commits, and a
``git stash -u`` that took the run log away would lose the run. So each time
the bridge walks into ``.rimthan`` to write (:func:`~rimthan_host.files.open_folder`
with ``make``), it writes ``.rimthan/.gitignore`` if nothing is at that name:
written whole at a name of its own, then hard-linked into place, so a file (or
a link) the user put there is never replaced, and a half-written one is never
left at that name. The files delivered elsewhere (``.claude/``, ``.opencode/``)
are the user's to commit or not.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
from pathlib import Path

from rimthan_workflow_registry.whole_writes import write_all

OWN_FOLDER = ".rimthan"
TMP_SUFFIX = ".rimthan-tmp"  # a project file is written at ".<name>" + this beside it, then renamed over it
IGNORE_NAME = ".gitignore"
IGNORE_TEXT = (
    b"# Written by rimthan-host: run logs (checkpoint tokens), locks and the bridge's copies stay out of git,\n"
    b"# so `git add -A` never commits them and `git stash -u` never takes a run away. To keep some of .rimthan\n"
    b"# in git, replace this file with your own rules: the bridge never overwrites a .gitignore here.\n"
    b"*\n"
)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def aside_name(name: str) -> str:
    """A name of this call's own beside ``name`` (``.<name>.<pid>.<16 hex>.rimthan-tmp``): what is written or moved
    there first. (``files.ASIDE_NAME`` matches it, to prune what a killed process left.)"""
    return f".{name}.{os.getpid()}.{secrets.token_hex(8)}{TMP_SUFFIX}"


def keep_out_of_git(at: int, folder: Path) -> None:
    """Write ``.gitignore`` (:data:`IGNORE_TEXT`) in ``folder``, open as ``at``, unless something is at that name.

    An ``OSError`` naming ``folder / .gitignore`` if it cannot be written (nothing is left at that name).
    """
    try:
        os.stat(IGNORE_NAME, dir_fd=at, follow_symlinks=False)
        return
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(folder / IGNORE_NAME)) from None
    aside = aside_name(IGNORE_NAME)
    try:
        fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o644, dir_fd=at)
        try:
            write_all(fd, IGNORE_TEXT)
            os.fsync(fd)
        finally:
            os.close(fd)
        with contextlib.suppress(FileExistsError):  # (put there meanwhile: theirs, kept)
            os.link(aside, IGNORE_NAME, src_dir_fd=at, dst_dir_fd=at, follow_symlinks=False)
    except OSError as exc:
        raise OSError(exc.errno or errno.EIO, exc.strerror, str(folder / IGNORE_NAME)) from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(aside, dir_fd=at)
