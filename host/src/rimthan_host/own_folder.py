"""The bridge's own folder, ``.rimthan``, kept out of the project's git: a ``.gitignore`` of ``*`` in it.

``.rimthan`` holds the run logs (checkpoint tokens), the confirmed state, the
locks and the kept copies of delivered assets: nothing a user commits, and a
``git stash -u`` that took the run log away would lose the run. So each time
the bridge walks into ``.rimthan`` to write (:func:`~rimthan_host.files.open_folder`
with ``make``), it writes ``.rimthan/.gitignore`` if nothing is at that name:
written whole at a name of its own, then hard-linked into place, so a file (or
a link) the user put there is never replaced, and a half-written one is never
left at that name. Writing it is best effort: a failure never stops the write
the walk is for (a checkpoint appended to a run log), and a name of its own a
kill left behind is removed the next time it is written. The files delivered elsewhere (``.claude/``, ``.opencode/``)
are the user's to commit or not.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import stat
import time
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
    there first. (:data:`ASIDE_NAME` matches it, to prune what a killed process left.)"""
    return f".{name}.{os.getpid()}.{secrets.token_hex(8)}{TMP_SUFFIX}"


ASIDE_NAME = r"\.{name}\.(?P<pid>[1-9][0-9]{{0,9}})\.[0-9a-f]{{16}}" + re.escape(TMP_SUFFIX)
"""The names :func:`aside_name` gives ``<name>`` (``.<name>.<pid>.<16 hex>.rimthan-tmp``), as a pattern."""
ASIDE_BOUND = 3600.0
"""Seconds after its making (its ctime) when a file so named is a leftover whatever its pid says (a pid reused):
each is unlinked right after its use (``files.remove_held``, :func:`keep_out_of_git`), so a live one is never that
old."""


def keep_out_of_git(at: int, folder: Path) -> None:
    """Write ``.gitignore`` (:data:`IGNORE_TEXT`) in ``folder``, open as ``at``, unless something is at that name.

    Best effort: the run's files matter more than the ignore file, so a write that fails (a full disk, a folder
    the bridge may not add a name to) leaves nothing at that name and raises nothing; the next walk into the folder
    tries again, and the failure is kept for the bridge to say once (:func:`unwritten_notes`). What a process killed
    while writing it left aside is removed first (:func:`prune_aside_at`).
    """
    try:
        os.stat(IGNORE_NAME, dir_fd=at, follow_symlinks=False)
        return
    except FileNotFoundError:
        pass
    except OSError:
        return
    prune_aside_at(at, IGNORE_NAME)
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
    except OSError as exc:  # (nothing at IGNORE_NAME: the next walk into the folder writes it)
        if str(folder) not in _SAID:
            _UNSAID[str(folder)] = exc.strerror or type(exc).__name__
    finally:
        with contextlib.suppress(OSError):
            os.unlink(aside, dir_fd=at)


_UNSAID: dict[str, str] = {}  # each folder whose .gitignore could not be written, and why: not said yet
_SAID: set[str] = set()  # the folders said (:func:`unwritten_notes`): once each, for the life of the process


def unwritten_notes() -> list[str]:
    """A note for each folder whose ``.gitignore`` :func:`keep_out_of_git` could not write since the last call, each
    folder said once (the bridge puts them before a reply, as it does its other notes); taken by the call."""
    notes = [
        f"Note: the bridge could not write {folder}/{IGNORE_NAME} ({why}), which keeps its run logs (checkpoint "
        f"tokens), locks and copies out of the project's git, so `git add -A` would commit them. Tell the user, who "
        f"can add {OWN_FOLDER}/ to the project's .gitignore; the run goes on, and the bridge writes the file once "
        "it can."
        for folder, why in _UNSAID.items()
    ]
    _SAID.update(_UNSAID)
    _UNSAID.clear()
    return notes


def prune_aside_at(at: int, name: str, now: float | None = None) -> list[str]:
    """Remove what a killed process left aside for ``name`` in the folder open as ``at``: the regular files named so
    (:data:`ASIDE_NAME`, ``name``'s only) whose process is gone, or made more than :data:`ASIDE_BOUND` seconds before
    ``now``; a live process's is its write or remove in progress, kept. Best effort; the names removed."""
    pattern = re.compile(ASIDE_NAME.format(name=re.escape(name)))
    removed: list[str] = []
    with contextlib.suppress(OSError):
        for entry in os.listdir(at):
            found = pattern.fullmatch(entry)
            with contextlib.suppress(OSError):
                if found is not None and _left_over(os.stat(entry, dir_fd=at, follow_symlinks=False), found, now):
                    os.unlink(entry, dir_fd=at)
                    removed.append(entry)
    return removed


def _left_over(st: os.stat_result, found: re.Match[str], now: float | None) -> bool:
    """Whether an aside file so named is a leftover: a regular file whose process is gone, or too old to be live."""
    too_old = (time.time() if now is None else now) - st.st_ctime > ASIDE_BOUND
    return stat.S_ISREG(st.st_mode) and (too_old or not _alive(int(found["pid"])))


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists (another user's too); unsure (a pid out of range) counts as alive: kept."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):
        return True
    return True
