"""Every byte written: ``os.write`` may take part of its buffer (a disk that fills part way), so write on.

The one copy the packager (copies, signatures), the pull path (downloaded blobs)
and the host kit (run logs, project files) share: a short write goes on until
the buffer is written or the OS refuses with an ``OSError`` (``ENOSPC``, say).
"""

from __future__ import annotations

import os

__all__ = ["write_all"]


def write_all(fd: int, data: bytes | memoryview) -> None:
    """Write all of ``data`` at ``fd``."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
