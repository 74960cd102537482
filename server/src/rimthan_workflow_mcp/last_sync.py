"""A follower's last good sync, kept in the state directory (``last-sync.json``) so that a replica restarted while
its registry is down still says how long the registry has been gone.

Written whole after each sync that did not fail (a temporary file, fsync, rename, as the activation floor is); read
once at start, and only for the repository it names (another ``--releases-from`` starts without one). It feeds
``last_synced`` of ``GET /healthz`` and the ``--stale-after`` rule (:class:`~.loading.SyncStatus`): a replica
restarted long after its last good sync is stale as soon as it starts failing, not SECONDS after its start. A file
that cannot be read or written costs only that, said in one warning: the follower goes on as if none were kept.
A file a newer version wrote (a rollback) is said in one warning too, and left as it is: never rewritten.
"""

from __future__ import annotations

import calendar
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from rimthan_workflow_registry.errors import quoted
from rimthan_workflow_registry.small_files import read_small_file
from rimthan_workflow_registry.state_formats import ROLLBACK_NEXT, NewerFormat, newer_format
from rimthan_workflow_registry.whole_writes import replace_whole

from .logs import get_logger

LAST_SYNC_FILE = "last-sync.json"
_FORMAT = "rimthan-last-sync/1"
_MAX_BYTES = 4096
_UTC = "%Y-%m-%dT%H:%M:%SZ"  # as :func:`~.loading.utc_now` says it
_log = get_logger("follow")


@dataclass
class LastSync:
    """The last good sync of the follower of ``registry``, at ``path``."""

    path: Path
    registry: str
    _warned: set[str] = field(default_factory=set)  # "read", "write": each warned of once
    _newer: NewerFormat | None = None  # the file a newer version wrote: left as it is, never rewritten

    def read(self) -> tuple[float, str] | None:
        """The last good sync kept for this registry, as the follower holds it: (that moment on the monotonic
        clock, UTC); None if none is kept (or it cannot be read: warned of once)."""
        try:
            document = json.loads(read_small_file(self.path, _MAX_BYTES))
            if (newer := newer_format(document.get("format"), _FORMAT)) is not None:
                self._leave(newer)
                return None
            utc = document["last_synced"] if document.get("registry") == self.registry else None
            if document.get("format") != _FORMAT or utc is None:
                return None
            age = max(0.0, time.time() - calendar.timegm(time.strptime(utc, _UTC)))  # a clock set back: now
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
            self._warn("read", exc)
            return None
        return time.monotonic() - age, utc

    def write(self, utc: str) -> None:
        """Keep ``utc`` (a sync that did not fail just ended) as this registry's last good sync."""
        if self._newer is not None:
            return
        text = json.dumps({"format": _FORMAT, "registry": self.registry, "last_synced": utc}) + "\n"
        try:
            replace_whole(self.path, text, prefix=".last-sync-")
        except OSError as exc:
            self._warn("write", exc)

    def _leave(self, newer: NewerFormat) -> None:
        """A file a newer version wrote: said once, then neither read nor overwritten."""
        self._newer = newer
        _log.warning(
            "last good sync not read or kept",
            extra={"path": str(self.path), "reason": newer.reason(), "next": f"{ROLLBACK_NEXT}; until then the "
                   "file is left as it is and a restart while the registry is down says last_synced null"},
        )  # fmt: skip

    def _warn(self, what: str, exc: BaseException) -> None:
        if what in self._warned:
            return
        self._warned.add(what)
        _log.warning(
            f"last good sync not {'read' if what == 'read' else 'kept'}",
            extra={"path": str(self.path), "reason": quoted(exc),
                   "next": "a restart while the registry is down says last_synced null until a sync succeeds; "
                   "make the state directory writable (or free space) to keep it"},
        )  # fmt: skip
