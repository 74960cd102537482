"""``ReleaseProvider``: the verified releases a server holds, and refresh.

The provider is the only place releases enter the server, and it takes them
only from :func:`verify_release` (the one verification path). It keeps every
release it has ever activated, keyed by manifest digest, each with its own
query module, so a checkpoint pinned to an older release keeps being served
after a refresh. What a release serves is fixed when it is verified: a
directory that changes on disk afterwards never changes the bytes served
(``VerifiedRelease.read_file`` re-checks them against the signed manifest).

It starts with the named release (``open``) or with each catalogue's newest
release in a directory that verifies (``open_directory``; see
``provider_start``); a refresh activates newer ones the same way (see
``provider_refresh``). It also holds, for pinned runs only, an older release
that has appeared in the directory since (one put back so a pinned run can
resume); such a release is never activated.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from rimthan_workflow_registry.errors import RegistryError
from rimthan_workflow_registry.release import Stopped, StopSignal, TrustStore, semver_key, stoppable
from rimthan_workflow_registry.run import CheckpointKeyring

from .deployment_state import open_state
from .floor import ActivationFloor
from .held_on_disk import OlderReleases, warn_of_gone
from .loading import (
    LoadedRelease,
    ModuleFactory,
    RefreshResult,
    Rejection,
    ReleaseLoader,
    SyncFailure,
    SyncStatus,
    engine_module,
    load_release,
)
from .logs import get_logger
from .provider_start import start_directory, start_named
from .release_scan import newest_release_dir, release_dir_version, scan_releases
from .trust_refresh import Distrusted, co_signed_again, reload_trust, report_untrusted, still_trusted, trust_changed

_log = get_logger("provider")

__all__ = [
    "LoadedRelease",
    "ProviderOptions",
    "RefreshResult",
    "Rejection",
    "ReleaseProvider",
    "SyncFailure",
    "SyncStatus",
    "load_release",
    "newest_release_dir",
    "release_dir_version",
    "scan_releases",
]


@dataclass(frozen=True)
class ProviderOptions:
    """How a provider starts, besides what loads its releases (its ``ReleaseLoader``) and its active release."""

    migration_target: LoadedRelease | None = None  # --migration-target, held beside the active release
    others: tuple[LoadedRelease, ...] = ()  # the active releases of the other catalogues served
    releases_dir: Path | None = None  # what a refresh scans
    floor: ActivationFloor | None = None  # None: no activation floor kept
    follow_directory: bool = False  # a refresh activates catalogues that appear in releases_dir
    migrate_to_newest: bool = False


class ReleaseProvider:
    """Every verified release the server holds, the active one per catalogue, and the migration target."""

    def __init__(self, loader: ReleaseLoader, active: LoadedRelease, options: ProviderOptions | None = None) -> None:
        options = options or ProviderOptions()
        self.trust = loader.trust
        self.trust_path: Path | None = None  # set by serve: every refresh re-reads the trust store from here
        self.keyring = loader.keyring
        self.releases_dir = options.releases_dir
        self.floor = options.floor or ActivationFloor(None)
        self.follow_directory = options.follow_directory
        self.migrate_to_newest = options.migrate_to_newest
        self._module_factory = loader.module_factory
        self._lock = threading.Lock()
        self._primary = active.catalogue
        actives = {active.catalogue: active}
        for other in options.others:
            actives.setdefault(other.catalogue, other)
        self._actives: Mapping[str, LoadedRelease] = MappingProxyType(actives)
        self._migration_target = options.migration_target
        held = {loaded.digest: loaded for loaded in actives.values()}
        if self._migration_target is not None:
            held.setdefault(self._migration_target.digest, self._migration_target)
        self._held: Mapping[str, LoadedRelease] = MappingProxyType(held)
        self._reported: set[tuple[str, str]] = set()
        self._distrusted = Distrusted()  # held releases found untrusted, verified again when they change
        self._gone: set[str] = set()  # digests of held releases whose directory is gone, already warned of
        self._older = OlderReleases(self._distrusted)  # older release directories tried for pinned runs
        self.start_rejections: tuple[Rejection, ...] = ()
        # releases in releases_dir newer than their catalogue's active one that the last start or refresh did not
        # activate (a full state directory, a corrupt copy), and why: /healthz says them
        self.not_activated: tuple[Rejection, ...] = ()
        self.last_refresh: RefreshResult | None = None
        # run before each refresh (outside the lock) with the trust store the refresh verifies with: brings
        # new releases into releases_dir and returns the publishes it refused, which the refresh reports
        # (see follower.py)
        self.before_refresh: Callable[[TrustStore], tuple[Rejection, ...]] | None = None
        self.key_file_watch: Callable[[], None] | None = None  # says a changed checkpoint key file (key_file_watch)
        # a follower's syncs (the last one's failure, None: it reached the registry), for the refresh result and
        # /healthz
        self.sync_status: Callable[[], SyncStatus] | None = None
        # registers a callback the follower calls (from the syncing thread) as each sync begins and ends
        self.watch_syncs: Callable[[Callable[[], None]], None] | None = None
        # ends a follower's sync under way at once, and any after it (the server stopping): the repository, or None
        self.stop_syncs: Callable[[], str | None] | None = None
        # the signal stop_syncs sets: a refresh verifies releases under it, so a stopping server abandons that too
        self.stopping: StopSignal | None = None

    # -- construction -------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        release_dir: Path,
        *,
        trust: TrustStore,
        keyring: CheckpointKeyring,
        migration_target_dir: Path | None = None,
        releases_dir: Path | None = None,
        state_dir: Path | None = None,
        lower_floor: bool = False,
        record_floor: bool = True,
        module_factory: ModuleFactory = engine_module,
    ) -> ReleaseProvider:
        """Verify the named release (and migration target) and check the rollback floor, or raise.

        ``record_floor=False`` checks without writing (``rimthan-mcp check``).
        """
        where = releases_dir if releases_dir is not None else Path(release_dir).parent
        floor = open_state(state_dir, trust, where, serving=record_floor, explicit=True)
        loader = ReleaseLoader(trust, keyring, module_factory)
        started = start_named(
            release_dir, migration_target_dir, loader, floor, lower_floor=lower_floor, record_floor=record_floor
        )
        options = ProviderOptions(migration_target=started.migration_target, releases_dir=where, floor=floor)
        provider = cls(loader, started.active, options)
        provider._hold_older_releases()
        return provider

    @classmethod
    def open_directory(
        cls,
        releases_dir: Path,
        *,
        trust: TrustStore,
        keyring: CheckpointKeyring,
        state_dir: Path | None = None,
        lower_floor: bool = False,
        record_floor: bool = True,
        migrate_to_newest: bool = False,
        module_factory: ModuleFactory = engine_module,
    ) -> ReleaseProvider:
        """Serve every catalogue in ``releases_dir``: each one's newest release that verifies
        (:func:`.provider_start.start_directory`); the newer ones refused are kept in ``start_rejections``."""
        floor = open_state(state_dir, trust, releases_dir, serving=record_floor)
        loader = ReleaseLoader(trust, keyring, module_factory)
        started = start_directory(releases_dir, loader, floor, lower_floor=lower_floor, record_floor=record_floor)
        actives, rejected = started.actives, list(started.rejected)
        options = ProviderOptions(
            others=tuple(actives[1:]),
            releases_dir=releases_dir,
            floor=floor,
            follow_directory=True,
            migrate_to_newest=migrate_to_newest,
        )
        provider = cls(loader, actives[0], options)
        provider.start_rejections = provider.not_activated = tuple(rejected)
        provider._reported = {(r.path, r.code) for r in rejected}
        provider._found_untrusted(rejected)
        provider._hold_older_releases()
        return provider

    # -- what is held ---------------------------------------------------------------------

    @property
    def active(self) -> LoadedRelease:
        """The primary catalogue's active release (the only one under ``--release``)."""
        return self._actives[self._primary]

    @property
    def actives(self) -> Mapping[str, LoadedRelease]:
        """The active release of every served catalogue, by catalogue name (a read-only snapshot)."""
        return self._actives

    @property
    def migration_target(self) -> LoadedRelease | None:
        """The explicit migration target given at start (``--migration-target``), if any."""
        return self._migration_target

    @property
    def held(self) -> Mapping[str, LoadedRelease]:
        """Every release held, by manifest digest (a read-only snapshot)."""
        return self._held

    def get(self, manifest_digest: str) -> LoadedRelease | None:
        return self._held.get(manifest_digest)

    def distrusted(self, manifest_digest: str) -> bool:
        """Whether that release was held until the trust store stopped vouching for it (a signing key removed), or
        its directory was refused for that alone (at start too: a restart says the same)."""
        return self._distrusted.holds(manifest_digest)

    def active_for_workflow(self, name: object) -> LoadedRelease:
        """The active release whose catalogue has a workflow (or alias) called ``name``
        (:func:`.workflow_selection.served_release_for`)."""
        from .workflow_selection import served_release_for  # (the engine's side: loaded on calls)

        return served_release_for(self._actives, name)

    def migration_target_for(self, source: LoadedRelease) -> LoadedRelease | None:
        """Where a run pinned to ``source`` may migrate: the explicit target, else (when enabled)
        the active release of the run's catalogue if it is newer than the pinned one."""
        if self._migration_target is not None:
            return self._migration_target
        if not self.migrate_to_newest:
            return None
        newest = self._actives.get(source.catalogue)
        if newest is None or semver_key(newest.version) <= semver_key(source.version):
            return None
        return newest

    def describe(self) -> dict[str, Any]:
        return {
            "active": self.active.describe(),
            "actives": {name: loaded.describe() for name, loaded in sorted(self._actives.items())},
            "migration_target": self._migration_target.describe() if self._migration_target else None,
            "migrate_to_newest": self.migrate_to_newest,
            "held": sorted(self._held),
            "releases_dir": str(self.releases_dir) if self.releases_dir else None,
            "floor": str(self.floor.path) if self.floor.path else None,
        }

    # -- refresh ------------------------------------------------------------------------

    def refresh(self, trigger: str = "call") -> RefreshResult:
        """Activate, per catalogue, the newest release in ``releases_dir`` that verifies; never an unverified one.

        Blocking (it verifies releases); call it from a worker thread in async
        code. Logs one ``refresh done`` record: warning for a rejection (a
        periodic rescan: only one not reported before) or, asked for, after a
        follower's failed sync (``sync_failed``), info for an activation
        or an asked-for refresh (SIGHUP), debug for a periodic rescan that
        changed nothing, so ``--refresh-interval`` does not fill the log.
        """
        if self.key_file_watch is not None:
            self.key_file_watch()
        # read before the follower pulls, so that it pulls under the store this refresh then verifies with
        reloaded = reload_trust(self.trust_path, self.trust) if self.trust_path is not None else None
        trust_now = reloaded[0] if reloaded is not None else self.trust
        refused = self.before_refresh(trust_now) if self.before_refresh is not None else ()
        try:
            with self._lock, stoppable(self.stopping):  # a stop asked now abandons the verifications below
                result, fresh = self._refreshed(reloaded, refused)
        except Stopped as stopped:  # nothing verified is activated, nor the floor moved: the server is stopping
            _log.info("refresh stopped", extra={"trigger": trigger, **stopped.said()})
            raise
        asked = trigger != "interval"  # SIGHUP or a caller: the operator wants to hear the answer
        if fresh or (asked and (result.rejected or result.sync_failed)):
            level = "warning"
        elif asked or result.outcome == "activated":
            level = "info"
        else:
            level = "debug"
        getattr(_log, level)("refresh done", extra={"trigger": trigger, **result.to_dict()})
        return result

    def _refreshed(
        self, reloaded: tuple[TrustStore, tuple[Rejection, ...]] | None, refused: tuple[Rejection, ...]
    ) -> tuple[RefreshResult, list[Rejection]]:
        """The refresh under the lock: the trust store reloaded, releases activated and held, the result kept;
        with the rejections not reported before."""
        before = self.trust
        if reloaded is not None:
            self.trust, untrusted_store = reloaded
            refused += untrusted_store
        failed = self.sync_status().failure if self.sync_status is not None else None
        self._distrusted.forget_gone(self._serving())  # a directory refused or dropped as untrusted, since deleted:
        # "put it back" now
        result = replace(self._refresh_locked(refused), sync_failed=failed)
        changed = trust_changed(before, self.trust)
        if changed:
            self._older.forget()  # an older release the old store refused may verify under this one
        self._hold_older_releases(announce=True)  # one put back for pinned runs is served from now on
        warn_of_gone(self._held.values(), self._gone)
        for again in self._distrusted.trusted_again(self.trust, changed=changed):
            self._hold_as(again)
        if changed:
            self._drop_untrusted()
        self.last_refresh = result
        fresh = [r for r in result.rejected if (r.path, r.code) not in self._reported]
        self._reported.update((r.path, r.code) for r in result.rejected)
        return result, fresh

    def _refresh_locked(self, refused: tuple[Rejection, ...] = ()) -> RefreshResult:
        from .provider_refresh import Activating, activate_newer, refresh_result  # a start refreshes nothing

        scanned = self._scan()
        catalogues = set(self._actives) | (set(scanned) if self.follow_directory else set())
        activating = Activating(lambda: self._actives, lambda: self._held, self._activate, self._loader, self.floor)
        found = activate_newer(scanned, catalogues, activating)
        self.not_activated = found.rejected
        self._found_untrusted(list(found.rejected))
        return refresh_result(found, refused, self.active)

    def _drop_untrusted(self) -> None:
        """Stop holding releases the trust store no longer vouches for; an active one (or the explicit
        migration target) keeps serving until restart, so no catalogue goes dark, and is reported."""
        serving = self._serving()
        untrusted = [loaded for loaded in self._held.values() if not still_trusted(loaded, self.trust)]
        untrusted = [loaded for loaded in untrusted if not self._co_signed_on_disk(loaded)]
        for loaded in untrusted:
            report_untrusted(loaded, dropped=loaded.digest not in serving)
            self._distrusted.remember(loaded)
        dropped = {loaded.digest for loaded in untrusted if loaded.digest not in serving}
        self._held = MappingProxyType({d: loaded for d, loaded in self._held.items() if d not in dropped})

    def _serving(self) -> set[str]:
        """The digests of the releases served: the active ones and the explicit migration target."""
        serving = {loaded.digest for loaded in self._actives.values()}
        if self._migration_target is not None:
            serving.add(self._migration_target.digest)
        return serving

    def _found_untrusted(self, rejected: list[Rejection]) -> None:
        """Remember each release directory refused only because the trust store does not vouch for it."""
        for rejection in rejected:
            self._distrusted.found_on_disk(Path(rejection.path), rejection.failure)

    def _co_signed_on_disk(self, loaded: LoadedRelease) -> bool:
        """Whether ``loaded`` was co-signed on disk since it was loaded; if so it is held (and served) as that."""
        again = co_signed_again(loaded, self.trust)
        if again is not None:
            self._hold_as(again)
        return again is not None

    def _hold_as(self, again: LoadedRelease) -> None:
        """Hold ``again`` (verified again under the trust store) in place of the release of its digest."""
        self._held = MappingProxyType({**self._held, again.digest: again})
        actives = self._actives.items()
        self._actives = MappingProxyType({c: again if a.digest == again.digest else a for c, a in actives})
        if self._migration_target is not None and self._migration_target.digest == again.digest:
            self._migration_target = again

    def _activate(self, loaded: LoadedRelease) -> None:
        self._held = MappingProxyType({**self._held, loaded.digest: loaded})
        self._actives = MappingProxyType({**self._actives, loaded.catalogue: loaded})

    @property
    def _loader(self) -> ReleaseLoader:
        """What this provider loads a release with: the trust store as it is now (a refresh may reload it)."""
        return ReleaseLoader(self.trust, self.keyring, self._module_factory)

    def _scan(self) -> dict[str, list[Path]]:
        if self.releases_dir is None:
            return {}
        try:
            return scan_releases(self.releases_dir)
        except RegistryError:
            return {}

    def _hold_older_releases(self, *, announce: bool = False) -> None:
        """Also hold the older releases of each active catalogue that verify, never activating them (see
        :class:`OlderReleases`; ``announce``: each one held is logged)."""
        held = self._older.held_with(self._scan(), self._actives, self._held, self._loader, announce=announce)
        self._held = MappingProxyType(held)
