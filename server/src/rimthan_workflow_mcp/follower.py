"""The follower of one OCI repository: :class:`RegistryFollower` (what :mod:`.follow` starts).

One sync lists the repository's version tags, pulls each new one through the
core's one pull path, remembers what it pulled or refused, replaces a copy
that no longer verifies, and says each failure once per kind; the refresh
result and ``GET /healthz`` read what the last sync found. How a follower is
started, and the refusal of a start with nothing held, are :mod:`.follow`'s.
"""

from __future__ import annotations

import errno
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rimthan_workflow_registry.errors import FailureCode, RegistryError, quoted
from rimthan_workflow_registry.protocol_names import WORKFLOW_ENGINE_PROFILE
from rimthan_workflow_registry.release import (
    SYNC_DEADLINE,
    OciReference,
    Stopped,
    StopSignal,
    TrustStore,
    open_registry,
    pull_release,
    registry_deadline,
    stoppable,
    tagged_manifest,
    version_tags,
)
from rimthan_workflow_registry.remediation import io_next_step, next_step

from .follow_disk import Fingerprint, fingerprint, untagged_copies
from .follow_memory import RefusedDigests
from .last_sync import LastSync
from .loading import utc_now
from .logs import get_logger
from .provider import Rejection, SyncFailure, SyncStatus
from .recurring import Recurring
from .release_scan import scan_releases
from .trust_refresh import trust_changed

_log = get_logger("follow")
_GONE = "tag gone from the registry; its release is kept"
# What a failing first sync (a start) says the replica does meanwhile when the releases directory holds no release:
# not "serving what is held" nor "will retry": the start goes on only if a pull of that sync succeeds.
NOTHING_HELD_YET = "nothing held to serve yet"
CHECK_REGISTRY = (
    "check the registry address in --releases-from, the network to it, and --plain-http (a registry without TLS "
    "needs it)"
)
_WITHDRAW = (
    "replicas that pulled it keep serving it (only --lower-floor rolls one back) and new ones will not pull it; to "
    "withdraw a release, publish a fixed newer version (docs/fleet.md, withdrawing a release)"
)
# Refusals about reaching the registry (address, credentials, TLS trust) or about the local disk (full, read-only:
# io_error), not about what was published: the pull is tried again on the next refresh.
_TRANSIENT = frozenset(
    {FailureCode.OCI_REGISTRY_ERROR, FailureCode.OCI_UNAUTHORIZED, FailureCode.OCI_TLS_UNTRUSTED, FailureCode.IO_ERROR}
)

# The registry served other bytes than the digests name (its storage altered, a proxy mangling plain HTTP): no
# verdict on the release those digests name, so the tag is refused for now and pulled again at the next refresh
# (a repaired registry is then taken without a restart); its refusal is still said once.
_REGISTRY_BYTES = frozenset({FailureCode.OCI_BLOB_MISMATCH})


