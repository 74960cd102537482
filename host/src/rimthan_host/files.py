"""Files in the project: symlink-free writes (whole or not at all) and readback, and output attestations from disk.

The verifier binds every artifact to the exact bytes on disk: the host reads
each file back without following a symbolic link anywhere on its path,
hashes what it read, and says whether the write created or replaced it
(known from what was there *before* the step wrote it). Nothing here trusts
text a caller says it wrote; the attestation is of the bytes read back.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

from rimthan_workflow_registry.canonical import sha256_hex
from rimthan_workflow_registry.errors import quoted
from rimthan_workflow_registry.release import MAX_SEGMENT_BYTES
from rimthan_workflow_registry.whole_writes import write_all

from .protocol import HarnessError

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
SYMLINK_REFUSED = "Symbolic link refused"  # an OSError's reason: the bridge says it with the path (words.failed_words)
NOT_REGULAR = "Not a regular file"  # likewise, for a FIFO, a device or a socket
HARD_LINKED = "Has other hard links"  # a file the bridge would write, refused (:class:`HardLinked`)
OTHER_OWNER = "A file of the bridge's that another user owns"  # refused (:func:`refuse_foreign`)
OTHER_WRITABLE = "A file of the bridge's that other users can write"  # likewise
TMP_SUFFIX = ".rimthan-tmp"  # a project file is written at ".<name>" + this beside it, then renamed over it


def first_symlink(root: Path, relative: PurePath) -> Path | None:
    """The first path on the way from ``root`` down to ``root / relative`` that is a symbolic link, or None."""
    current = root
    for part in relative.parts:
        current = current / part
        if current.is_symlink():
            return current
    return None


def symlink_refused(path: Path) -> OSError:
    """The error the bridge says as "Symbolic link refused: <path>" (``words.failed_words``)."""
    return OSError(errno.ELOOP, SYMLINK_REFUSED, str(path))


def open_regular(path: Path, flags: int, *, own: bool = False) -> tuple[int, os.stat_result]:
    """``os.open`` of the regular file at ``path``, never following a final symbolic link nor blocking.

    Without ``O_NONBLOCK`` an ``open`` of a FIFO waits for the other end,
    forever; with it the open returns, and ``fstat`` refuses all that is not a
    regular file before a byte is read or written; with ``own``, one of the bridge's own
    state files, :func:`refuse_foreign` too. An ``OSError`` otherwise:
    ELOOP (:data:`SYMLINK_REFUSED`), ``IsADirectoryError``, EINVAL
    (:data:`NOT_REGULAR`) for a FIFO, a device or a socket. The parents of
    ``path`` are the caller's to check. Returns the descriptor and its ``fstat``.
    """
    try:
        fd = os.open(path, flags | _NOFOLLOW | os.O_NONBLOCK, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise symlink_refused(path) from None
        if exc.errno == errno.ENXIO:  # a FIFO opened to write while no one reads it
            raise _not_regular(path) from None
        raise
    try:
        status = os.fstat(fd)
        if stat.S_ISDIR(status.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not stat.S_ISREG(status.st_mode):
            raise _not_regular(path)
        if own:
            refuse_foreign(path, status)
    except BaseException:
        os.close(fd)
        raise
    return fd, status


def _not_regular(path: Path) -> OSError:
    return OSError(errno.EINVAL, NOT_REGULAR, str(path))


def refuse_foreign(path: Path, status: os.stat_result) -> None:
    """An ``OSError`` (EPERM) for a file of the bridge's own state that another user wrote or can write.

    The bridge writes its run files and its delivery record as the user it
    runs as, never writable by others (``0o644`` at most). One owned by
    another user, or that others may write, holds what the bridge cannot vouch
    for: a kept step result shown to the model without asking the verifier,
    the files a run validated, the paths where it writes the assets it kept.
    """
    mode = stat.S_IMODE(status.st_mode)
    if hasattr(os, "geteuid") and status.st_uid != os.geteuid():
        user = f"not the user the bridge runs as (uid {os.geteuid()})"
        why = f"{OTHER_OWNER} (uid {status.st_uid}), {user}: check it, then chown it"
        raise OSError(errno.EPERM, why, str(path))
    if mode & stat.S_IWOTH:
        raise OSError(errno.EPERM, f"{OTHER_WRITABLE} (mode {mode:04o}): check it, then chmod o-w it", str(path))


class HardLinked(OSError):
    """A file the bridge would write that has other hard links: its bytes are another name's too, never changed."""

    def __init__(self, path: Path) -> None:
        super().__init__(errno.EMLINK, HARD_LINKED, str(path))

    def __str__(self) -> str:
        return hard_link_words(str(self.filename), "try again")


