"""The files a scripted scenario reads from a catalogue: reached through real folders, never a symbolic link.

A scenario is given a catalogue's ``examples/`` folder (a release's, or a
source's); it lists and reads the worked examples there and the catalogue's
own ``catalogue.toml`` and workflow files beside it. Each is reached by the
walk the bridge reads a project with (:func:`~rimthan_host.files.open_folder`:
each folder below the one given opened relative to the last, the file opened
in it, never through a link), so a link in a copied release folder is refused,
naming it, and nothing outside the folder given is read. The folder given is
reached as the caller named it.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path, PurePosixPath

from rimthan_workflow_registry.limits import MAX_CATALOGUE_FILE_BYTES

from .files import ProjectPath, file_status, folder_entries, read_regular, symlink_refused
from .protocol import HarnessError


def example_paths(root: Path) -> list[str]:
    """Every regular file below ``root``, as a path relative to it (``my-flow/summary.json``); :class:`HarnessError`
    naming a symbolic link found there (never followed)."""
    found: list[str] = []
    pending = [PurePosixPath()]
    while pending:
        here = pending.pop()
        for name, status in sorted(_entries(root, here).items()):
            if stat.S_ISLNK(status.st_mode):  # (neither followed nor passed over: the examples it holds are not read)
                raise _unreadable(symlink_refused(root / here / name))
            if stat.S_ISDIR(status.st_mode):
                pending.append(here / name)
            elif stat.S_ISREG(status.st_mode):
                found.append((here / name).as_posix())
    return found


def _entries(root: Path, relative: PurePosixPath) -> dict[str, os.stat_result]:
    try:
        return folder_entries(ProjectPath(root, relative))
    except OSError as exc:
        raise _unreadable(exc) from None


def holds(root: Path, relative: str) -> bool:
    """Whether something is at ``root / relative`` (a link there counts, and is refused when read)."""
    try:
        return file_status(ProjectPath(root, PurePosixPath(relative))) is not None
    except OSError as exc:
        raise _unreadable(exc) from None


def read_example(root: Path, relative: str) -> bytes:
    """The bytes of the regular file ``root / relative``; :class:`HarnessError` naming it if it is missing, a link
    (or one on the way), not a regular file, or larger than any catalogue file."""
    try:
        return read_regular(ProjectPath(root, PurePosixPath(relative)), MAX_CATALOGUE_FILE_BYTES)
    except OSError as exc:
        raise _unreadable(exc) from None


def read_example_text(root: Path, relative: str) -> str:
    """:func:`read_example` as UTF-8 text."""
    data = read_example(root, relative)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise HarnessError(f"{root / relative} is not UTF-8 text") from None


def _unreadable(exc: OSError) -> HarnessError:
    """The scenario's refusal of a file it cannot read (a link: said with why it is not followed)."""
    why = "; a scenario reads its catalogue's files only through real folders inside the folder it is given"
    return HarnessError(f"{exc.filename}: {exc.strerror}{why if exc.errno == errno.ELOOP else ''}")
