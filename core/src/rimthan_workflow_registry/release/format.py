"""The release directory layout and its signed manifest.

A release is the directory ``releases/<catalogue>-<version>/``::

    manifest.json            canonical RFC 8785 bytes, no trailing newline
    SHA256SUMS               derived from the manifest, for ``sha256sum -c``
    signatures/<keyid>.sig   raw 64-byte Ed25519 signatures over manifest.json
    catalogue/...            every catalogue source file, byte for byte

This module is the single definition of that format: the records and the
layout; :mod:`.paths` holds the rules for the catalogue's file paths, and
:mod:`.manifest_parse` the closed manifest schema and the strict parser.
Both the packager (writing) and :mod:`.verify` (reading) use them, so the
two cannot drift apart. The manifest digest (``sha256:<hex>`` of the
manifest bytes) is the release's identity everywhere.
"""

from __future__ import annotations

import operator
import os
import re
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import repeat
from pathlib import Path
from typing import Any, Protocol

from rimthan_workflow_registry.canonical import (
    DIGEST_PREFIX,
    SHA256_HEX_PATTERN,
    canonical_bytes,
    digest_bytes,
    sha256_hex,
)
from rimthan_workflow_registry.errors import FailureCode

MANIFEST_FORMAT = "rimthan.release-manifest/1"
MANIFEST_NAME = "manifest.json"
CHECKSUMS_NAME = "SHA256SUMS"
SIGNATURES_DIR = "signatures"
SIGNATURE_SUFFIX = ".sig"
CATALOGUE_DIR = "catalogue"
# The catalogue's own manifest: the TOML file at the catalogue's root naming every workflow file.
CATALOGUE_MANIFEST_NAME = "catalogue.toml"
SIGNATURE_SIZE = 64
MAX_MANIFEST_BYTES = 64 * 1024 * 1024
# How every release or catalogue file is opened for reading: never through a symlink, never blocking on a FIFO.
OPEN_NOFOLLOW = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
MEDIA_TYPES_BY_SUFFIX = {
    ".toml": "application/toml",
    ".json": "application/json",
    ".md": "text/markdown",
}
DEFAULT_MEDIA_TYPE = "application/octet-stream"
# The same table by the text after a path's last dot (each suffix is one dot and a dotless extension), one
# dictionary lookup per file where trying each suffix in turn was a Python loop per file of a 10,000-file build.
_MEDIA_TYPES_BY_EXTENSION = {suffix[1:]: media_type for suffix, media_type in MEDIA_TYPES_BY_SUFFIX.items()}

_SIGNATURE_NAME = re.compile(f"({SHA256_HEX_PATTERN})\\.sig")  # fullmatch: "$" would take "<id>.sig\n"
_PATH = operator.attrgetter("path")


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class FileEntry:
    """One catalogue file: its path under ``catalogue/``, digest, size and media type."""

    path: str
    sha256: str
    size: int
    media_type: str

    @classmethod
    def for_bytes(cls, path: str, data: bytes) -> FileEntry:
        return cls(
            path=path,
            sha256=sha256_hex(data),
            size=len(data),
            media_type=media_type_for(path),
        )

    @property
    def digest(self) -> str:
        """``sha256:<hex>``, the spelling used on the wire and in resources."""
        return DIGEST_PREFIX + self.sha256

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "sha256": self.sha256, "size": self.size, "media_type": self.media_type}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FileEntry:
        return cls(path=data["path"], sha256=data["sha256"], size=data["size"], media_type=data["media_type"])

    @classmethod
    def adopt_all(cls, entries: list[dict[str, Any]]) -> tuple[FileEntry, ...]:
        """Records that take ``entries``' dictionaries as their own attributes: no copy, no call per entry.

        Only for dictionaries already checked to hold exactly ``path``, ``sha256``, ``size`` and
        ``media_type`` that nobody else holds (a parsed manifest's): a change to one would change its
        frozen record. 10,000 records field by field took ~10 ms of a load; this is two ``map`` passes
        (a field read is +20-50 ns: the parser's keys are not interned).
        """
        records = list(map(object.__new__, repeat(cls, len(entries))))
        deque(map(object.__setattr__, records, repeat("__dict__"), entries), maxlen=0)
        return tuple(records)


