"""The bridge's own files are its own: refused when another user owns or can write one, or it has other hard links."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from rimthan_workflow_registry.errors import quoted

HARD_LINKED = "Has other hard links"  # a file the bridge would write, refused (:class:`HardLinked`)
OTHER_OWNER = "A file of the bridge's that another user owns"  # refused (:func:`refuse_foreign`)
OTHER_WRITABLE = "A file of the bridge's that other users can write"  # likewise


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
