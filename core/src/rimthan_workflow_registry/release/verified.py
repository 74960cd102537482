"""A release that passed verification, and digest-checked reads of its files.

Only :func:`rimthan_workflow_registry.release.verify.verify_release` constructs a
:class:`VerifiedRelease`. After that, every byte it hands out is checked
against the signed manifest: the files the catalogue loader read (catalogue
TOML, schemas, instructions and assets - what step payloads serve) are kept,
within a budget, as the copy read and checked during verification; any other
file is re-read from disk and re-checked on every read. A release that
changes on disk after load therefore never changes what is served - the read
fails instead. Files nobody reads at load time (bulk data) are hashed but not
kept, so memory does not grow with the release.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from rimthan_workflow_registry.canonical import Sha256, sha256_hex
from rimthan_workflow_registry.errors import FailureCode, ReleaseVerificationError
from rimthan_workflow_registry.release.catalogue import Catalogue
from rimthan_workflow_registry.release.format import CATALOGUE_DIR, OPEN_NOFOLLOW, FileEntry, Manifest
from rimthan_workflow_registry.release.loader import SchemaSet

READ_CHUNK = 1024 * 1024
# Threads that may read and hash a release's files (verification, and the packager's copy): the cores
# this process may use, at most four. Reads and SHA-256 of large buffers release the GIL.
HASH_WORKERS = min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
THREADED_MIN_BYTES = 8 * 1024 * 1024
# A directory opened only to open files in it: resolved as a path's components are (search permission, no
# read permission needed where ``O_PATH`` exists), never read.
_OPENAT = os.open in os.supports_dir_fd
_OPEN_DIRECTORY = getattr(os, "O_PATH", os.O_RDONLY) | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)


def copy_threads(files: int, total_bytes: int) -> int:
    """How many threads the packager copies ``files`` files of ``total_bytes`` on (1: the calling thread).

    The copy opens, reads, hashes and writes, all of which release the GIL,
    and runs through :mod:`.parallel` like verification (the GIL switch
    interval shortened), so it takes the same rule as :func:`verify_threads`.
    Two threads cost no more CPU than one (10,000 files / 256 MiB: user
    0.67-0.72 s, sys 1.6-1.65 s either way, medians of four alternating runs
    under load) and a small catalogue stays on the calling thread.
    """
    return verify_threads(files, total_bytes)


def verify_threads(files: int, total_bytes: int) -> int:
    """How many threads verification checks ``files`` files of ``total_bytes`` on (1: the calling thread).

    Verification opens, reads and hashes with the GIL switch interval
    shortened (:mod:`.parallel`), which is what made threads pay for small
    files too: 10,000 files / 256 MiB hashed in 0.56x of ``openssl dgst``'s
    time on two threads, 0.81x on one. A small release (under
    ``THREADED_MIN_BYTES``) stays on the calling thread, where its fixed costs lie.
    """
    return HASH_WORKERS if total_bytes >= THREADED_MIN_BYTES else 1


CACHE_FILE_LIMIT = 1024 * 1024
_CACHE_TOTAL_LIMIT = 64 * 1024 * 1024


def read_checked(fs_path: Path | str, entry: FileEntry, *, where: str) -> bytes:
    """The bytes of ``fs_path`` if they are exactly ``entry`` (size and SHA-256).

    Opens without following a final symlink and without blocking on a FIFO,
    refuses anything but a single-link regular file, and never reads more than
    ``entry.size + 1`` bytes, so endless or oversized data cannot exhaust memory.
    """
    data = _checked(fs_path, entry, where=where, keep=True)
    assert data is not None
    return data


def check_file(fs_path: Path | str, entry: FileEntry, *, where: str) -> None:
    """Exactly the checks of :func:`read_checked`, without keeping the bytes (memory stays flat)."""
    _checked(fs_path, entry, where=where, keep=False)


def check_files(base: str, entries: Sequence[FileEntry]) -> list[ReleaseVerificationError]:
    """:func:`check_file` on ``f"{base}/{entry.path}"`` for each of ``entries`` in order: every failure, in order.

    The same checks with the same failures, but a digest mismatch does not stop the batch: every file is read
    and checked but for its digest (:func:`read_files`) up to the first other failure, which ends the list,
    and every file read whose digest is not listed is a failure of its own (:func:`digest_failures`).
    """
    read, failure = read_files(base, entries)
    found = [mismatch for _, mismatch in digest_failures(base, entries, read)]
    return found if failure is None else [*found, failure]


def stops_file_check(failure: BaseException) -> bool:
    """Whether ``failure`` ends a release's file check: anything but a file whose digest is not listed (its bytes
    were read, so the files after it are still checked and each mismatch said)."""
    return not (isinstance(failure, ReleaseVerificationError) and failure.code is FailureCode.FILE_DIGEST_MISMATCH)


Read = bytes | ReleaseVerificationError | None
"""What :func:`read_files` has of a file: its bytes, or for a large one checked whole, ``None`` or its digest
failure."""


def read_files(
    base: str, entries: Sequence[FileEntry], at: DirectoryAt | None = None
) -> tuple[list[Read], ReleaseVerificationError | None]:
    """The bytes of ``entries`` in order, checked as :func:`check_file` does but for the SHA-256, up to a failure.

    Returns the bytes read (for a file of ``READ_CHUNK`` bytes or more, checked
    completely here, digest included: ``None``, or its digest failure, which
    does not stop the reading) and the failure of the next file, if one failed.
    A file is an ``open``, ``fstat``, ``read`` and ``close`` with only its checks between them (no helper
    call per file), which matters when two threads share the GIL for 10,000 files. With ``at``, each file is
    opened by its name in its directory's descriptor (:class:`DirectoryAt`), not by its whole path.
    """
    fstat, read, close, open_ = os.fstat, os.read, os.close, os.open
    found: list[Read] = []
    try:
        for entry in entries:
            size = entry.size
            if size >= READ_CHUNK:
                found.append(_large_checked(f"{base}/{entry.path}", entry))
                continue
            try:
                if at is None:
                    fd = open_(f"{base}/{entry.path}", OPEN_NOFOLLOW)
                else:
                    directory, _, name = entry.path.rpartition("/")
                    fd = open_(name, OPEN_NOFOLLOW, dir_fd=at.fd if directory == at.path else at.enter(directory))
            except OSError as exc:
                raise _open_failure(exc, f"{base}/{entry.path}") from None
            info = fstat(fd)
            if info.st_size != size or info.st_nlink > 1 or not stat.S_ISREG(info.st_mode):
                close(fd)
                raise _stat_failure(info, size, f"{base}/{entry.path}")
            try:
                data = read(fd, size + 1)
            finally:
                close(fd)
            if len(data) != size:
                raise _length_failure(len(data), size, f"{base}/{entry.path}")
            found.append(data)
    except ReleaseVerificationError as exc:
        return found, exc
    return found, None


class DirectoryAt:
    """A descriptor on the directory a release's files are being read from, so that :func:`read_files` opens each
    file by its name there: the kernel resolves one path component per file, not every one from ``/`` down
    (a release under a deep path has a dozen).

    One directory at a time, whatever the release's size (manifest order is by path, so a directory's files come
    together; a change of directory closes the last one). It is opened as the path was resolved before, following
    what the path's components would follow (the walk refused every symlink), and a failure to open it is the
    file's, with the same code (:func:`_open_failure`). ``close`` when done.
    """

    def __init__(self, base: str) -> None:
        self.base = base
        self.path: str | None = None  # the directory open, relative to ``base`` ("" for ``base`` itself)
        self.fd = -1

    @staticmethod
    def usable() -> bool:
        """Whether this platform opens files relative to a directory descriptor (``openat``)."""
        return _OPENAT

    def enter(self, directory: str) -> int:
        """A descriptor on ``directory`` (relative to ``base``), the one open before closed."""
        self.close()
        self.fd = os.open(f"{self.base}/{directory}" if directory else self.base, _OPEN_DIRECTORY)
        self.path = directory
        return self.fd

    def close(self) -> None:
        if self.fd >= 0:
            fd, self.fd, self.path = self.fd, -1, None
            os.close(fd)


def digest_failures(
    base: str,
    entries: Sequence[FileEntry],
    read: Sequence[Read],
    hex_digest: Callable[[bytes], str] = sha256_hex,
) -> list[tuple[int, ReleaseVerificationError]]:
    """Index and failure of each of ``read`` (what :func:`read_files` has of ``entries``, in order) whose SHA-256
    is not listed.

    ``hex_digest`` is the SHA-256 to use (hex); :mod:`.file_pipeline` passes its own.
    """
    found: list[tuple[int, ReleaseVerificationError]] = []
    for index, (entry, data) in enumerate(zip(entries, read, strict=False)):
        if data is None:
            continue
        if isinstance(data, ReleaseVerificationError):  # a large file, its digest already checked
            found.append((index, data))
            continue
        digest = hex_digest(data)
        if digest != entry.sha256:
            found.append((index, _digest_failure(digest, entry.sha256, f"{base}/{entry.path}")))
    return found


def _large_checked(where: str, entry: FileEntry) -> ReleaseVerificationError | None:
    """A large file checked whole: ``None``, or its digest failure (any other failure is raised)."""
    try:
        _checked(where, entry, where=where, keep=False)
    except ReleaseVerificationError as exc:
        if stops_file_check(exc):
            raise
        return exc
    return None


def _checked(fs_path: Path | str, entry: FileEntry, *, where: str, keep: bool) -> bytes | None:
    fd, size = _open_regular(fs_path, where)
    try:
        if size != entry.size:
            raise _size_failure(size, entry.size, where)
        limit = entry.size + 1  # one byte more than listed: a file that grew since fstat is seen to be too long
        if limit <= READ_CHUNK:  # the common case: one read, one C-speed hash
            data = os.read(fd, limit)
            total, digest = len(data), sha256_hex(data)
        else:
            total, digest, data = _read_chunks(fd, limit, keep)
    finally:
        os.close(fd)
    if total != entry.size:
        raise _length_failure(total, entry.size, where)
    if digest != entry.sha256:
        raise _digest_failure(digest, entry.sha256, where)
    return data if keep else None


def _size_failure(size: int, listed: int, where: str) -> ReleaseVerificationError:
    return ReleaseVerificationError(
        FailureCode.FILE_SIZE_MISMATCH, f"size is {size} bytes, the manifest says {listed}", path=where
    )


def _length_failure(total: int, listed: int, where: str) -> ReleaseVerificationError:
    """The bytes read were not the listed size (the file changed after ``fstat``)."""
    shown = f"more than {listed}" if total > listed else str(total)
    return ReleaseVerificationError(
        FailureCode.FILE_SIZE_MISMATCH, f"size is {shown} bytes, the manifest says {listed}", path=where
    )


def _digest_failure(digest: str, listed: str, where: str) -> ReleaseVerificationError:
    return ReleaseVerificationError(
        FailureCode.FILE_DIGEST_MISMATCH, f"SHA-256 is {digest}, the manifest says {listed}", path=where
    )


def _read_chunks(fd: int, limit: int, keep: bool) -> tuple[int, str, bytes]:
    """Up to ``limit`` bytes of a large file in ``READ_CHUNK`` pieces: (bytes read, hex SHA-256, bytes if kept)."""
    hasher = Sha256()
    chunks: list[bytes] = []
    total = 0
    while total < limit:
        want = min(READ_CHUNK, limit - total)
        chunk = os.read(fd, want)
        hasher.update(chunk)
        if keep:
            chunks.append(chunk)
        total += len(chunk)
        if len(chunk) < want:  # a regular file reads short only at its end: no extra read for the EOF
            break
    return total, hasher.hexdigest(), b"".join(chunks)


def _open_regular(fs_path: Path | str, where: str) -> tuple[int, int]:
    """A descriptor on a single-link regular file and its size (no final symlink followed, no blocking on a FIFO)."""
    try:
        fd = os.open(fs_path, OPEN_NOFOLLOW)
    except OSError as exc:
        raise _open_failure(exc, where) from None
    info = os.fstat(fd)
    if stat.S_ISREG(info.st_mode) and info.st_nlink <= 1:
        return fd, info.st_size
    os.close(fd)
    raise _stat_failure(info, info.st_size, where)


def _open_failure(exc: OSError, where: str) -> ReleaseVerificationError:
    """Why a listed file could not be opened: missing, a symbolic link, or unreadable."""
    if isinstance(exc, FileNotFoundError):
        return ReleaseVerificationError(FailureCode.FILE_MISSING, "listed in the manifest but missing", path=where)
    if exc.errno == errno.ELOOP:
        return ReleaseVerificationError(FailureCode.FILE_TYPE_FORBIDDEN, "is a symbolic link", path=where)
    return ReleaseVerificationError(FailureCode.FILE_MISSING, f"cannot be read: {exc.strerror}", path=where)


def _stat_failure(info: os.stat_result, listed: int, where: str) -> ReleaseVerificationError:
    """What is wrong with an opened file, checked in this order: its type, its links, its size."""
    if not stat.S_ISREG(info.st_mode):
        return ReleaseVerificationError(FailureCode.FILE_TYPE_FORBIDDEN, "is not a regular file", path=where)
    if info.st_nlink > 1:
        return ReleaseVerificationError(
            FailureCode.FILE_TYPE_FORBIDDEN, f"is hard-linked ({info.st_nlink} links)", path=where
        )
    return _size_failure(info.st_size, listed, where)


def read_small(fs_path: Path, limit: int, *, where: Path, too_big: FailureCode) -> bytes:
    """Read a small metadata file without following symlinks, at most ``limit`` bytes (manifest, checksums, a
    signature)."""
    try:
        fd = os.open(fs_path, OPEN_NOFOLLOW)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise failure_at(FailureCode.FILE_TYPE_FORBIDDEN, "is a symbolic link", where) from None
        raise failure_at(FailureCode.FILE_MISSING, f"cannot be read: {exc.strerror}", where) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise failure_at(FailureCode.FILE_TYPE_FORBIDDEN, "is not a regular file", where)
        data = b""
        while len(data) <= limit:
            chunk = os.read(fd, limit + 1 - len(data))
            if not chunk:
                break
            data += chunk
    finally:
        os.close(fd)
    if len(data) > limit:
        raise failure_at(too_big, f"is larger than {limit} bytes", where)
    return data


def failure_at(code: FailureCode, message: str, where: Path | str) -> ReleaseVerificationError:
    """A release file's refusal: ``code`` and ``message``, naming ``where``."""
    return ReleaseVerificationError(code, message, path=str(where))