def hard_link_words(name: str, then: str) -> str:
    """A file of the bridge's with other hard links (``name``), and what to do: delete it, then ``then``."""
    return f"{quoted(name)} has other hard links; the bridge writes only files that are its own: delete it and {then}"


def open_own(path: Path, flags: int) -> int:
    """:func:`open_regular` to write a file of the bridge's own; :class:`HardLinked` before a byte changes.

    A hard link in the project to a file elsewhere (on the same file system)
    is a regular file like any other: opened without ``O_TRUNC``, the file is
    refused if ``fstat`` counts another link to it, and truncated (if
    ``flags`` ask for it) only after that.
    """
    fd, status = open_regular(path, flags & ~os.O_TRUNC)
    try:
        if status.st_nlink > 1:
            raise HardLinked(path)
        if flags & os.O_TRUNC:
            os.ftruncate(fd, 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


def replace_file(path: Path, tmp: Path, data: bytes, mode: int | None = None) -> None:
    """Replace the bridge's own file ``path`` with ``data``, whole or not at all, and durably.

    ``data`` is written whole and fsynced at ``tmp`` (:func:`open_own`: a symbolic
    link, a FIFO or a hard link there is refused and left as it is), with
    permission bits ``mode`` if given; ``tmp`` is then renamed over ``path`` (a
    symbolic link there is replaced, not followed) and the directory fsynced. A
    failure on the way (a full disk, a kill) leaves ``path`` as it was: the
    temporary file is removed (a kill leaves it, and the next write reuses it),
    and an ``OSError`` of the write names ``path``.
    """
    fd = open_own(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        try:
            if mode is not None:
                os.fchmod(fd, mode)
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(exc, OSError) and exc.filename is None:
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        raise
    fsync_directory(path.parent)


def fsync_directory(directory: Path) -> None:
    """Make a rename in ``directory`` durable (a file system that cannot sync a directory is left to itself)."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW)
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno != errno.EINVAL:
            raise
    finally:
        os.close(fd)


def temporary_path(path: Path) -> Path:
    """Where :meth:`ProjectFiles.write` writes ``path`` before the rename: ``.<name>`` + :data:`TMP_SUFFIX`
    beside it, or, for a name too long to take that, a digest of the name (a file name has at most
    MAX_SEGMENT_BYTES)."""
    name = f".{path.name}{TMP_SUFFIX}"
    if len(name.encode("utf-8")) > MAX_SEGMENT_BYTES:
        name = f".{sha256_hex(path.name.encode('utf-8'))[:32]}{TMP_SUFFIX}"
    return path.with_name(name)


def own_mode(path: Path) -> int | None:
    """The permission bits of the bridge's own file at ``path`` (None if there is none), refused as
    :func:`open_own` refuses it (a symbolic link, a FIFO, a directory, other hard links), nothing changed."""
    try:
        fd = open_own(path, os.O_WRONLY)
    except FileNotFoundError:
        return None
    try:
        return stat.S_IMODE(os.fstat(fd).st_mode)
    finally:
        os.close(fd)


class FileTooLarge(OSError):
    """A regular file larger than the reader's bound, refused before its bytes are read."""

    def __init__(self, path: Path, size: int, limit: int) -> None:
        super().__init__(errno.EFBIG, os.strerror(errno.EFBIG), str(path))
        self.size = size
        self.limit = limit


def read_regular(path: Path, limit: int | None = None, *, own: bool = False) -> bytes:
    """The bytes of the regular file at ``path`` (:func:`open_regular`); ``FileNotFoundError`` if there is none.

    Past ``limit`` bytes, :class:`FileTooLarge`: by the size ``fstat`` gives,
    before a byte is read, and by what was read should the file grow meanwhile
    (at most ``limit + 1`` bytes are read). ``own``: as :func:`open_regular`.
    """
    fd, status = open_regular(path, os.O_RDONLY, own=own)
    try:
        if limit is not None and status.st_size > limit:
            raise FileTooLarge(path, status.st_size, limit)
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read() if limit is None else handle.read(limit + 1)
        if limit is not None and len(data) > limit:
            raise FileTooLarge(path, len(data), limit)
        return data
    finally:
        os.close(fd)


@dataclass(frozen=True)
class WrittenFile:
    """A file read back from the project: project-relative path, text, SHA-256, write kind."""

    artifact_id: str
    path: str
    media_type: str
    text: str
    sha256: str
    write: str

    @property
    def size(self) -> int:
        """The file's size in bytes, as read back."""
        return len(self.text.encode("utf-8"))

    def to_artifact(self) -> dict[str, Any]:
        """The ``artifact`` contract: the exact text plus the readback attestation."""
        return {
            "artifact_id": self.artifact_id,
            "path": self.path,
            "media_type": self.media_type,
            "content": self.text,
            "attestation": {
                "path": self.path,
                "sha256": self.sha256,
                "size": self.size,
                "symlink_free": True,
                "write": self.write,
            },
        }


class ProjectFiles:
    """One project directory, written and read only through symlink-free paths inside it."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def safe_path(self, rel_path: str) -> Path:
        """``rel_path`` inside the project; refused if it escapes or crosses a symbolic link."""
        relative = Path(rel_path)
        if relative.is_absolute() or ".." in relative.parts:
            raise HarnessError(f"{quoted(rel_path)} escapes the project directory")
        link = first_symlink(self.root, relative)
        if link is not None:
            raise HarnessError(f"{quoted(link)} is a symbolic link; refusing to write or read through it")
        return self.root / relative

    def exists(self, rel_path: str) -> bool:
        return self.safe_path(rel_path).exists()

    def write(self, artifact_id: str, rel_path: str, media_type: str, text: str) -> WrittenFile:
        """Write exact bytes (whole or not at all: :func:`replace_file`), then attest them from a symlink-free readback.

        What is at ``rel_path`` is refused as :func:`open_own` refuses it
        before a byte is written; the temporary file is :func:`temporary_path`.
        """
        target = self.safe_path(rel_path)
        existed = target.exists()
        target.parent.mkdir(parents=True, exist_ok=True)
        self.safe_path(rel_path)  # parents may have been created just now: check again
        data = text.encode("utf-8")
        replace_file(target, temporary_path(target), data, own_mode(target))
        return self.attest(artifact_id, rel_path, media_type, existed_before=existed, max_bytes=len(data))

    def attest(
        self, artifact_id: str, rel_path: str, media_type: str, *, existed_before: bool, max_bytes: int
    ) -> WrittenFile:
        """Read a file someone else wrote (e.g. the model) back from disk and attest it.

        ``max_bytes`` is the step output's (the step result lists it): a larger
        file is refused by its size, before it is read.
        """
        target = self.safe_path(rel_path)
        if not target.exists():
            raise HarnessError(f"{quoted(rel_path)} has not been written yet")
        data = self.read_back(rel_path, max_bytes=max_bytes)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise HarnessError(f"{quoted(rel_path)} is not UTF-8 text") from None
        return WrittenFile(
            artifact_id,
            rel_path,
            media_type,
            text,
            sha256_hex(data),
            "replaced" if existed_before else "created",
        )

    def read_back(self, rel_path: str, *, max_bytes: int) -> bytes:
        """The bytes of the regular file at ``rel_path``, read symlink-free and without blocking (:func:`read_regular`).

        Anything else - a FIFO, a device, a directory, a symbolic link put
        there meanwhile, a file over ``max_bytes`` (never read) - is a
        :class:`HarnessError` saying what to do.
        """
        target = self.safe_path(rel_path)
        try:
            return read_regular(target, max_bytes)
        except OSError as exc:
            raise HarnessError(_unreadable(rel_path, exc)) from None


def _unreadable(rel_path: str, exc: OSError) -> str:
    """Why the file at ``rel_path`` cannot be read as a step's file, and what to do about it (the path quoted)."""
    path = quoted(rel_path)
    if isinstance(exc, FileTooLarge):
        return (
            f"{path} is {exc.size} bytes; this step takes at most {exc.limit} bytes for it (its max_bytes). "
            f"Write it again at {path}, within {exc.limit} bytes."
        )
    if exc.errno == errno.ELOOP:
        return link_words(rel_path)
    if exc.errno in (errno.EISDIR, errno.EINVAL):
        return (
            f"{path} is not a regular file (a directory, a FIFO or a device is never read). "
            f"Delete it and write the file itself at {path}."
        )
    return f"{path} cannot be read ({exc.strerror}). Make it a readable file and write it again at {path}."


def link_words(rel_path: str) -> str:
    """A step's file that is a symbolic link, and what to do instead."""
    path = quoted(rel_path)
    return (
        f"{path} is a symbolic link; the bridge reads only regular files inside the project. "
        f"Delete the link and write the file itself at {path}."
    )
