"""The release tree walk: what is on disk, and nothing a release may not hold.

The walk's step of the verification path (``verify.py``): it follows no
symbolic link, refuses links, special files, names that clash by case or
normalisation and anything outside the layout (``manifest.json``,
``SHA256SUMS``, ``signatures/*.sig``, ``catalogue/``), and tells the catalogue's
files apart by their directory entries alone; each one's type, link count and
size are checked later on the descriptor it is hashed through.
"""

from __future__ import annotations

import os
import stat
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

from rimthan_workflow_registry.errors import FailureCode, ReleaseVerificationError
from rimthan_workflow_registry.release.format import (
    CATALOGUE_DIR,
    CHECKSUMS_NAME,
    MANIFEST_NAME,
    SIGNATURES_DIR,
    sorted_entries,
)

__all__ = ["ReleaseTree", "walk_release"]

_TOP_FILES = {MANIFEST_NAME, CHECKSUMS_NAME}
_TOP_DIRS = {SIGNATURES_DIR, CATALOGUE_DIR}


def _refuse(code: FailureCode, message: str, where: Path | str) -> ReleaseVerificationError:
    return ReleaseVerificationError(code, message, path=str(where))


@dataclass(frozen=True, eq=False, repr=False)  # never compared, hashed or shown (test_build_dataclasses)
class ReleaseTree:
    """What is on disk, by POSIX path.

    ``files``: the lstat of every file outside ``catalogue/`` (manifest,
    checksums, signatures), by path relative to the release root.
    ``catalogue``: the files under ``catalogue/``, by path relative to it,
    told apart by their directory entries' types alone (no ``lstat`` per
    file): each one's type, link count and size are checked on the
    descriptor it is hashed through. ``empty_dirs``: directories under
    ``catalogue/`` with no file anywhere beneath them.
    """

    files: dict[str, os.stat_result] = field(default_factory=dict)
    catalogue: set[str] = field(default_factory=set)
    empty_dirs: list[str] = field(default_factory=list)

    def under(self, prefix: str) -> list[str]:
        return sorted(p for p in self.files if p.startswith(prefix + "/"))


def walk_release(root: Path) -> ReleaseTree:
    """Walk without following symlinks; refuse anything a release may not hold."""
    tree = ReleaseTree()
    _walk_dir(root, "", tree)
    return tree


def _walk_dir(root: Path, rel_dir: str, tree: ReleaseTree) -> int:
    """Walk one directory (its names first, then its entries in name order); how many files lie beneath it."""
    fs_dir = root / rel_dir if rel_dir else root
    entries = sorted_entries(fs_dir, _refuse, unreadable=FailureCode.FILE_MISSING)
    _check_names_distinct(fs_dir, [entry.name for entry in entries])
    if rel_dir == CATALOGUE_DIR or rel_dir.startswith(CATALOGUE_DIR + "/"):
        return _walk_catalogue_dir(root, rel_dir, fs_dir, entries, tree)
    found = 0
    for entry in entries:
        rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
        info = entry.stat(follow_symlinks=False)
        is_dir = _is_dir(info, fs_dir / entry.name)
        _check_layout(rel, is_dir, fs_dir / entry.name)
        if is_dir:
            found += _walk_dir(root, rel, tree)
            continue
        if info.st_nlink > 1:
            raise _refuse(
                FailureCode.FILE_TYPE_FORBIDDEN, f"is hard-linked ({info.st_nlink} links)", fs_dir / entry.name
            )
        tree.files[rel] = info
        found += 1
    return found


def _walk_catalogue_dir(
    root: Path, rel_dir: str, fs_dir: Path, entries: list[os.DirEntry[str]], tree: ReleaseTree
) -> int:
    """A directory under ``catalogue/``: any layout, regular files and directories only (by entry type)."""
    prefix = rel_dir[len(CATALOGUE_DIR) + 1 :] + "/" if rel_dir != CATALOGUE_DIR else ""
    files = [entry.name for entry in entries if entry.is_file(follow_symlinks=False)]
    tree.catalogue.update(map(prefix.__add__, files))  # a file cannot fail: the rest, in name order, may
    found = len(files)
    if found == len(entries):  # the common leaf directory: files only, one C-speed pass each
        return found
    for entry in entries:
        if entry.is_file(follow_symlinks=False):
            continue
        if entry.is_dir(follow_symlinks=False):
            rel = f"{rel_dir}/{entry.name}"
            beneath = _walk_dir(root, rel, tree)
            if not beneath:
                tree.empty_dirs.append(rel)
            found += beneath
        else:
            _is_dir(entry.stat(follow_symlinks=False), fs_dir / entry.name)  # raises: a link or special file
            raise _refuse(FailureCode.FILE_TYPE_FORBIDDEN, "changed type while it was walked", fs_dir / entry.name)
    return found


def _is_dir(info: os.stat_result, where: Path) -> bool:
    """Whether an entry (its lstat) is a directory; refuses what is neither that nor a regular file."""
    mode = info.st_mode
    if stat.S_ISLNK(mode):
        raise _refuse(FailureCode.FILE_TYPE_FORBIDDEN, "is a symbolic link (releases hold regular files only)", where)
    if stat.S_ISDIR(mode):
        return True
    if not stat.S_ISREG(mode):
        raise _refuse(FailureCode.FILE_TYPE_FORBIDDEN, "is a special file (FIFO, socket or device)", where)
    return False


def _check_names_distinct(fs_dir: Path, names: list[str]) -> None:
    """No two names in one directory are equal after NFC normalisation and case folding.

    Folded in one call per directory: NUL is in no file name and composes and
    folds with nothing, so the joined names fold exactly as each one alone.
    Only on a clash are the names walked one by one, to name the first.
    """
    if len(set(unicodedata.normalize("NFC", "\0".join(names)).casefold().split("\0"))) == len(names) or not names:
        return
    folded: dict[str, str] = {}
    for name in names:
        key = unicodedata.normalize("NFC", name).casefold()
        if key in folded:
            raise _refuse(
                FailureCode.PATH_UNSAFE, f"collides with {folded[key]!r} by case or normalisation", fs_dir / name
            )
        folded[key] = name


def _check_layout(rel: str, is_dir: bool, where: Path) -> None:
    """Only manifest.json, SHA256SUMS, signatures/*.sig files and catalogue/ may exist."""
    parts = rel.split("/")
    top = parts[0]
    if len(parts) == 1:
        allowed = top in _TOP_DIRS if is_dir else top in _TOP_FILES
    elif top == SIGNATURES_DIR:
        allowed = len(parts) == 2 and not is_dir
    else:
        allowed = top == CATALOGUE_DIR
    if not allowed:
        kind = "directory" if is_dir else "file"
        raise _refuse(FailureCode.FILE_UNLISTED, f"{kind} is not part of the release layout", where)