@dataclass(frozen=True, repr=False)  # compared, never shown (test_build_dataclasses)
class ReleaseFiles:
    """Read access to a release's catalogue files, every read checked against the manifest.

    Satisfies the loader's ``CatalogueFiles`` protocol (``paths`` + ``read``).
    """

    root: Path
    entries: Mapping[str, FileEntry]
    cache: Mapping[str, bytes] = field(default_factory=dict, repr=False)
    # True when every file the loader read (the files step payloads quote) is in ``cache``
    holds_every_read: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "entries", MappingProxyType(dict(self.entries)))
        object.__setattr__(self, "cache", MappingProxyType(dict(self.cache)))

    @property
    def paths(self) -> frozenset[str]:
        return frozenset(self.entries)

    def where(self, path: str) -> str:
        return str(self.root / CATALOGUE_DIR / path)

    def read(self, path: str) -> bytes:
        entry = self.entries.get(path)
        if entry is None:
            raise ReleaseVerificationError(
                FailureCode.FILE_MISSING, "not a file of this release", path=self.where(path)
            )
        cached = self.cache.get(path)
        if cached is not None:
            return cached
        where = self.where(path)  # the path to open is the one said: joined once
        return read_checked(where, entry, where=where)


class LoaderReads:
    """``CatalogueFiles`` over a :class:`ReleaseFiles` that remembers the (checked) bytes the loader read.

    :meth:`kept` then returns the release files with exactly those bytes
    cached (within :func:`_cacheable`'s limits): the files step payloads serve
    on every call, and nothing else.
    """

    def __init__(self, files: ReleaseFiles) -> None:
        self.files = files
        self.read_bytes: dict[str, bytes] = {}

    @property
    def paths(self) -> frozenset[str]:
        return self.files.paths

    def read(self, path: str) -> bytes:
        data = self.read_bytes.get(path)
        if data is None:
            data = self.read_bytes[path] = self.files.read(path)
        return data

    def kept(self) -> ReleaseFiles:
        entries = self.files.entries
        keep = _cacheable([entries[p] for p in self.read_bytes])
        cache = {**self.files.cache, **{p: self.read_bytes[p] for p in keep}}
        return ReleaseFiles(
            root=self.files.root, entries=entries, cache=cache, holds_every_read=keep == self.read_bytes.keys()
        )