@dataclass(frozen=True)
class WorkflowEntry:
    """A workflow the release carries, as named in the manifest."""

    id: str
    version: str
    owner: str
    entry_aliases: tuple[str, ...]
    title: str

    @property
    def sort_key(self) -> tuple[str, str, str]:
        return (self.id, self.version, self.owner)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "version": self.version,
            "owner": self.owner,
            "entry_aliases": list(self.entry_aliases),
            "title": self.title,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WorkflowEntry:
        return cls(
            id=data["id"],
            version=data["version"],
            owner=data["owner"],
            entry_aliases=tuple(data["entry_aliases"]),
            title=data["title"],
        )


@dataclass(frozen=True)
class HostAdapterEntry:
    """A host adapter the release carries, as named in the manifest."""

    id: str
    version: str
    harness: str

    @property
    def sort_key(self) -> tuple[str, str]:
        return (self.id, self.version)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "version": self.version, "harness": self.harness}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> HostAdapterEntry:
        return cls(id=data["id"], version=data["version"], harness=data["harness"])


@dataclass(frozen=True)
class ReleaseIdentity:
    """Who the release is: catalogue name and version, title, scope and profile."""

    catalogue: str
    version: str
    title: str
    scope_name: str
    scope_profile: str
    created: int | None = None

    @property
    def id(self) -> str:
        """``name@version`` - the release id used in checkpoints."""
        return f"{self.catalogue}@{self.version}"

    @property
    def directory_name(self) -> str:
        """``name-version`` - the directory name under ``releases/``."""
        return f"{self.catalogue}-{self.version}"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "catalogue": self.catalogue,
            "version": self.version,
            "id": self.id,
            "title": self.title,
            "scope": {"name": self.scope_name, "profile": self.scope_profile},
        }
        if self.created is not None:
            out["created"] = self.created
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ReleaseIdentity:
        return cls(
            catalogue=data["catalogue"],
            version=data["version"],
            title=data["title"],
            scope_name=data["scope"]["name"],
            scope_profile=data["scope"]["profile"],
            created=data.get("created"),
        )


@dataclass(frozen=True)
class Manifest:
    """The signed description of a release. ``to_bytes`` is what gets signed."""

    release: ReleaseIdentity
    workflows: tuple[WorkflowEntry, ...]
    host_adapters: tuple[HostAdapterEntry, ...]
    files: tuple[FileEntry, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "format": MANIFEST_FORMAT,
            "release": self.release.to_json(),
            "workflows": [w.to_json() for w in self.workflows],
            "host_adapters": [a.to_json() for a in self.host_adapters],
            "files": [f.to_json() for f in self.files],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], *, adopt_files: bool = False) -> Manifest:
        """Records from already schema-validated JSON (use :func:`parse_manifest` for bytes).

        ``adopt_files``: the file entries' dictionaries become the records' own
        (:meth:`FileEntry.adopt_all`): for a freshly parsed value nobody else holds.
        """
        return cls(
            release=ReleaseIdentity.from_json(data["release"]),
            workflows=tuple(WorkflowEntry.from_json(w) for w in data["workflows"]),
            host_adapters=tuple(HostAdapterEntry.from_json(a) for a in data["host_adapters"]),
            # positional: a manifest lists every file, and keyword calls cost twice as much per entry
            files=FileEntry.adopt_all(data["files"])
            if adopt_files
            else tuple([FileEntry(f["path"], f["sha256"], f["size"], f["media_type"]) for f in data["files"]]),
        )

    def to_bytes(self) -> bytes:
        return canonical_bytes(self.to_json())

    @cached_property
    def paths(self) -> tuple[str, ...]:
        """Every file's path, in manifest order (built once: each verification step used to build its own list)."""
        return tuple(map(_PATH, self.files))

    @property
    def digest(self) -> str:
        return manifest_digest(self.to_bytes())

    @property
    def total_size(self) -> int:
        return sum(map(operator.attrgetter("size"), self.files))

    def entry(self, path: str) -> FileEntry | None:
        return next((f for f in self.files if f.path == path), None)


# --------------------------------------------------------------------------- helpers


def media_type_for(path: str) -> str:
    """Media type recorded in the manifest: the suffix of :data:`MEDIA_TYPES_BY_SUFFIX` the path ends with."""
    _, dot, extension = path.rpartition(".")
    return _MEDIA_TYPES_BY_EXTENSION.get(extension, DEFAULT_MEDIA_TYPE) if dot else DEFAULT_MEDIA_TYPE


