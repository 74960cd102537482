"""Who besides its owner may read or write a key file: the one mode check for signing and checkpoint keys.

A private signing key others can read lets them sign releases; a checkpoint
key file others can write lets them forge checkpoints. Both tools warn rather
than refuse (a key mounted by an orchestrator may carry modes its user does
not set), and both ask this module which bits are open. Like ssh, the group
bits of a file someone else owns (a root-owned secret mount shared with a
group, mode 0440) are that owner's deliberate choice and are not reported;
others' bits always are. Where there are no POSIX modes (Windows) nothing is.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

READ_BITS = (stat.S_IRGRP, stat.S_IROTH)
WRITE_BITS = (stat.S_IWGRP, stat.S_IWOTH)


@dataclass(frozen=True)
class KeyFileExposure:
    """A key file's permission bits, who they open it to ("group", "others"), its owner and whether that is us."""

    path: Path
    mode: int
    who: tuple[str, ...]
    uid: int
    owned: bool

    @property
    def whom(self) -> str:
        """``"group"``, ``"others"`` or ``"group and others"``."""
        return " and ".join(self.who)


def key_file_exposure(path: Path, bits: tuple[int, int]) -> KeyFileExposure | None:
    """Whom ``bits`` (the group's and others' read or write bit) open ``path`` to; ``None`` when nobody."""
    geteuid = getattr(os, "geteuid", None)
    if geteuid is None:  # no POSIX modes to read (Windows): its ACLs are not what st_mode shows
        return None
    status = path.stat()
    owned = status.st_uid == geteuid()
    group, others = bits
    who = tuple(
        name
        for name, bit in (("group", group), ("others", others))
        if status.st_mode & bit and (owned or bit == others)
    )
    return KeyFileExposure(path, stat.S_IMODE(status.st_mode), who, status.st_uid, owned) if who else None