@dataclass
class RegistryFollower:
    """Pulls a repository's release tags into ``releases_dir``; remembers what it pulled or refused."""

    ref: OciReference
    trust: TrustStore
    releases_dir: Path
    plain_http: bool = False
    _seen: dict[str, str] = field(default_factory=dict)  # tag -> OCI digest pulled or refused
    _refused: dict[str, Rejection] = field(default_factory=dict)  # tag -> why its current digest was refused
    _refused_digests: RefusedDigests = field(default_factory=RefusedDigests)  # never pulled again (same trust)
    _first_sync: bool = True  # copies whose tag went while the replica was down: warned of at its first listing
    _starting: bool = True  # the first sync under way (the start): its warnings say whether anything is held
    _copies: dict[str, tuple[Path, Fingerprint]] = field(default_factory=dict)  # tag -> its directory as pulled
    _failed: dict[str, RegistryError] = field(default_factory=dict)  # tag -> why its last pull failed (transient)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _outage: Recurring = field(
        default_factory=lambda: Recurring(
            _log, "registry unreachable; serving what is held", "registry still unreachable", "registry reachable again"
        )
    )
    _credentials: Recurring = field(
        default_factory=lambda: Recurring(
            _log,
            "registry refused our credentials; serving what is held",
            "registry still refuses our credentials",
            "registry accepts our credentials again",
        )
    )
    _disk: Recurring = field(
        default_factory=lambda: Recurring(
            _log,
            "sync failed on a local file; serving what is held",
            "sync still failing on a local file",
            "sync no longer failing on a local file",
        )
    )
    _pulls: Recurring = field(default_factory=lambda: Recurring(_log, "pull failed; will retry", "pull still failing"))
    last_error: RegistryError | None = None  # why the last sync reached no registry (None: it did)
    _failure: SyncFailure | None = None  # why the last sync failed, since when (None: it did not)
    _pull_failed_now: RegistryError | None = None  # a pull that failed in the sync under way
    _refused_now: tuple[Rejection, ...] = ()  # the publishes refused as the last sync ended, in tag order
    _synced: tuple[float, str] | None = None  # the last sync that did not fail: monotonic time, and UTC
    _under_way: tuple[float, str] | None = None  # when the sync under way began: monotonic time, and UTC
    _began: float = field(default_factory=time.monotonic)
    _watchers: list[Callable[[], None]] = field(default_factory=list)  # told as each sync begins and ends
    _stop: StopSignal = field(default_factory=StopSignal)  # the server stopping: syncs end at once (stop)
    last_sync: LastSync | None = None  # the last good sync kept in the state directory (read at start)

    def sync(self, trust: TrustStore | None = None) -> tuple[Rejection, ...]:
        """Pull every new version tag; return the tags currently refused (for the refresh result).

        ``trust``: the store as the refresh reloaded it; when it differs from
        the one the follower pulled with, every refused tag is tried again. Raises
        :class:`Stopped` once :meth:`stop` was called: the sync under way ends at once, its download removed,
        the releases directory and what the follower knows as before it.
        """
        with self._lock, registry_deadline(SYNC_DEADLINE), stoppable(self._stop):
            if self._stop.asked:  # the server is stopping: no sync starts
                raise Stopped
            self._under_way = (time.monotonic(), began := utc_now())  # a registry that hangs holds the sync: /healthz
            self._tell_watchers()
            try:
                return self._sync_under_lock(trust)
            except Stopped as stopped:
                _log.info("sync stopped", extra={"registry": str(self.ref), "began": began, **stopped.said()})
                raise
            finally:
                self._under_way = None
                self._starting = False
                self._tell_watchers()

    @property
    def stopping(self) -> StopSignal:
        """The signal :meth:`stop` sets: the provider's refresh verifies what a sync pulled under it too."""
        return self._stop

    def stop(self) -> str | None:
        """End the sync under way at once and start none after it (the server is stopping; any thread, a signal
        handler too); the repository it was syncing, or None if none was under way."""
        under_way = self._under_way is not None
        self._stop.stop()
        return str(self.ref) if under_way else None

    def _meanwhile(self) -> str | None:
        """What a failure's warning says the replica does meanwhile, when not its usual words (serving what is
        held, or will retry): at the start, with no release in the releases directory, that nothing is held yet."""
        if not self._starting:
            return None
        try:
            scan_releases(self.releases_dir)
        except (RegistryError, OSError):
            return NOTHING_HELD_YET
        return None

    def watch(self, watcher: Callable[[], None]) -> None:
        """Call ``watcher`` (in the syncing thread) as each sync begins and as it ends: /healthz's transitions."""
        self._watchers.append(watcher)

    def _tell_watchers(self) -> None:
        for watcher in self._watchers:
            watcher()

    def _sync_under_lock(self, trust: TrustStore | None) -> tuple[Rejection, ...]:
        if trust is not None:
            self._retrust(trust)
        self._pull_failed_now = None
        try:
            self._sync_locked()
        except RegistryError as exc:
            self._unreachable(exc)
            self._sync_failed(exc)
        except OSError as exc:  # nothing a local file does (the releases directory, a Docker config) may stop a
            # server holding a release; what the core's pull path did not say as io_error
            kind = errno.errorcode.get(exc.errno or 0, type(exc).__name__)
            self._disk.failed(kind, {"exc": quoted(exc), "next": io_next_step(exc)}, meanwhile=self._meanwhile())
            self._sync_failed(RegistryError(FailureCode.IO_ERROR, quoted(exc), path=str(self.releases_dir)))
        else:
            self._reached()
            self._disk.over(releases=str(self.releases_dir))
            self._settled()
        self._refused_now = self.refused()  # for /healthz, which reads it without the lock
        return tuple(self._refused.values())

    def status(self) -> SyncStatus:
        """The syncs as /healthz judges them: the last failure, a sync under way, the last good sync (unlocked: a
        sync that hangs holds the lock)."""
        synced_at, last_synced = self._last_good()
        under_way_at, under_way = self._under_way or (None, None)
        return SyncStatus(
            str(self.ref), self._failure, under_way, last_synced, synced_at, under_way_at, self._refused_now
        )

    def _last_good(self) -> tuple[float, str | None]:
        """The last sync that did not fail (monotonic, UTC), or the follower's beginning (and None)."""
        return self._synced if self._synced is not None else (self._began, None)

    def _settled(self) -> None:
        """A sync that reached the registry: failed still if a pull in it failed (a full disk), else not."""
        if self._pull_failed_now is None:
            self._failure = None
            self._synced = (time.monotonic(), utc_now())
            if self.last_sync is not None:
                self.last_sync.write(self._synced[1])
        else:
            self._sync_failed(self._pull_failed_now)

    def _sync_failed(self, exc: RegistryError) -> None:
        since = self._failure.since if self._failure is not None else utc_now()
        self._failure = SyncFailure(exc.to_dict(), since)

    def _unreachable(self, exc: RegistryError) -> None:
        """One warning when the registry stops answering (or fails another way), silence while it stays so."""
        self.last_error = exc
        if exc.code is FailureCode.OCI_UNAUTHORIZED:  # it answers, and refuses us: not an outage
            self._outage.switched()
            said = {"error": exc.to_dict(), "next": _credentials_step(exc)}
            self._credentials.failed(exc.code.value, said, meanwhile=self._meanwhile())
            return
        self._credentials.switched()
        step = CHECK_REGISTRY if exc.code is FailureCode.OCI_REGISTRY_ERROR else next_step(exc)
        self._outage.failed(exc.code.value, {"error": exc.to_dict(), "next": step}, meanwhile=self._meanwhile())

    def _reached(self) -> None:
        """One info line when a registry that could not be reached answers again."""
        self.last_error = None
        self._outage.over(registry=str(self.ref))
        self._credentials.over(registry=str(self.ref))

    def _retrust(self, trust: TrustStore) -> None:
        """Pull under ``trust`` from now on; a changed store forgets the manifests it refused, to try them again."""
        if trust_changed(self.trust, trust):
            self._refused_digests.forget()
        if trust_changed(self.trust, trust) and self._refused:
            retried = sorted(self._refused)
            for tag in retried:
                self._seen.pop(tag, None)
            _log.info("trust store changed; pulling refused tags again", extra={"tags": retried})
        self.trust = trust

    def _sync_locked(self) -> None:
        registry = open_registry(self.ref, plain_http=self.plain_http)
        tags = version_tags(registry, self.ref)
        self._withdrawn(set(tags))
        if self._first_sync:
            self._first_sync = False
            self._gone_while_down(set(tags))
        for gone in set(self._refused) - set(tags):
            del self._refused[gone]
        self._forget_changed_copies()
        for tag in tags:
            ref = self.ref.with_tag(tag)
            try:
                found = tagged_manifest(registry, ref)
            except RegistryError as exc:
                if exc.code in _TRANSIENT:  # the registry, not this tag: the whole sync is tried again
                    raise
                self._refuse(tag, str(ref), exc)  # this tag's publish: the tags after it are still pulled
                continue
            if found is None:  # untagged since the list was read
                continue
            digest, _ = found
            if self._seen.get(tag) == digest:
                continue
            if (known := self._refused_digests.known(digest, tag)) is not None:  # same bytes: same refusal
                self._seen[tag] = digest
                self._refuse(tag, f"{ref}@{digest}", known, said=True)
                continue
            self._pull(tag, ref, digest)

    def _withdrawn(self, tags: set[str]) -> None:
        """One warning per pulled tag no longer in the registry: its release stays (a registry never rolls a
        replica back), and a replica that starts afresh will not have it, so the fleet may split."""
        for tag in sorted(set(self._seen) - tags):
            del self._seen[tag]  # pulled again if it comes back
            if tag in self._refused:
                continue
            _log.warning(_GONE, extra={"reference": str(self.ref.with_tag(tag)), "next": _WITHDRAW})

    def _gone_while_down(self, tags: set[str]) -> None:
        """At the first sync (a start): one warning per copy held whose tag the registry no longer has, as
        :meth:`_withdrawn` says it of a tag deleted while the follower ran (a restart must not hide it)."""
        for version, path in untagged_copies(self.releases_dir, tags):
            reference = str(self.ref.with_tag(version))
            _log.warning(_GONE, extra={"reference": reference, "path": str(path), "next": _WITHDRAW})

    def _pull(self, tag: str, ref: OciReference, digest: str) -> None:
        where = f"{ref}@{digest}"
        try:
            pulled = pull_release(
                OciReference(ref.host, ref.repository, tag=tag),
                self.trust,
                self.releases_dir,
                plain_http=self.plain_http,
                expected_profile=WORKFLOW_ENGINE_PROFILE,
                replace_damaged=True,  # this directory is the follower's: a copy that no longer verifies is repaired
            )
        except RegistryError as exc:
            if exc.code in _TRANSIENT:  # the registry or the disk, not the publish: try again on the next refresh
                self._pull_failed(tag, where, exc)
                return
            if exc.code not in _REGISTRY_BYTES:  # a verdict on the digest's bytes: not pulled again
                self._seen[tag] = digest
                self._refused_digests.remember(digest, tag, exc)
            self._refuse(tag, where, exc)
            return
        self._seen[tag] = digest
        self._refused.pop(tag, None)
        self._failed.pop(tag, None)
        self._pulls.over(tag)  # said by the "pulled" line below
        self._copies[tag] = (pulled.path, fingerprint(pulled.path))
        replaced = {"path": str(pulled.path), "reference": where, "why": pulled.replaced_damaged}
        if pulled.replaced_untrusted:  # a trust change, then a push its signers now vouch for: no damage
            _log.info("copy the trust store no longer vouches for replaced", extra=replaced)
        elif pulled.replaced_damaged is not None:
            _log.warning("damaged copy replaced", extra=replaced)
        _log.info("pulled", extra={"reference": where, "pulled": pulled.to_dict()})

    def refused(self) -> tuple[Rejection, ...]:
        """The tags whose current publish was refused, in tag order."""
        return tuple(self._refused[tag] for tag in sorted(self._refused))

    def pull_failure(self) -> RegistryError | None:
        """Why a pull failed in the last sync (the disk, the registry mid-pull), if one did."""
        return next(iter(self._failed.values()), None)

    def _pull_failed(self, tag: str, where: str, exc: RegistryError) -> None:
        """One warning per kind of failure (its code and next step: a full disk, a read-only one), not per refresh."""
        self._failed[tag] = exc
        self._pull_failed_now = exc
        said = {"reference": where, "error": exc.to_dict(), "next": next_step(exc)}
        self._pulls.failed((exc.code.value, said["next"]), said, key=tag, meanwhile=self._meanwhile())

    def _forget_changed_copies(self) -> None:
        """Pull again each tag whose directory changed on disk since it was pulled (edited, deleted, replaced).

        The pull verifies the copy there: one that no longer verifies is replaced, one that does is kept.
        """
        for tag, (path, pulled) in list(self._copies.items()):
            if fingerprint(path) != pulled:
                del self._copies[tag]
                self._seen.pop(tag, None)

    def _refuse(self, tag: str, where: str, exc: RegistryError, *, said: bool = False) -> None:
        """Keep ``tag`` out, saying why once (a manifest refused before its digest is known is asked again;
        ``said``: a digest refused before, its refusal logged then)."""
        rejection = Rejection(where, exc)
        if not said and self._refused.get(tag) != rejection:
            _log.warning("publish refused", extra={"reference": where, "error": exc.to_dict()})
        self._refused[tag] = rejection


def _credentials_step(exc: RegistryError) -> str:
    """Where the follower's credentials come from, and when it reads them again."""
    where = (
        "give credentials the registry accepts: config.json (Docker), RIMTHAN_REGISTRY_USERNAME_FILE and "
        "RIMTHAN_REGISTRY_PASSWORD_FILE are read again at every refresh (SIGHUP), RIMTHAN_REGISTRY_USERNAME and "
        "_PASSWORD only at start"
    )
    return where if exc.next_step is None else f"{exc.next_step}; {where}"
