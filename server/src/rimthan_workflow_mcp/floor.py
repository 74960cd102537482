"""The activation floor: the highest release version ever activated, per catalogue.

A small operator-readable JSON file (``<state-dir>/activation-floor.json``)
so that a restart, a second replica sharing the state directory, or a refresh
cannot silently roll a catalogue back to an older (possibly vulnerable)
release. Lowering the floor is an explicit operator act (``--lower-floor``).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rimthan_workflow_registry.errors import FailureCode, RegistryError
from rimthan_workflow_registry.release import is_semver, semver_key

FLOOR_FILE = "activation-floor.json"
FLOOR_FORMAT = "rimthan.activation-floor/1"
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


@dataclass(frozen=True)
class FloorEntry:
    version: str
    manifest_digest: str
    activated_at: int


class ActivationFloor:
    """Reads and raises the per-catalogue floor; ``path=None`` keeps it in memory only."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._entries: dict[str, FloorEntry] = self._load() if path is not None else {}

    def _load(self) -> dict[str, FloorEntry]:
        assert self.path is not None
        if not self.path.exists():
            return {}
        try:
            raw = json.loads(self.path.read_text("utf-8"))
            if raw.get("format") != FLOOR_FORMAT:
                raise ValueError(f"format is not {FLOOR_FORMAT}")
            entries = {
                name: FloorEntry(
                    version=e["version"], manifest_digest=e["manifest_digest"], activated_at=int(e["activated_at"])
                )
                for name, e in raw["catalogues"].items()
            }
            for name, entry in entries.items():
                if not isinstance(entry.version, str) or not is_semver(entry.version):
                    raise ValueError(f"{name}: version {entry.version!r} is not a semantic version")
                if not isinstance(entry.manifest_digest, str) or not _DIGEST.fullmatch(entry.manifest_digest):
                    raise ValueError(f"{name}: manifest_digest {entry.manifest_digest!r} is not sha256:<hex>")
            return entries
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise RegistryError(
                FailureCode.ROLLBACK_REFUSED,
                f"the activation floor file is unreadable ({exc}); fix or remove it deliberately",
                path=str(self.path),
            ) from None

    def get(self, catalogue: str) -> FloorEntry | None:
        return self._entries.get(catalogue)

    def check(self, catalogue: str, version: str, manifest_digest: str, *, lower_floor: bool = False) -> None:
        """Refuse ``version`` below the recorded floor, or another release under the floor's own version.

        Two different releases signed under one version (equivocation) mean a
        key was misused or a release was rebuilt in place; only the operator
        can decide which one is real (``--lower-floor`` re-records the floor).
        """
        if self.path is not None:
            self._entries = self._load()  # another replica may have raised it
        entry = self._entries.get(catalogue)
        if entry is None or lower_floor:
            return
        if version == entry.version and manifest_digest != entry.manifest_digest:
            raise RegistryError(
                FailureCode.ROLLBACK_REFUSED,
                f"{catalogue}@{version} was activated before as {entry.manifest_digest}; this is another release "
                "under the same version. Publish a new version, or pass --lower-floor once you know which is real",
                path=str(self.path) if self.path else None,
                details={
                    "catalogue": catalogue,
                    "version": version,
                    "floor_digest": entry.manifest_digest,
                    "digest": manifest_digest,
                },
            )
        if semver_key(version) >= semver_key(entry.version):
            return
        raise RegistryError(
            FailureCode.ROLLBACK_REFUSED,
            f"{catalogue}@{version} is below the activation floor {entry.version}; pass --lower-floor to roll "
            "back deliberately",
            path=str(self.path) if self.path else None,
            details={"catalogue": catalogue, "version": version, "floor": entry.version},
        )

    def record(self, catalogue: str, version: str, manifest_digest: str, *, lower_floor: bool = False) -> bool:
        """Raise the floor to ``version`` (or set it lower with ``lower_floor``); True if it changed."""
        entry = self._entries.get(catalogue)
        if entry is not None and not lower_floor and semver_key(version) <= semver_key(entry.version):
            return False
        if entry is not None and entry.version == version and entry.manifest_digest == manifest_digest:
            return False
        self._entries[catalogue] = FloorEntry(
            version=version, manifest_digest=manifest_digest, activated_at=int(time.time())
        )
        self._save()
        return True

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FLOOR_FORMAT,
            "catalogues": {
                name: {"version": e.version, "manifest_digest": e.manifest_digest, "activated_at": e.activated_at}
                for name, e in sorted(self._entries.items())
            },
        }

    def _save(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".floor-")
        try:
            os.fchmod(fd, 0o644)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(self.to_json(), handle, indent=2)
                handle.write("\n")
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