def _cacheable(entries: list[FileEntry]) -> set[str]:
    """Which of ``entries`` to keep in memory after verification: small ones, within a budget."""
    keep: set[str] = set()
    budget = _CACHE_TOTAL_LIMIT
    for entry in sorted(entries, key=lambda e: (e.size, e.path)):
        if entry.size > CACHE_FILE_LIMIT or entry.size > budget:
            break
        keep.add(entry.path)
        budget -= entry.size
    return keep


@dataclass(frozen=True)
class VerifiedRelease:
    """A release whose signatures, files and catalogue rules all verified.

    ``manifest_digest`` (``sha256:<hex>`` of ``manifest_bytes``) is its identity;
    ``signer_key_ids`` are the trusted keys whose signatures verified.
    """

    root: Path
    manifest: Manifest
    manifest_bytes: bytes = field(repr=False)
    manifest_digest: str
    signer_key_ids: tuple[str, ...]
    catalogue: Catalogue = field(repr=False)
    schemas: SchemaSet = field(repr=False)
    files: ReleaseFiles = field(repr=False)

    @property
    def release_id(self) -> str:
        """``name@version``."""
        return self.manifest.release.id

    @property
    def paths(self) -> frozenset[str]:
        return self.files.paths

    def file_entry(self, path: str) -> FileEntry | None:
        return self.files.entries.get(path)

    def read_file(self, path: str) -> bytes:
        """Verified bytes of a catalogue file (``path`` relative to ``catalogue/``)."""
        return self.files.read(path)

    def holds_in_memory(self, path: str) -> bool:
        """Whether :meth:`read_file` answers ``path`` from memory (verified at load) rather than from disk."""
        return path in self.files.cache

    @property
    def quotes_from_memory(self) -> bool:
        """Whether every file a step payload quotes is answered from memory (no call reads this release's disk)."""
        return self.files.holds_every_read
