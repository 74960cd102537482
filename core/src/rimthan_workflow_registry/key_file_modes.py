"""Who besides its owner may read or write a key file: the one mode check for signing and checkpoint keys.

A private signing key others can read lets them sign releases; a checkpoint
key file (HMAC secrets) others can read or write lets them forge checkpoints.
Both tools warn rather than refuse (a key mounted by an orchestrator may carry
modes its user does not set), both ask this module which bits are open, and
both say it in its one wording (:func:`exposure_warning`: ``key_file_exposed``,
then ``next: chmod 600 FILE``). Like ssh, the group
bits of a file someone else owns (a root-owned secret mount shared with a
group, mode 0440) are that owner's deliberate choice and are not reported;
others' bits always are. Where there are no POSIX modes (Windows) nothing is.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

READ_BITS = (stat.S_IRGRP, stat.S_IROTH)
WRITE_BITS = (stat.S_IWGRP, stat.S_IWOTH)
READ_WRITE_BITS = (stat.S_IRGRP | stat.S_IWGRP, stat.S_IROTH | stat.S_IWOTH)


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


class ExposureWarning(NamedTuple):
    """What to say about an exposed key file (``warning: key_file_exposed: FILE: message``) and what to do."""

    message: str
    next_step: str


@dataclass(frozen=True)
class KeyFileKind:
    """Which key file a warning names: ``what`` it is, what whoever can open it ``can`` do, who ``writes`` it 0600,
    and who may share a group-readable secret mount of it (``users``)."""

    what: str
    can: str
    writes: str
    users: str


_ADJECTIVES = {"read": "readable", "write": "writable"}


def exposure_warning(exposed: KeyFileExposure, kind: KeyFileKind) -> ExposureWarning:
    """The one wording: "private key is readable by others (mode 0644): whoever can read it can sign releases"."""
    access = _access(exposed)
    message = (
        f"{kind.what} is {' and '.join(_ADJECTIVES[a] for a in access)} by {exposed.whom} "
        f"(mode {exposed.mode:04o}): whoever can {' or '.join(access)} it can {kind.can}"
    )
    if exposed.owned:
        return ExposureWarning(message, f"chmod 600 {exposed.path}  ({kind.writes} 0600)")
    return ExposureWarning(
        message,
        f"ask the owner of {exposed.path} (uid {exposed.uid}) to drop others' {' and '.join(access)} access "
        f"(a secret mount: mode 0400, or 0440 with a group only {kind.users} are in)",
    )


def _access(exposed: KeyFileExposure) -> tuple[str, ...]:
    """``("read",)``, ``("write",)`` or both: what the bits of the classes in ``exposed.who`` allow."""
    classes = {"group": (stat.S_IRGRP, stat.S_IWGRP), "others": (stat.S_IROTH, stat.S_IWOTH)}
    opened = [classes[who] for who in exposed.who]
    read, write = (any(exposed.mode & bits[i] for bits in opened) for i in (0, 1))
    return tuple(verb for verb, on in (("read", read), ("write", write)) if on)
