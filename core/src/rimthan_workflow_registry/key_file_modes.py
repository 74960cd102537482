"""Who besides its owner may read or write a key file: the one mode check for signing and checkpoint keys.

A private signing key others can read lets them sign releases; a checkpoint
key file (HMAC secrets) others can read or write lets them forge checkpoints.
Both tools warn rather than refuse (a key mounted by an orchestrator may carry
modes its user does not set), both ask this module which bits are open, and
both say it in its one wording (:func:`~rimthan_workflow_registry.key_file_warning.exposure_warning`:
``key_file_exposed``, then ``next: chmod 600 FILE``; that module, and its types, only
imported for a key file someone else can open). Like ssh, the group
bits of a file someone else owns (a root-owned secret mount shared with a
group, mode 0440) are that owner's deliberate choice and are not reported;
others' bits always are. Where there are no POSIX modes (Windows) nothing is.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from rimthan_workflow_registry.lazy_exports import first_use_getattr

if TYPE_CHECKING:  # re-exported: imported at run time on first use (``__getattr__`` below)
    from rimthan_workflow_registry.key_file_warning import ExposureWarning as ExposureWarning
    from rimthan_workflow_registry.key_file_warning import KeyFileExposure as KeyFileExposure
    from rimthan_workflow_registry.key_file_warning import KeyFileKind as KeyFileKind
    from rimthan_workflow_registry.key_file_warning import exposure_warning as exposure_warning

READ_BITS = (stat.S_IRGRP, stat.S_IROTH)
WRITE_BITS = (stat.S_IWGRP, stat.S_IWOTH)
READ_WRITE_BITS = (stat.S_IRGRP | stat.S_IWGRP, stat.S_IROTH | stat.S_IWOTH)


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
    if not who:
        return None
    from rimthan_workflow_registry.key_file_warning import KeyFileExposure  # defined only for a key others can open

    return KeyFileExposure(path, stat.S_IMODE(status.st_mode), who, status.st_uid, owned)


# The warning's names, still importable from here: its module is imported on their first use.
_HOME = dict.fromkeys(
    ("KeyFileExposure", "KeyFileKind", "ExposureWarning", "exposure_warning"),
    "rimthan_workflow_registry.key_file_warning",
)
__getattr__ = first_use_getattr(__name__, _HOME, globals())
