"""Whether each release a server holds is still in its releases directory.

A held release serves from what was verified at load, so runs pinned to it go on when an operator deletes
its directory; but a restart holds only what is on disk, and those runs would then be refused
(``pinned_release_unavailable``). A refresh says so once, while it can still be put back.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from rimthan_workflow_registry.release import MANIFEST_NAME

from .loading import LoadedRelease
from .logs import get_logger

_log = get_logger("provider")


def warn_of_gone(held: Iterable[LoadedRelease], told: set[str]) -> None:
    """One warning per held release whose directory is gone (``told``: their digests, kept across refreshes)."""
    for loaded in held:
        root = Path(loaded.release.root)
        if (root / MANIFEST_NAME).is_file():
            told.discard(loaded.digest)
        elif loaded.digest not in told:
            told.add(loaded.digest)
            _log.warning(
                "held release gone from disk; a restart will not hold it",
                extra={
                    "release": loaded.release.release_id,
                    "path": str(root),
                    "next": f"put {root.name} back in the releases directory before this server restarts: until "
                    "then it still serves the runs pinned to it, after that they are refused",
                },
            )
