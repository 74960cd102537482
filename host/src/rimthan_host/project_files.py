"""A project's files as the host reads and writes a step's: symlink-free writes and readback, attested from disk.

The verifier binds every artifact to the exact bytes on disk: the host reads
each file back without following a symbolic link anywhere on its path,
hashes what it read, and says whether the write created or replaced it
(known from what was there *before* the step wrote it). Nothing here trusts
text a caller says it wrote; the attestation is of the bytes read back. Every
file is reached through :func:`~rimthan_host.files.open_folder`'s walk.
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rimthan_workflow_registry.canonical import sha256_hex
from rimthan_workflow_registry.errors import quoted

from .files import (
    FileTooLarge,
    LinkOnTheWay,
    ProjectPath,
    file_status,
    first_symlink,
    read_regular,
    replace_file,
    temporary_path,
)
from .protocol import HarnessError


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
        """``rel_path`` inside the project; refused if it escapes, crosses a symbolic link or holds a NUL."""
        if "\0" in rel_path:  # (no file has such a name: the OS refuses it, with a ValueError, not an OSError)
            raise HarnessError(f"{quoted(rel_path)} holds a NUL character, which no file name holds")
        relative = Path(rel_path)
        if relative.is_absolute() or ".." in relative.parts:
            raise HarnessError(f"{quoted(rel_path)} escapes the project directory")
        link = first_symlink(self.root, relative)
        if link is not None:
            raise _link_refused(link)
        return self.root / relative

    def at(self, rel_path: str) -> ProjectPath:
        """``rel_path`` as checked by :meth:`safe_path`, to open through :func:`open_folder`'s walk."""
        self.safe_path(rel_path)
        return ProjectPath(self.root, Path(rel_path))

    def exists(self, rel_path: str) -> bool:
        """Whether anything is at ``rel_path`` (checked as :meth:`safe_path` checks it, then looked up through
        :func:`~rimthan_host.files.open_folder`'s walk: a folder swapped for a link meanwhile is refused, never
        followed out of the project)."""
        target = self.at(rel_path)
        with _no_link_on_the_way():
            return file_status(target) is not None

    def replace(self, rel_path: str, tmp: str, data: bytes, *, keep_mode: bool = False) -> None:
        """:func:`replace_file` at ``rel_path`` (its folders made); a folder on the way that is (or became) a
        symbolic link is refused as :meth:`safe_path` refuses it, nothing written."""
        with _no_link_on_the_way():
            replace_file(self.at(rel_path), tmp, data, keep_mode=keep_mode, make=True)

    def write(self, artifact_id: str, rel_path: str, media_type: str, text: str) -> WrittenFile:
        """Write exact bytes (whole or not at all: :func:`replace_file`), then attest them from a symlink-free readback.

        What is at ``rel_path`` is refused as :func:`open_own` refuses it
        before a byte is written; the temporary file is :func:`temporary_path`.
        ``rel_path`` is checked once (:meth:`at`); each step is one walk: what was there, the write, the readback.
        """
        target = self.at(rel_path)
        data = text.encode("utf-8")
        with _no_link_on_the_way():
            existed = file_status(target) is not None
            replace_file(target, temporary_path(target.path).name, data, keep_mode=True, make=True)
        written = self._read(target, rel_path, len(data), missing_ok=False)
        assert written is not None  # (missing_ok=False: raised)
        return self.attested(artifact_id, rel_path, media_type, written, existed_before=existed)

    def attest(
        self, artifact_id: str, rel_path: str, media_type: str, *, existed_before: bool, max_bytes: int
    ) -> WrittenFile:
        """Read a file someone else wrote (e.g. the model) back from disk and attest it.

        ``max_bytes`` is the step output's (the step result lists it): a larger
        file is refused by its size, before it is read.
        """
        data = self.read_written(rel_path, max_bytes=max_bytes)
        if data is None:
            raise HarnessError(f"{quoted(rel_path)} has not been written yet")
        return self.attested(artifact_id, rel_path, media_type, data, existed_before=existed_before)

    def attested(
        self, artifact_id: str, rel_path: str, media_type: str, data: bytes, *, existed_before: bool
    ) -> WrittenFile:
        """The attestation of ``data``, the bytes just read back from ``rel_path`` (nothing is read again)."""
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

    def read_written(self, rel_path: str, *, max_bytes: int) -> bytes | None:
        """:meth:`read_back`, in one walk; None if nothing is at ``rel_path`` (or a folder on the way is missing)."""
        return self._read(self.at(rel_path), rel_path, max_bytes)

    def _read(self, target: ProjectPath, rel_path: str, max_bytes: int, *, missing_ok: bool = True) -> bytes | None:
        """:func:`read_regular` of ``target`` in one walk; ``missing_ok``: None if nothing is there (or a file is
        where a folder on the way must be), else that too is the :class:`HarnessError` saying what to do."""
        try:
            with _no_link_on_the_way():
                return read_regular(target, max_bytes)
        except (FileNotFoundError, NotADirectoryError) as exc:
            if missing_ok:
                return None
            raise HarnessError(_unreadable(rel_path, exc)) from None
        except OSError as exc:
            raise HarnessError(_unreadable(rel_path, exc)) from None

    def read_back(self, rel_path: str, *, max_bytes: int) -> bytes:
        """The bytes of the regular file at ``rel_path``, read symlink-free and without blocking (:func:`read_regular`).

        Anything else - a FIFO, a device, a directory, a symbolic link put
        there meanwhile, a file over ``max_bytes`` (never read) - is a
        :class:`HarnessError` saying what to do.
        """
        data = self._read(self.at(rel_path), rel_path, max_bytes, missing_ok=False)
        assert data is not None  # (missing_ok=False: raised)
        return data


@contextlib.contextmanager
def _no_link_on_the_way() -> Iterator[None]:
    """A folder on the way that the walk found to be a symbolic link (:class:`~rimthan_host.files.LinkOnTheWay`),
    refused as :meth:`ProjectFiles.safe_path` refuses one."""
    try:
        yield
    except LinkOnTheWay as exc:
        raise _link_refused(Path(str(exc.filename))) from None


def _link_refused(link: Path) -> HarnessError:
    """A symbolic link on the way to a project file (or the file itself), refused."""
    return HarnessError(f"{quoted(link)} is a symbolic link; refusing to write or read through it")


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
