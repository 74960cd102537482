"""Read a small file an operator names (a key, a trust file, a key file): a regular file, bounded, never blocking.

``open`` of a FIFO waits for a writer, so a key path that is a FIFO (by
mistake, or a process substitution a CI job forgot to feed) would hang the
command forever. The file is opened non-blocking and its type checked on the
descriptor before a byte is read; symlinks are followed (a key may be a link
into a secrets mount).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
NOT_REGULAR = "not a regular file (a directory, FIFO, socket or device)"


def read_small_file(path: Path | str, limit: int) -> bytes:
    """At most ``limit + 1`` bytes of the regular file at ``path`` (more than ``limit``: the caller refuses).

    ``OSError`` (with a ``strerror``) for a path that cannot be opened or is
    not a regular file; a FIFO is never read and never waited on.
    """
    fd = os.open(path, _OPEN_FLAGS)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, NOT_REGULAR, str(path))
        chunks: list[bytes] = []
        remaining = limit + 1
        while remaining > 0 and (chunk := os.read(fd, remaining)):
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
