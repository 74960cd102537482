"""Which paths may name a release's catalogue files, and which sets of them can stand together.

:func:`path_problem` is the rule for one path (relative POSIX, no ``.``/``..``
or empty segments, no backslash or control character, NFC, not overlong), so
no listed file can escape the release directory or mean something else on
another filesystem; :func:`unsafe_paths` applies it to a whole listing in
a few C-speed scans. :func:`path_set_problem` refuses a set that no tree can
hold: a path twice, two paths equal up to case, a file that is also a
directory. :func:`hidden_paths` finds each hidden or ``__pycache__`` name
(the names this project's own temporary files take). These are safety rules:
the packager (reading a source), :mod:`.verify` (a release, at every load) and
:mod:`.oci` (layer titles) share them. :func:`is_leftover_name` (an editor's
backup, a patch's leftover, a file browser's file) is a hygiene rule of the
build only: a source may not hold one, but a release signed before the rule
(or listing one) still loads; its bytes are signed and harm nothing.
"""

from __future__ import annotations

import operator
import re
import unicodedata
from collections.abc import Iterable, Sequence
from itertools import repeat

MAX_PATH_LENGTH = 1024
_CONTROL_CHARACTER = re.compile(r"[\x00-\x1f\x7f]")
_SURROGATE = re.compile("[\ud800-\udfff]")  # a lone surrogate (a JSON \ud800 escape): not UTF-8
_DOT_SEGMENT = re.compile(r"(?:^|/)\.{1,2}(?:/|$)")
# _CONTROL_CHARACTER but NUL, one string each: for paths joined by NUL (counted apart), each searched for at
# C speed (a regular expression over 10,000 joined paths took 4-13 ms, these scans take 1 ms in all)
_JOINED_CONTROL_CHARACTERS = tuple(chr(code) for code in (*range(1, 0x20), 0x7F))
_HEAD = operator.itemgetter(0)


def path_problem(path: str) -> str | None:
    """Why ``path`` may not name a catalogue file, or ``None`` if it is safe.

    Safe means: relative POSIX, no ``.``/``..``/empty segments, no backslash,
    no control characters or lone surrogates, NFC-normalised, not overlong. Such a path cannot
    escape the release directory and means the same on every filesystem.
    """
    if not path:
        return "empty path"
    if len(path) > MAX_PATH_LENGTH:
        return "path is too long"
    if path.startswith("/"):
        return "absolute path"
    if "\\" in path:
        return "backslash in path"
    if _CONTROL_CHARACTER.search(path):
        return "control character in path"
    if _SURROGATE.search(path):
        return "lone surrogate in path (not UTF-8)"
    if not unicodedata.is_normalized("NFC", path):
        return "path is not NFC-normalised"
    if "//" in path or path.endswith("/"):
        return "empty path segment"
    dots = _DOT_SEGMENT.search(path)
    if dots is not None:
        return f"{dots.group().strip('/')!r} path segment"
    return None


def _has_dot_segment(joined: str) -> bool:
    """Whether any of the paths joined by NUL has a ``.`` or ``..`` segment (NUL ends a segment like ``/``)."""
    slashed = "/" + joined.replace("\0", "/") + "/"  # every segment now lies between two slashes
    return "/./" in slashed or "/../" in slashed


def first_unsafe_path(paths: Sequence[str]) -> tuple[str, str] | None:
    """``(path, problem)`` for the first of ``paths`` that :func:`path_problem` refuses, else ``None``."""
    return next(iter(unsafe_paths(paths)), None)


def unsafe_paths(paths: Sequence[str]) -> list[tuple[str, str]]:
    """``(path, problem)`` for each of ``paths`` that :func:`path_problem` refuses, in order (none: ``[]``).

    A release lists every file, so the common answer (none) is decided on the
    paths joined by NUL, a few C-speed scans in all: NUL is itself a control
    character (so a path holding one is seen by the count), composes with
    nothing (so the joined text is NFC exactly when each path is) and is
    treated like ``/`` where a segment may end. Only a refusal walks
    the paths one by one, to name each.
    """
    joined = "\0".join(paths)
    if (
        paths
        and joined.count("\0") == len(paths) - 1
        and min(map(len, paths)) >= 1
        and max(map(len, paths)) <= MAX_PATH_LENGTH
        and not joined.startswith("/")
        and "\0/" not in joined
        and "\\" not in joined
        and not any(control in joined for control in _JOINED_CONTROL_CHARACTERS)
        and unicodedata.is_normalized("NFC", joined)
        and "//" not in joined
        and "/\0" not in joined
        and not joined.endswith("/")
        and not _has_dot_segment(joined)
    ):
        return []
    return [(path, problem) for path in paths if (problem := path_problem(path)) is not None]


