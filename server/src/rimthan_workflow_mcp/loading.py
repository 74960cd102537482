"""What a server holds of one release, and the one way a release directory gets there.

``load_release`` verifies a directory through ``verify_release`` and builds
its query module; ``verify_candidate`` adds what a releases directory needs
on top (the name matches the signed manifest, the activation floor).
:class:`ReleaseLoader` is what every load takes (the trust store, the
checkpoint keys, the query module factory), carried as one value.
``LoadedRelease``, ``Rejection`` and ``RefreshResult`` are the records the
provider (:mod:`.provider`) keeps and reports. Split from the provider so
the provider is only about which releases are active.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from rimthan_workflow_registry.errors import FailureCode, RegistryError, quoted
from rimthan_workflow_registry.protocol_names import WORKFLOW_ENGINE_PROFILE
from rimthan_workflow_registry.release import MANIFEST_NAME, TrustStore, VerifiedRelease, verify_release
from rimthan_workflow_registry.run import CheckpointKeyring

from .floor import ActivationFloor
from .logs import get_logger
from .release_scan import release_dir_version

if TYPE_CHECKING:
    from .workflow_engine import WorkflowEngineQueryModule

_log = get_logger("provider")

ModuleFactory = Callable[[VerifiedRelease, CheckpointKeyring], "WorkflowEngineQueryModule"]


def engine_module(release: VerifiedRelease, keyring: CheckpointKeyring) -> WorkflowEngineQueryModule:
    """The query module of the ``workflow-engine`` profile, the one this server serves."""
    from .workflow_engine import WorkflowEngineQueryModule

    return WorkflowEngineQueryModule(release, keyring)


@dataclass(frozen=True, eq=False)
class LoadedRelease:
    """A verified release and the query module that serves it.

    The module is built on first use, the first tool call routed here: a start that only lists
    tools imports none of what tool calls use (the engine, checkpoints, bundles, results).
    """

    release: VerifiedRelease
    keyring: CheckpointKeyring
    factory: ModuleFactory = engine_module
    _built: list[WorkflowEngineQueryModule] = field(default_factory=list, repr=False)
    _building: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def module(self) -> WorkflowEngineQueryModule:
        if not self._built:
            with self._building:
                if not self._built:
                    self._built.append(self._build())
        return self._built[0]

    def _build(self) -> WorkflowEngineQueryModule:
        from .workflow_engine import WorkflowEngineQueryModule

        module = self.factory(self.release, self.keyring)
        if not isinstance(module, WorkflowEngineQueryModule):
            raise RegistryError(
                FailureCode.INTERNAL_ERROR, f"{self.release.release_id} is not served by WorkflowEngineQueryModule"
            )
        return module

    @property
    def digest(self) -> str:
        return self.release.manifest_digest

    @property
    def catalogue(self) -> str:
        return self.release.manifest.release.catalogue

    @property
    def version(self) -> str:
        return self.release.manifest.release.version

    @property
    def scope_name(self) -> str:
        return self.release.manifest.release.scope_name

    @property
    def profile(self) -> str:
        return self.release.manifest.release.scope_profile

    def describe(self) -> dict[str, Any]:
        return {
            "release": self.release.release_id,
            "manifest_digest": self.digest,
            "path": str(self.release.root),
            "scope": self.scope_name,
            "signers": list(self.release.signer_key_ids),
        }


@dataclass(frozen=True, eq=False)
class Rejection:
    """A candidate release (or a trust store that no longer loads) refused at start or on refresh, and why: the
    typed ``failure`` (what a load read: a refusal as untrusted names the manifest's digest) and, when the
    refusing side knows the fix rather than the code alone, the ``remedy`` said with it (``next_step``)."""

    path: str
    failure: RegistryError
    remedy: str | None = None

    def __eq__(self, other: object) -> bool:
        """Equal when said the same (a follower says a tag's refusal again only when it changed)."""
        return isinstance(other, Rejection) and other.to_dict() == self.to_dict()

    def __hash__(self) -> int:
        return hash((self.path, self.code, self.failure.message))

    @property
    def code(self) -> str:
        return self.failure.code.value

    @property
    def error(self) -> dict[str, Any]:
        """The failure as a refusal says it (a log line, ``details.rejected``): its dict form, then the remedy."""
        said = self.failure.to_dict()
        return said if self.remedy is None else {**said, "next_step": self.remedy}

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "error": self.error}

    def held_back(self) -> dict[str, Any]:
        """What ``GET /healthz`` says of a release held but not activated: its directory, code and message."""
        return {"release": Path(self.path).name, "code": self.code, "message": self.failure.message}

    def refused_publish(self) -> dict[str, Any]:
        """What a follower's ``GET /healthz`` says of a publish it refused: the reference, code and message."""
        return {"reference": self.path, "code": self.code, "message": self.failure.message}

    def summary(self) -> str:
        """``code: file: message`` for a one-line report: the failing file (relative to the release when it is
        inside it, quoted and bounded), which the release's own path does not say."""
        return self._summary(self.failure)

    def summaries(self) -> list[str]:
        """:meth:`summary`, then one for each failure collected with it (``details.also``): one line each."""
        return [self._summary(failure) for failure in self.failure.failures]

    def _summary(self, failure: RegistryError) -> str:
        where = failure.path
        file = ""
        if where and Path(where) != Path(self.path):
            inside = Path(where).is_relative_to(self.path)
            file = f"{quoted(Path(where).relative_to(self.path) if inside else where)}: "
        return f"{failure.code.value}: {file}{failure.message}"


@dataclass(frozen=True)
class SyncFailure:
    """Why a follower's last sync failed (the registry down or refusing us, a local file, a pull in it): its
    error (code, message), and ``since``: when the syncs began failing (UTC, ISO 8601); what is held still serves
    (when the last good sync was: :class:`SyncStatus`)."""

    error: dict[str, Any]
    since: str

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.error.get("code"), "message": self.error.get("message"), "since": self.since}


