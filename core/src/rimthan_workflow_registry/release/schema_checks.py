"""Which bytes already passed a check whose answer depends only on the bytes (by SHA-256 and checker version).

Two such checks are costly enough to remember. Checking a catalogue schema
against the 2020-12 metaschema costs 15-25 ms per schema in jsonschema (its
``$dynamicRef`` resolution), most of the load of a small release; checking
that a manifest is its own RFC 8785 form re-serialises it in Python (about
0.1 s for 10,000 files). Each answer is remembered under ``sha256(bytes)``
plus the checker's identity (:func:`validator_version`,
:func:`canonical_form_version`): bytes never seen before are always checked,
and a new library version invalidates its entries. Only passes are
remembered; bytes that fail are checked (and refused) every time. A manifest
is remembered only once its signatures verified, so unsigned input never
fills the memory.

The memory is per process (:data:`SCHEMA_CHECKS`); a server persists it in
its state directory (:meth:`SchemaCheckCache.persist_to`), beside the
checkpoint keys and the activation floor, so a restart on the same releases
skips the checks. Whoever can write that directory can already forge
checkpoints, so the file adds no new trust; an unreadable or malformed file
is ignored (every check runs again), never trusted. It is only an
optimisation: a file that cannot be written (a full or read-only state
directory) is skipped, and :attr:`SchemaCheckCache.unwritten` says why, for
the server to warn about; it never stops a start. A file a newer Rimthan
version wrote (a rollback, or a newer replica sharing the directory) is left
as it is: nothing read from it, never rewritten in this version's format, and
``unwritten`` says so.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from ..canonical import sha256_hex
from ..small_files import read_small_file

if TYPE_CHECKING:
    from ..state_formats import NewerFormat

SCHEMA_CHECKS_FILE = "schema-checks.json"
_FORMAT = "rimthan.schema-checks/1"
_MAX_ENTRIES = 4096  # a bound on the file; a server sees a handful of catalogues
_MAX_FILE_BYTES = 4 * 1024 * 1024  # _MAX_ENTRIES keys as _write writes them, several times over
METASCHEMA = "https://json-schema.org/draft/2020-12/schema"  # what catalogue_rules.check_schemas checks against
# What check_schemas checks beside the metaschema: a new rule, a new name (old passes void).
SCHEMA_RULES = "local-refs+linear-patterns"


@cache
def validator_version() -> str:
    """What the check's answer depends on besides the bytes: jsonschema, the metaschema, our rules, the format checkers.

    A format is checkable (the check refuses a schema using any other) only
    while the library jsonschema checks it with is installed, so the key binds
    every distribution installed (by its ``.dist-info`` directory name, which
    carries its version): installing, upgrading or removing any package
    invalidates the remembered passes, which only costs the checks once.
    Listing the directories is one ``listdir`` per ``sys.path`` entry, where
    asking ``importlib.metadata`` for each format library took 3-4 ms apiece.
    """
    installed = _installed_distributions()
    digest = sha256_hex("\n".join(installed).encode())[:16]
    return f"{_distribution('jsonschema', installed)}:{METASCHEMA}:{SCHEMA_RULES}:env-{digest}"


@cache
def _installed_distributions() -> tuple[str, ...]:
    """The ``NAME-VERSION`` of every distribution on ``sys.path``, sorted."""
    found: set[str] = set()
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:  # a zip file, or a directory that is gone
            continue
        found.update(name.rpartition(".")[0] for name in names if name.endswith((".dist-info", ".egg-info")))
    return tuple(sorted(found))


def _distribution(name: str, installed: tuple[str, ...]) -> str:
    """``NAME-VERSION`` of an installed distribution (from the listing; ``importlib.metadata`` if not found there)."""
    prefix = f"{name}-"
    for found in installed:
        if found.startswith(prefix) and found[len(prefix) : len(prefix) + 1].isdigit():
            return found
    from importlib import metadata  # the fallback only: importing it costs more than the listing

    return f"{name}-{metadata.version(name)}"


@cache
def canonical_form_version() -> str:
    """What the manifest's canonical-form check depends on besides the bytes: the RFC 8785 library."""
    return _distribution("rfc8785", _installed_distributions())


