"""Files in the project: symlink-free writes and readback, and output attestations from disk.

The verifier binds every artifact to the exact bytes on disk: the host reads
each file back without following a symbolic link anywhere on its path,
hashes what it read, and says whether the write created or replaced it
(known from what was there *before* the step wrote it). Nothing here trusts
text a caller says it wrote; the attestation is of the bytes read back.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rimthan_workflow_registry.canonical import sha256_hex

from .protocol import HarnessError

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


@dataclass(frozen=True)
class WrittenFile:
    """A file read back from the project: project-relative path, text, SHA-256, write kind."""

    artifact_id: str
    path: str
    media_type: str
    text: str
    sha256: str
    write: str

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
                "size": len(self.text.encode("utf-8")),
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
            raise HarnessError(f"{rel_path} escapes the project directory")
        current = self.root
        for part in relative.parts:
            current = current / part
            if current.is_symlink():
                raise HarnessError(f"{current} is a symbolic link; refusing to write or read through it")
        return current

    def exists(self, rel_path: str) -> bool:
        return self.safe_path(rel_path).exists()

    def write(self, artifact_id: str, rel_path: str, media_type: str, text: str) -> WrittenFile:
        """Write exact bytes, then attest them from a symlink-free readback."""
        target = self.safe_path(rel_path)
        existed = target.exists()
        target.parent.mkdir(parents=True, exist_ok=True)
        self.safe_path(rel_path)  # parents may have been created just now: check again
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8"))
        return self.attest(artifact_id, rel_path, media_type, existed_before=existed)

    def attest(self, artifact_id: str, rel_path: str, media_type: str, *, existed_before: bool) -> WrittenFile:
        """Read a file someone else wrote (e.g. the model) back from disk and attest it."""
        target = self.safe_path(rel_path)
        if not target.exists():
            raise HarnessError(f"{rel_path} has not been written yet")
        data = self.read_back(target)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise HarnessError(f"{rel_path} is not UTF-8 text") from None
        return WrittenFile(
            artifact_id,
            rel_path,
            media_type,
            text,
            sha256_hex(data),
            "replaced" if existed_before else "created",
        )

    @staticmethod
    def read_back(path: Path) -> bytes:
        """The bytes of a regular file, opened without following a final symbolic link."""
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise HarnessError(f"{path} is not a regular file")
            with os.fdopen(fd, "rb", closefd=False) as handle:
                return handle.read()
        finally:
            os.close(fd)