def utc_now() -> str:
    """Now in UTC, to the second, as the follower's ``since`` and ``last_synced`` say it (ISO 8601)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclass(frozen=True)
class SyncStatus:
    """A follower's syncs as ``GET /healthz`` judges them (``serve --stale-after``) and says them (``refused``: the
    publishes the last sync kept out, none of them a failed sync): the registry followed, why the
    last sync failed (None: it did not), ``under_way``: when the sync under way began (UTC; None: none is) and
    ``under_way_at`` (that moment on the monotonic clock), and its last good sync: ``last_synced`` (UTC, kept
    across restarts by :mod:`.last_sync`; None: none kept) and ``synced_at`` (that moment, or the follower's
    beginning, on the monotonic clock)."""

    registry: str
    failure: SyncFailure | None
    under_way: str | None
    last_synced: str | None
    synced_at: float
    under_way_at: float | None = None
    refused: tuple[Rejection, ...] = ()  # the publishes the last sync refused (a bad publish: no failed sync)

    def stale_at(self, after: float) -> float | None:
        """When (monotonic) the replica turns stale, ``after`` seconds being what ``--stale-after`` allows; None
        while nothing is wrong. A failed sync counts from the last good one; a sync under way (none failed) only
        from its own start, so an ordinary sync is no trouble however long ago the last one was (a SIGHUP, or a
        ``--refresh-interval`` above ``after``), and a registry that hangs turns it stale ``after`` seconds in."""
        if self.failure is not None:
            return self.synced_at + after
        if self.under_way_at is not None:
            return self.under_way_at + after
        return None


@dataclass(frozen=True)
class RefreshResult:
    """What one refresh did: ``activated`` a newer release, ``unchanged``, or ``rejected`` every candidate.

    ``active``/``previous`` name the first release activated (else the primary
    catalogue's active release); ``activated`` lists every activation;
    ``sync_failed``: a follower's sync before this refresh failed (said only then).
    """

    outcome: Literal["activated", "unchanged", "rejected"]
    active: str
    active_digest: str
    previous: str | None = None
    rejected: tuple[Rejection, ...] = field(default_factory=tuple)
    activated: tuple[str, ...] = field(default_factory=tuple)
    sync_failed: SyncFailure | None = None

    def to_dict(self) -> dict[str, Any]:
        said = {
            "outcome": self.outcome,
            "active": self.active,
            "active_digest": self.active_digest,
            "previous": self.previous,
            "activated": list(self.activated),
            "rejected": [r.to_dict() for r in self.rejected],
        }
        return said if self.sync_failed is None else {**said, "sync_failed": self.sync_failed.to_dict()}


def unverifiable(path: Path, exc: Exception) -> RegistryError:
    """A release directory whose verification failed unexpectedly: refused like any other."""
    _log.error("release verification failed unexpectedly", extra={"path": str(path), "error": type(exc).__name__})
    return RegistryError(
        FailureCode.REFRESH_REJECTED, f"{path.name} could not be verified ({type(exc).__name__}); it is not served"
    )


def rejection_of(path: Path, exc: Exception) -> Rejection:
    """The release directory ``path`` not activated for ``exc``: a refusal as it is, anything else
    :func:`unverifiable` (nothing in a releases directory may kill a server holding a release)."""
    return Rejection(str(path), exc if isinstance(exc, RegistryError) else unverifiable(path, exc))


@dataclass(frozen=True)
class ReleaseLoader:
    """What loading a release directory takes: the trust store, the checkpoint keys, the query module factory."""

    trust: TrustStore
    keyring: CheckpointKeyring
    module_factory: ModuleFactory = engine_module

    def load(self, path: Path, *, expected_scope: str | None = None, migration: bool = False) -> LoadedRelease:
        """:func:`load_release` with these."""
        return load_release(
            path, self.trust, self.keyring, self.module_factory, expected_scope=expected_scope, migration=migration
        )


def verify_candidate(
    candidate: Path,
    catalogue: str,
    loader: ReleaseLoader,
    floor: ActivationFloor,
    *,
    expected_scope: str | None = None,
    lower_floor: bool = False,
) -> LoadedRelease:
    """Verify one release found in a releases directory: signatures and files, its name, the floor.

    A directory name is only a claim; a manifest that names another release is
    refused rather than trusted by name.
    """
    loaded = loader.load(candidate, expected_scope=expected_scope)
    if loaded.catalogue != catalogue or loaded.version != release_dir_version(candidate, catalogue):
        raise RegistryError(
            FailureCode.REFRESH_REJECTED,
            f"the directory name does not match the signed manifest's "
            f"{loaded.release.release_id}; publish releases as <catalogue>-<version>",
            path=str(candidate),
        )
    floor.check(loaded.catalogue, loaded.version, loaded.digest, lower_floor=lower_floor)
    return loaded


def recorded_at_start(
    floor: ActivationFloor, loaded: LoadedRelease, unrecorded: list[RegistryError], *, lower_floor: bool = False
) -> bool:
    """Record ``loaded`` in the activation floor before it serves; False if the disk would not take it.

    That refusal (``io_error``: a full or read-only state directory) is appended to ``unrecorded`` so the
    start can go on to an older release the floor already records, which needs no write.
    """
    try:
        floor.record(loaded.catalogue, loaded.version, loaded.digest, lower_floor=lower_floor)
    except RegistryError as exc:
        if exc.code is not FailureCode.IO_ERROR:
            raise
        unrecorded.append(exc)
        return False
    return True


def load_release(
    path: Path,
    trust: TrustStore,
    keyring: CheckpointKeyring,
    module_factory: ModuleFactory = engine_module,
    *,
    expected_scope: str | None = None,
    migration: bool = False,
) -> LoadedRelease:
    """Verify one release directory and build its query module (the only way in).

    A migration target must carry the active release's scope name; that is
    refused as ``migration_scope_mismatch`` so the operator sees which rule failed.
    """
    release = verify_release(
        path, trust, expected_profile=WORKFLOW_ENGINE_PROFILE, expected_scope=None if migration else expected_scope
    )
    scope = release.manifest.release.scope_name
    if migration and expected_scope is not None and scope != expected_scope:
        raise RegistryError(
            FailureCode.MIGRATION_SCOPE_MISMATCH,
            f"the migration target {release.release_id} has scope {scope!r}, the active release "
            f"{expected_scope!r}; give a target release of the same scope",
            path=str(Path(path) / MANIFEST_NAME),
        )
    return LoadedRelease(release, keyring, module_factory)
