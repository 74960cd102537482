"""Held releases and the releases directory: whether each is still there, and the older ones held for pinned runs.

A held release serves from what was verified at load, so runs pinned to it go on when an operator deletes
its directory; but a restart holds only what is on disk, and those runs would then be refused
(``pinned_release_unavailable``). A refresh says so once, while it can still be put back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from rimthan_workflow_registry.errors import RegistryError
from rimthan_workflow_registry.release import MANIFEST_NAME, semver_key

from .file_looks import ReleaseLook, release_look
from .loading import LoadedRelease, ReleaseLoader, unverifiable
from .logs import get_logger
from .release_scan import release_dir_version
from .trust_refresh import Distrusted

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


class OlderReleases:
    """The older releases of each active catalogue that verify, held for the runs pinned to them, never activated.

    A replica that restarts after a refresh still serves the runs pinned to
    releases it had loaded before; one that does not verify is skipped
    (logged), so those runs get ``pinned_release_unavailable``, never bytes
    that did not verify. Each release directory is tried once (again only if it
    or its signatures directory is replaced or changed: co-signed in place), so
    a refresh verifies only an older release that appeared or changed since.
    Only the paths in the latest scan are remembered, each with its latest look:
    a long-running follower replacing directories remembers no more than it holds.
    """

    def __init__(self, distrusted: Distrusted) -> None:
        self._looked_at: dict[str, ReleaseLook] = {}  # directories tried in the latest scan: how each looked
        self._distrusted = distrusted  # told of one refused only as untrusted

    def forget(self) -> None:
        """Try every directory again (the trust store changed: one it refused may verify now)."""
        self._looked_at.clear()

    def held_with(
        self,
        scanned: Mapping[str, list[Path]],
        actives: Mapping[str, LoadedRelease],
        held: Mapping[str, LoadedRelease],
        loader: ReleaseLoader,
        *,
        announce: bool,
    ) -> dict[str, LoadedRelease]:
        """``held`` and every older release in ``scanned`` not tried before that verifies (``announce``: logged)."""
        now = dict(held)
        in_scan = {str(path) for paths in scanned.values() for path in paths}
        self._looked_at = {path: look for path, look in self._looked_at.items() if path in in_scan}
        for catalogue, current in actives.items():
            for path in scanned.get(catalogue, []):
                version = release_dir_version(path, catalogue)
                if version is None or semver_key(version) >= semver_key(current.version) or not self._first_look(path):
                    continue
                loaded = _load_older(path, current, loader, self._distrusted)
                if loaded is not None and loaded.digest not in now:
                    now[loaded.digest] = loaded
                    if announce:
                        _log.info("older release held for pinned runs", extra={"release": loaded.release.release_id})
        return now

    def _first_look(self, path: Path) -> bool:
        look = release_look(path)
        if look[0] is None:
            return False
        first = self._looked_at.get(str(path)) != look
        self._looked_at[str(path)] = look
        return first

    @property
    def remembered(self) -> int:
        """How many release directories are remembered as tried (at most those of the latest scan)."""
        return len(self._looked_at)


def _load_older(
    path: Path, current: LoadedRelease, loader: ReleaseLoader, distrusted: Distrusted
) -> LoadedRelease | None:
    try:
        return loader.load(path, expected_scope=current.scope_name)
    except RegistryError as exc:
        _log.warning("older release not held", extra={"path": str(path), "error": exc.to_dict()})
        distrusted.found_on_disk(path, exc)
    except Exception as exc:  # nothing in the releases directory may stop a server from starting
        _log.warning("older release not held", extra={"path": str(path), "error": unverifiable(path, exc).to_dict()})
    return None