def manifest_digest(manifest_bytes: bytes) -> str:
    """``sha256:<hex>`` of the exact manifest bytes: the release's identity."""
    return digest_bytes(manifest_bytes)


def signature_name(key_id: str) -> str:
    return f"{key_id}{SIGNATURE_SUFFIX}"


def key_id_from_signature_name(name: str) -> str | None:
    """The key id a ``signatures/`` file name claims, or ``None`` if misnamed."""
    match = _SIGNATURE_NAME.fullmatch(name)
    return match.group(1) if match else None


def render_checksums(manifest: Manifest) -> bytes:
    """``SHA256SUMS`` bytes: ``<hex>  catalogue/<path>`` per file, sorted by path."""
    lines = [f"{f.sha256}  {CATALOGUE_DIR}/{f.path}\n" for f in sorted(manifest.files, key=_PATH)]
    return "".join(lines).encode("utf-8")


def sorted_entries(
    fs_dir: Path, refuse: Callable[[FailureCode, str, Path | str], Exception], *, unreadable: FailureCode
) -> list[os.DirEntry[str]]:
    """``fs_dir``'s entries by name, for a walk that follows no symlink.

    Raises ``refuse(code, message, where)`` for a directory that cannot be
    listed (``unreadable``) or a name that is not valid UTF-8; the walker
    applies its own rules to what is in the list (release layout, source
    hygiene) and builds an entry's path only to name it in a refusal (a path
    object per entry is a measurable share of walking 10,000 files).
    """
    try:
        with os.scandir(fs_dir) as it:
            entries = sorted(it, key=operator.attrgetter("name"))
    except OSError as exc:
        raise refuse(unreadable, f"directory cannot be read: {exc.strerror}", fs_dir) from None
    try:
        "/".join([entry.name for entry in entries]).encode("utf-8")  # one C-speed check for the whole directory
    except UnicodeEncodeError:
        for entry in entries:  # name the first that fails
            try:
                entry.name.encode("utf-8")
            except UnicodeEncodeError:
                where = repr(str(fs_dir / entry.name))
                raise refuse(FailureCode.PATH_UNSAFE, "file name is not valid UTF-8", where) from None
    return entries


class CatalogueLike(Protocol):
    """What :func:`manifest_for` needs from a loaded catalogue."""

    # Read-only members: the catalogue model is frozen dataclasses.
    @property
    def name(self) -> str: ...
    @property
    def version(self) -> str: ...
    @property
    def title(self) -> str: ...
    @property
    def scope(self) -> Any: ...
    @property
    def workflows(self) -> Sequence[Any]: ...
    @property
    def host_adapters(self) -> Sequence[Any]: ...


def identity_for(catalogue: CatalogueLike, created: int | None = None) -> ReleaseIdentity:
    return ReleaseIdentity(
        catalogue=catalogue.name,
        version=catalogue.version,
        title=catalogue.title,
        scope_name=catalogue.scope.name,
        scope_profile=catalogue.scope.profile,
        created=created,
    )


def workflow_entries(catalogue: CatalogueLike) -> tuple[WorkflowEntry, ...]:
    entries = (
        WorkflowEntry(id=w.id, version=w.version, owner=w.owner, entry_aliases=tuple(w.entry_aliases), title=w.title)
        for w in catalogue.workflows
    )
    return tuple(sorted(entries, key=lambda e: e.sort_key))


def adapter_entries(catalogue: CatalogueLike) -> tuple[HostAdapterEntry, ...]:
    entries = (HostAdapterEntry(id=a.id, version=a.version, harness=a.harness) for a in catalogue.host_adapters)
    return tuple(sorted(entries, key=lambda e: e.sort_key))


def manifest_for(catalogue: CatalogueLike, files: Iterable[FileEntry], created: int | None = None) -> Manifest:
    """The manifest of a release of ``catalogue`` holding ``files`` (sorted by path)."""
    return Manifest(
        release=identity_for(catalogue, created),
        workflows=workflow_entries(catalogue),
        host_adapters=adapter_entries(catalogue),
        files=tuple(sorted(files, key=operator.attrgetter("path"))),
    )
