"""The warning about a key file others can open: what it names and its one wording.

Made only when :func:`rimthan_workflow_registry.key_file_modes.key_file_exposure`
finds a key file open to its group or to others (and by ``keys``, which
names the checkpoint key file): a build whose key is 0600 never defines these
types (each frozen dataclass costs a process its generated methods' compilation).
"""

from __future__ import annotations

import stat
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple


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
