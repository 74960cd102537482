"""Every byte written: ``os.write`` may take part of its buffer (a disk that fills part way), so write on.

The one copy the packager (copies, signatures), the pull path (downloaded blobs)
and the host kit (run logs, project files) share: a short write goes on until
the buffer is written or the OS refuses with an ``OSError`` (``ENOSPC``, say).
:func:`replace_whole` is the verifier's state files' one way to be replaced (the
activation floor, a follower's last good sync): whole, old or new.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["replace_whole", "write_all"]


def write_all(fd: int, data: bytes | memoryview) -> None:
    """Write all of ``data`` at ``fd``."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def replace_whole(path: Path, text: str, *, prefix: str, mode: int | None = None) -> None:
    """``text`` written to a temporary file beside ``path`` (named ``prefix``..., given ``mode``), fsynced, then
    renamed over ``path``: a reader sees the old file or the new one, never a part. Nothing is left behind if any
    step fails (the ``OSError`` raised). The rename itself is made durable by the caller (a directory fsync)."""
    import tempfile  # (here: a build imports this module for write_all, and needs no tempfile)

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=prefix)
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