def _fold(path: str) -> str:
    return unicodedata.normalize("NFC", path).casefold()


REFUSED_NAMES = frozenset({"__pycache__"})  # with every name that starts with ".": never shipped in a release
HIDDEN_PROBLEM = "hidden files, hidden directories and __pycache__ are never part of a release"


def is_hidden_name(name: str) -> bool:
    """Whether a file or directory name is hidden (``.`` first) or ``__pycache__``: what a source may not hold."""
    return name.startswith(".") or name in REFUSED_NAMES


LEFTOVER_SUFFIXES = ("~", ".swp", ".swo", ".orig", ".rej")
"""Names an editor's backup or swap file, or a patch's leftover, ends with (lowercased); ``#name#`` is Emacs's
auto-save. None is a file a release means to ship; ``.#name`` (an Emacs lock) is hidden, and so are the
temporary names this project writes (``.pull-*``, ``.damaged-*``, ``.<name>.sig-*``)."""
FILE_BROWSER_NAMES = ("thumbs.db", "ehthumbs.db", "ehthumbs_vista.db", "desktop.ini")
"""Whole names (lowercased) of the files Windows' file browser leaves in a folder it shows (thumbnails, folder
settings): bytes nobody wrote for the release. macOS's (``.DS_Store``, ``._name``) are hidden names already."""


def is_leftover_name(name: str) -> bool:
    """Whether a file name is an editor's backup, swap or auto-save file, a patch's ``.orig``/``.rej``, or a file
    a file browser leaves (``Thumbs.db``, ``desktop.ini``): refused at build only (hygiene, not safety)."""
    lowered = name.lower()
    return (
        lowered.endswith(LEFTOVER_SUFFIXES)
        or lowered in FILE_BROWSER_NAMES
        or (len(name) > 1 and name[0] == name[-1] == "#")
    )


def hidden_paths(paths: Sequence[str]) -> list[str]:
    """Each of ``paths`` with a hidden or ``__pycache__`` segment, in order (none: ``[]``).

    The packager refuses such a name in a source, so no release it builds
    lists one; the common answer (none) is decided on the joined paths.
    """
    joined = "\0".join(paths)
    if not (joined.startswith(".") or "/." in joined or "\0." in joined or any(n in joined for n in REFUSED_NAMES)):
        return []
    return [p for p in paths if any(map(is_hidden_name, p.split("/")))]


def path_set_problem(paths: Iterable[str]) -> tuple[str, str] | None:
    """``(path, reason)`` for the first clash in a set of file paths, else ``None``.

    Clashes: the same path twice, two paths equal up to case (they collide on
    case-insensitive filesystems), or a path that is also a directory prefix of
    another (no tree can hold both).
    """
    ordered = sorted(paths)
    if _clash_free(ordered):
        return None
    folded: dict[str, str] = {}
    for path in ordered:
        key = _fold(path)
        if key in folded:
            other = folded[key]
            return path, ("listed twice" if other == path else f"collides with {other!r} by case")
        folded[key] = path
    checked: set[str] = set()  # directories already known not to be files (each is folded once)
    for path in folded.values():
        parts = path.split("/")
        fresh: list[str] = []
        for depth in range(len(parts) - 1, 0, -1):
            directory = "/".join(parts[:depth])
            if directory in checked:
                break  # so were all of its ancestors
            checked.add(directory)
            fresh.append(directory)
        for directory in reversed(fresh):  # shallowest first
            if _fold(directory) in folded:
                return path, f"{folded[_fold(directory)]!r} is a file, not a directory"
    return None


def _clash_free(paths: list[str]) -> bool:
    """Whether :func:`path_set_problem` finds nothing, decided on sets (folded in one call, see there)."""
    joined = "\0".join(paths)
    if joined.count("\0") != len(paths) - 1:
        return False  # a path holding NUL: let the walk decide (it is refused as unsafe anyway)
    folded = set(_fold(joined).split("\0")) if paths else set()
    if len(folded) != len(paths):
        return False
    directories = set(map(_HEAD, map(str.rpartition, folded, repeat("/")))) - {""}  # a C-speed pass
    ancestors: set[str] = set()
    while directories:  # every directory that holds a listed path, each level added once
        ancestors |= directories
        directories = {d.rpartition("/")[0] for d in directories} - {""} - ancestors
    return not ancestors & folded
