"""Read a catalogue source directory: every file ships, nothing odd is tolerated.

A source holds only what goes into the release (docs/catalogue-format.md), so
anything surprising is refused rather than skipped: symlinks, hidden files or
directories, ``__pycache__``, special files, names that are not UTF-8 or not
safe release paths. The result satisfies the loader's ``CatalogueFiles``
protocol, so the packager validates with exactly the rules the server uses.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from rimthan_workflow_registry.canonical import Sha256, sha256_hex
from rimthan_workflow_registry.errors import CatalogueError, FailureCode, RegistryError, collected
from rimthan_workflow_registry.release import (
    CATALOGUE_MANIFEST_NAME,
    HIDDEN_PROBLEM,
    MANIFEST_NAME,
    OPEN_NOFOLLOW,
    FileEntry,
    first_unsafe_path,
    is_hidden_name,
    is_leftover_name,
    media_type_for,
    path_problem,
    path_set_problem,
    sorted_entries,
)
from rimthan_workflow_registry.whole_writes import write_all

READ_CHUNK = 1024 * 1024
_REBUILD = "build again once nothing is writing to the catalogue source; nothing was published"

Stamp = tuple[int, int, int, int]  # (inode, size, mtime, ctime in ns): the walk's view of a file, checked on every open


def _stamp(info: os.stat_result) -> Stamp:
    return (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)  # ctime: a rewrite that restores mtime


HIDDEN_NEXT = "delete it, or move it out of the catalogue source: renaming a hidden file would ship it"
LEFTOVER_NEXT = "delete it, or move it out of the catalogue source: everything in it ships"
NOT_A_SOURCE_NEXT = (
    "check the SOURCE path: it names the directory that holds catalogue.toml (rimthan-pack init DIRECTORY makes one)"
)


def _refuse(code: FailureCode, message: str, where: Path | str, next_step: str | None = None) -> CatalogueError:
    return CatalogueError(code, message, path=str(where), next_step=next_step)


@dataclass(frozen=True, eq=False, repr=False)  # never compared, hashed or shown (test_build_dataclasses)
class SourceFiles:
    """A catalogue source on disk: its file paths and sizes, read on demand.

    Every read checks that the file is still the one the walk listed (inode,
    size, modification time) and did not change while it was read, so a
    source edited or deleted during a build is refused, never half-copied.
    """

    root: Path
    sizes: Mapping[str, int] = field(repr=False)
    stamps: Mapping[str, Stamp] = field(repr=False, compare=False)
    _prefix: str = field(init=False, repr=False, compare=False)  # "<root>/": file paths built as strings

    def __post_init__(self) -> None:
        object.__setattr__(self, "sizes", MappingProxyType(dict(self.sizes)))
        object.__setattr__(self, "stamps", MappingProxyType(dict(self.stamps)))
        object.__setattr__(self, "_prefix", f"{os.fspath(self.root)}/")

    @property
    def paths(self) -> frozenset[str]:
        return frozenset(self.sizes)

    @property
    def total_size(self) -> int:
        return sum(self.sizes.values())

    def where(self, path: str) -> str:
        return str(self.root / path)

    def open(self, path: str) -> int:
        """An fd for ``path``, refusing a file deleted, changed or swapped for a link or special file since the walk."""
        if path not in self.sizes:
            raise _refuse(FailureCode.REFERENCE_UNRESOLVED, "not a file of this catalogue source", self.where(path))
        try:
            fd = os.open(self._prefix + path, OPEN_NOFOLLOW)
        except FileNotFoundError:
            raise self._changed(path, FailureCode.FILE_MISSING, "was deleted during the build") from None
        except OSError as exc:
            raise _refuse(
                FailureCode.FILE_TYPE_FORBIDDEN, f"cannot be opened safely: {exc.strerror}", self.where(path)
            ) from None
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            raise _refuse(FailureCode.FILE_TYPE_FORBIDDEN, "is not a regular file", self.where(path))
        if _stamp(info) != self.stamps[path]:
            os.close(fd)
            raise self._changed_since_walk(path, info.st_size)
        return fd

    def _changed(self, path: str, code: FailureCode, message: str) -> RegistryError:
        return RegistryError(code, message, path=self.where(path), next_step=_REBUILD)

    def _changed_since_walk(self, path: str, size: int) -> RegistryError:
        if size != self.sizes[path]:
            return self._changed(
                path,
                FailureCode.FILE_SIZE_MISMATCH,
                f"changed during the build: {self.sizes[path]} bytes when listed, {size} bytes when read",
            )
        return self._changed(path, FailureCode.FILE_DIGEST_MISMATCH, "was replaced or rewritten during the build")

    def read(self, path: str) -> bytes:
        fd = self.open(path)
        try:
            chunks = []
            while chunk := self._read(fd, path, READ_CHUNK):
                chunks.append(chunk)
            self._check_unchanged(fd, path)
        finally:
            os.close(fd)
        return b"".join(chunks)

    def _read(self, fd: int, path: str, size: int) -> bytes:
        try:
            return os.read(fd, size)
        except OSError as exc:
            raise self._unreadable(path, exc) from None

    def _unreadable(self, path: str, exc: OSError) -> RegistryError:
        return RegistryError(FailureCode.IO_ERROR, f"cannot be read: {exc.strerror}", path=self.where(path))

    def _check_unchanged(self, fd: int, path: str) -> None:
        """Refuse ``path`` if it changed while it was read (checked on its descriptor after the last read)."""
        info = os.fstat(fd)
        if _stamp(info) != self.stamps[path]:
            raise self._changed_since_walk(path, info.st_size)

    def copy_to(self, path: str, dest_fd: int, buffer: memoryview) -> FileEntry:
        """Stream ``path`` into ``dest_fd`` through ``buffer``; its manifest entry (digest of the bytes copied).

        The bytes are read once, into the caller's buffer (no new object per
        read), and the same bytes are hashed and written. A file smaller than
        the buffer (nearly every file) is one read, one hash and one write. A
        file that changed while it was copied (its size, or its stamp after the
        last read) is refused.
        """
        listed = self.sizes.get(path, -1)
        fd = self.open(path)
        try:
            want = min(len(buffer), listed + 1)  # the walk's size: a small file is one read
            size = self._readv(fd, path, buffer[:want])
            if size < want:  # a regular file reads short only at its end: the whole file, no read for EOF
                chunk = buffer[:size]
                digest = sha256_hex(chunk)
                write_all(dest_fd, chunk)
            else:
                size, digest = self._copy_rest(fd, path, dest_fd, buffer, size)
            if size != listed:
                raise self._changed_since_walk(path, size)
            self._check_unchanged(fd, path)
        finally:
            os.close(fd)
        return FileEntry(path, digest, size, media_type_for(path))  # positional: half the cost of keywords, per file

    def _copy_rest(self, fd: int, path: str, dest_fd: int, buffer: memoryview, first: int) -> tuple[int, str]:
        """Copy a file whose first read filled ``buffer`` (``first`` bytes): its size and SHA-256."""
        hasher = Sha256(buffer[:first])
        write_all(dest_fd, buffer[:first])
        size = first
        while count := self._readv(fd, path, buffer):
            chunk = buffer[:count]
            hasher.update(chunk)
            write_all(dest_fd, chunk)
            size += count
            if count < len(buffer):
                break
        return size, hasher.hexdigest()

    def _readv(self, fd: int, path: str, into: memoryview) -> int:
        try:
            return os.readv(fd, [into])
        except OSError as exc:
            raise self._unreadable(path, exc) from None


def read_source(root: Path | str) -> SourceFiles:
    """Walk a catalogue source (no symlinks followed) and list its files."""
    root = Path(root)
    if not root.is_dir():
        raise _refuse(FailureCode.CATALOGUE_INVALID, "no catalogue source directory here", root, NOT_A_SOURCE_NEXT)
    stamps: dict[str, Stamp] = {}
    leftovers: list[str] = []
    _walk(root, "", stamps, leftovers)
    if leftovers:
        raise _leftovers_refused(root, leftovers)
    sizes = {path: stamp[1] for path, stamp in stamps.items()}
    clash = path_set_problem(sizes)
    if clash is not None:
        raise _refuse(FailureCode.PATH_UNSAFE, clash[1], root / clash[0])
    if CATALOGUE_MANIFEST_NAME not in sizes and MANIFEST_NAME in sizes:
        raise _refuse(
            FailureCode.CATALOGUE_INVALID,
            "this is a built release, not a catalogue source (it has manifest.json and no catalogue.toml)",
            root,
            "pass the catalogue source it was built from (catalogues/NAME/VERSION): a release is built once",
        )
    if CATALOGUE_MANIFEST_NAME not in sizes:
        raise _refuse(
            FailureCode.CATALOGUE_INVALID,
            "a catalogue source is rooted at catalogue.toml",
            root / CATALOGUE_MANIFEST_NAME,
            NOT_A_SOURCE_NEXT,
        )
    return SourceFiles(root=root, sizes=sizes, stamps=stamps)


def _leftovers_refused(root: Path, leftovers: list[str]) -> CatalogueError:
    """One failure per leftover file, in path order (the first raised, the others in ``also``)."""
    each = [_leftover(root, path) for path in sorted(leftovers)]
    return collected(each)


def _leftover(root: Path, path: str) -> CatalogueError:
    return CatalogueError(
        FailureCode.PATH_UNSAFE,
        "an editor backup, swap file, patch leftover or file-browser file (a name ending in ~, .swp, .swo, .orig or "
        ".rej, #name#, Thumbs.db or desktop.ini) would ship in the release",
        path=str(root / path),
        details={"file": path},
        next_step=LEFTOVER_NEXT,
    )


def _walk(root: Path, rel_dir: str, stamps: dict[str, Stamp], leftovers: list[str]) -> None:
    fs_dir = root / rel_dir if rel_dir else root
    entries = sorted_entries(fs_dir, _refuse, unreadable=FailureCode.CATALOGUE_INVALID)
    prefix = f"{rel_dir}/" if rel_dir else ""
    rels = [prefix + entry.name for entry in entries]
    safe = first_unsafe_path(rels) is None  # the common answer for the whole directory, at C speed
    for entry, rel in zip(entries, rels, strict=True):
        if is_hidden_name(entry.name):
            raise _refuse(
                FailureCode.PATH_UNSAFE,
                f"{HIDDEN_PROBLEM}, so a catalogue source may not hold them (everything in the source ships)",
                fs_dir / entry.name,
                HIDDEN_NEXT,
            )
        problem = None if safe else path_problem(rel)
        if problem is not None:
            raise _refuse(FailureCode.PATH_UNSAFE, problem, fs_dir / entry.name)
        info = entry.stat(follow_symlinks=False)
        if stat.S_ISLNK(info.st_mode):
            raise _refuse(
                FailureCode.FILE_TYPE_FORBIDDEN, "is a symbolic link; copy the file instead", fs_dir / entry.name
            )
        if stat.S_ISDIR(info.st_mode):
            _walk(root, rel, stamps, leftovers)
        elif stat.S_ISREG(info.st_mode):
            stamps[rel] = _stamp(info)
            if is_leftover_name(entry.name):
                leftovers.append(rel)
        else:
            raise _refuse(
                FailureCode.FILE_TYPE_FORBIDDEN, "is a special file (FIFO, socket or device)", fs_dir / entry.name
            )