def check_key(data: bytes, checker: str | None = None, *, sha256: str | None = None) -> str:
    """The memory's key for ``data`` passing ``checker`` (default: the metaschema check).

    ``sha256``: the hex SHA-256 of ``data`` when the caller computed it already
    (a 10,000-file manifest is 1.7 MB: hashed once per load, not per use).
    """
    return f"{sha256 if sha256 is not None else sha256_hex(data)}:{checker or validator_version()}"


class SchemaCheckCache:
    """Keys (:func:`check_key`) of bytes that passed a check (the metaschema check unless ``checker`` says)."""

    def __init__(self) -> None:
        self._passed: set[str] = set()
        self._path: Path | None = None
        self._on_disk: set[str] = set()
        self._lock = threading.Lock()
        self.unwritten: str | None = None  # why the last write failed (the file, the OS's reason); None once written

    def passed(self, data: bytes, checker: str | None = None, *, sha256: str | None = None) -> bool:
        """Whether ``data`` passed ``checker`` before (``sha256``: as for :func:`check_key`)."""
        return check_key(data, checker, sha256=sha256) in self._passed

    def remember(self, blobs: Iterable[bytes], checker: str | None = None) -> None:
        """Record that ``blobs`` passed (call only after the check succeeded for every one of them)."""
        self.remember_keys({check_key(data, checker) for data in blobs})

    def remember_keys(self, keys: set[str]) -> None:
        """Record the :func:`check_key` keys of bytes that passed (only after the check succeeded)."""
        with self._lock:
            self._passed |= keys
            if self._path is not None and not keys <= self._on_disk:
                self._write(self._path)

    def persist_to(self, path: Path | None) -> None:
        """Load earlier passes from ``path`` (if it is a well-formed file) and write new ones there.

        ``None`` stops writing (what was learnt stays in this process).
        """
        with self._lock:
            found = _read(path) if path is not None else set()
            if not isinstance(found, set):  # left as a newer version wrote it: never rewritten in this format
                self._path, self._on_disk, self.unwritten = None, set(), f"{path}: {found.reason()}"
                return
            self._path, self._on_disk = path, found
            self._passed |= self._on_disk

    def _write(self, path: Path) -> None:
        import tempfile  # only when something new passed: a rebuild of the same catalogue never imports it

        keys = sorted(self._passed)[-_MAX_ENTRIES:]
        text = json.dumps({"format": _FORMAT, "passed": keys}, indent=1) + "\n"
        tmp: str | None = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.replace(tmp, path)
            self._on_disk, self.unwritten = set(keys), None
        except OSError as exc:  # a cache that cannot be written only costs the checks again next start
            self.unwritten = f"{path}: {exc.strerror or exc}"
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)


def _read(path: Path) -> set[str] | NewerFormat:
    """The keys a well-formed cache file holds; anything else (a FIFO, never waited on; a huge file) holds none;
    a file a newer version wrote, its format."""
    try:
        data = read_small_file(path, _MAX_FILE_BYTES)
        document = json.loads(data.decode("utf-8")) if len(data) <= _MAX_FILE_BYTES else None
    except (OSError, ValueError, RecursionError):  # RecursionError: nesting deeper than the stack (a serve crashed)
        return set()
    if not isinstance(document, dict):
        return set()
    if document.get("format") != _FORMAT:
        from ..state_formats import newer_format  # only for a file some other version wrote

        return newer_format(document.get("format"), _FORMAT) or set()
    passed = document.get("passed")
    if not isinstance(passed, list):
        return set()
    return {key for key in passed if isinstance(key, str)}


SCHEMA_CHECKS = SchemaCheckCache()
