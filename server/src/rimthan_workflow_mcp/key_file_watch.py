"""The checkpoint key file looked at again on every refresh: a server reads it only at start.

An operator who ran ``rimthan-mcp keys add`` (or ``promote``, ``rotate``, ``retire``) and then sent SIGHUP, as a
trust store change is taken, heard nothing: the refresh said ``refresh done`` and the replica went on with the keys
it started with, so the next phase of a rotation met a replica that refused the other's checkpoints
(``checkpoint_key_unknown``). Each refresh now looks at the file (its inode, size and mtime; read only when they
changed) and, when the keys in it differ from the ones this server runs with, logs one warning per change naming
both sets of key ids (never key material) and the restart that takes them. Nothing is reloaded: a replica's keys
change only at a restart, as docs/server.md's rotation says.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rimthan_workflow_registry.errors import RegistryError
from rimthan_workflow_registry.run import CheckpointKeyring

from .file_looks import Look, look_at
from .logs import get_logger

_log = get_logger("keys")
CHANGED = "checkpoint key file changed; not reloaded until restart"
RESTART = (
    "restart this server to use the keys in the file (in a fleet, a rolling restart of every replica, "
    "then the next phase of the rotation)"
)


def _ids(keyring: CheckpointKeyring) -> dict[str, object]:
    """Which key signs, which only verify, which are retired: ids only, as ``keys list`` shows them."""
    verify_only = sorted(k for k in keyring.keys if k != keyring.signing_key_id)
    return {"signing": keyring.signing_key_id, "verify_only": verify_only, "retired": sorted(keyring.retired)}


@dataclass
class KeyFileWatch:
    """The key file at ``path`` and the keys this server runs with, loaded from it at start."""

    path: Path
    running: CheckpointKeyring
    _seen: Look | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self._seen = look_at(self.path)

    def check(self) -> None:
        """One warning when the file changed since it was last looked at and holds other keys than the running
        ones; nothing when it is unchanged, the same keys, or unreadable (the next start says why)."""
        now = look_at(self.path)
        if now == self._seen:
            return
        self._seen = now
        try:
            on_file = CheckpointKeyring.load(self.path)
        except (RegistryError, OSError, ValueError):
            return
        running, found = _ids(self.running), _ids(on_file)
        if running != found:
            extra = {"path": str(self.path), "running": running, "in_file": found, "next": RESTART}
            _log.warning(CHANGED, extra=extra)
