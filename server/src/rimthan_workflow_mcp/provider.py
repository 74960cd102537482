"""``ReleaseProvider``: the verified releases a server holds, and refresh.

The provider is the only place releases enter the server, and it takes them
only from :func:`verify_release` (the one verification path). It keeps every
release it has ever activated, keyed by manifest digest, each with its own
query module, so a checkpoint pinned to an older release keeps being served
after a refresh. What a release serves is fixed when it is verified: a
directory that changes on disk afterwards never changes the bytes served
(``VerifiedRelease.read_file`` re-checks them against the signed manifest).

Refresh rescans the releases directory for newer versions of the active
catalogue, verifies the highest one first, and activates the first that
verifies; a corrupt or unverifiable candidate is skipped, logged, and reported
in the :class:`RefreshResult`, and the last verified release stays active.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from rimthan_workflow_registry.errors import FailureCode, RegistryError
from rimthan_workflow_registry.protocol_names import WORKFLOW_ENGINE_PROFILE
from rimthan_workflow_registry.release import RELEASE_DIR_NAME, TrustStore, VerifiedRelease, semver_key, verify_release
from rimthan_workflow_registry.release.schema_checks import SCHEMA_CHECKS, SCHEMA_CHECKS_FILE
from rimthan_workflow_registry.run import CheckpointKeyring

from .floor import FLOOR_FILE, ActivationFloor
from .logs import get_logger
from .workflow_engine import WorkflowEngineQueryModule

_log = get_logger("provider")

ModuleFactory = Callable[[VerifiedRelease, CheckpointKeyring], WorkflowEngineQueryModule]


@dataclass(frozen=True)
class LoadedRelease:
    """A verified release and the query module that serves it."""

    release: VerifiedRelease
    module: WorkflowEngineQueryModule

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


@dataclass(frozen=True)
class Rejection:
    """A candidate release a refresh refused, and why."""

    path: str
    error: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "error": self.error}


@dataclass(frozen=True)
class RefreshResult:
    """What one refresh did: ``activated`` a newer release, ``unchanged``, or ``rejected`` every candidate."""

    outcome: Literal["activated", "unchanged", "rejected"]
    active: str
    active_digest: str
    previous: str | None = None
    rejected: tuple[Rejection, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "active": self.active,
            "active_digest": self.active_digest,
            "previous": self.previous,
            "rejected": [r.to_dict() for r in self.rejected],
        }


def release_dir_version(path: Path, catalogue: str | None = None) -> str | None:
    """The version a ``<catalogue>-<version>`` directory name claims (unverified; for ordering only)."""
    match = RELEASE_DIR_NAME.match(path.name)
    if match is None or (catalogue is not None and match.group("name") != catalogue):
        return None
    try:
        semver_key(match.group("version"))
    except ValueError:
        return None
    return match.group("version")


def newest_release_dir(releases_dir: Path) -> Path:
    """The highest-versioned release directory of the one catalogue in ``releases_dir``."""
    if not releases_dir.is_dir():
        raise RegistryError(
            FailureCode.RELEASE_NOT_FOUND,
            "no releases directory here; run `make demo` or pass --release DIR",
            path=str(releases_dir),
        )
    found = [
        (p, m)
        for p in sorted(releases_dir.iterdir())
        if p.is_dir() and (m := RELEASE_DIR_NAME.match(p.name)) is not None and release_dir_version(p) is not None
    ]
    names = sorted({m.group("name") for _, m in found})
    if not found:
        raise RegistryError(
            FailureCode.RELEASE_NOT_FOUND,
            "holds no <catalogue>-<version> release directory; run `make demo` or pass --release DIR",
            path=str(releases_dir),
        )
    if len(names) > 1:
        raise RegistryError(
            FailureCode.RELEASE_NOT_FOUND,
            f"holds releases of several catalogues ({', '.join(names)}); pass --release DIR",
            path=str(releases_dir),
        )
    return max(found, key=lambda pm: semver_key(pm[1].group("version")))[0]


class ReleaseProvider:
    """Every verified release the server holds, the active one, and the migration target."""

    def __init__(
        self,
        *,
        trust: TrustStore,
        keyring: CheckpointKeyring,
        active: LoadedRelease,
        migration_target: LoadedRelease | None = None,
        releases_dir: Path | None = None,
        floor: ActivationFloor | None = None,
        module_factory: ModuleFactory = WorkflowEngineQueryModule,
    ) -> None:
        self.trust = trust
        self.keyring = keyring
        self.releases_dir = releases_dir
        self.floor = floor or ActivationFloor(None)
        self._module_factory = module_factory
        self._lock = threading.Lock()
        self._active = active
        self._migration_target = migration_target
        held = {active.digest: active}
        if migration_target is not None:
            held.setdefault(migration_target.digest, migration_target)
        self._held: Mapping[str, LoadedRelease] = MappingProxyType(held)
        self.last_refresh: RefreshResult | None = None
        # run before each refresh (outside the lock): brings new releases into releases_dir and
        # returns the publishes it refused, which the refresh reports (see follow.py)
        self.before_refresh: Callable[[], tuple[Rejection, ...]] | None = None

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
        module_factory: ModuleFactory = WorkflowEngineQueryModule,
    ) -> ReleaseProvider:
        """Verify the release (and migration target) and check the rollback floor, or raise.

        ``record_floor=False`` checks without writing (``rimthan-mcp check``).
        """
        floor = ActivationFloor(state_dir / FLOOR_FILE if state_dir is not None else None)
        if state_dir is not None and record_floor:  # serving: remember metaschema passes across restarts
            SCHEMA_CHECKS.persist_to(state_dir / SCHEMA_CHECKS_FILE)
        active = load_release(release_dir, trust, keyring, module_factory)
        floor.check(active.catalogue, active.version, active.digest, lower_floor=lower_floor)
        target = None
        if migration_target_dir is not None:
            target = load_release(
                migration_target_dir, trust, keyring, module_factory, expected_scope=active.scope_name, migration=True
            )
        if record_floor:
            floor.record(active.catalogue, active.version, active.digest, lower_floor=lower_floor)
        provider = cls(
            trust=trust,
            keyring=keyring,
            active=active,
            migration_target=target,
            releases_dir=releases_dir if releases_dir is not None else Path(release_dir).parent,
            floor=floor,
            module_factory=module_factory,
        )
        provider._hold_older_releases()
        return provider

    # -- what is held ---------------------------------------------------------------------

    @property
    def active(self) -> LoadedRelease:
        return self._active

    @property
    def migration_target(self) -> LoadedRelease | None:
        return self._migration_target

    @property
    def held(self) -> Mapping[str, LoadedRelease]:
        """Every release held, by manifest digest (a read-only snapshot)."""
        return self._held

    def get(self, manifest_digest: str) -> LoadedRelease | None:
        return self._held.get(manifest_digest)

    def describe(self) -> dict[str, Any]:
        return {
            "active": self._active.describe(),
            "migration_target": self._migration_target.describe() if self._migration_target else None,
            "held": sorted(self._held),
            "releases_dir": str(self.releases_dir) if self.releases_dir else None,
            "floor": str(self.floor.path) if self.floor.path else None,
        }

    # -- refresh ------------------------------------------------------------------------

    def refresh(self) -> RefreshResult:
        """Activate the newest release in ``releases_dir`` that verifies; never an unverified one.

        Blocking (it verifies releases); call it from a worker thread in async code.
        """
        refused = self.before_refresh() if self.before_refresh is not None else ()
        with self._lock:
            result = self._refresh_locked(refused)
            self.last_refresh = result
        level = "warning" if result.rejected else "info"
        getattr(_log, level)("refresh", extra={"refresh": result.to_dict()})
        return result

    def _refresh_locked(self, refused: tuple[Rejection, ...] = ()) -> RefreshResult:
        current = self._active
        rejected: list[Rejection] = list(refused)
        for candidate in self._candidates(current):
            try:
                loaded = load_release(
                    candidate, self.trust, self.keyring, self._module_factory, expected_scope=current.scope_name
                )
                if loaded.catalogue != current.catalogue or loaded.version != release_dir_version(
                    candidate, current.catalogue
                ):
                    raise RegistryError(
                        FailureCode.REFRESH_REJECTED,
                        f"the directory name does not match the signed manifest's "
                        f"{loaded.release.release_id}; publish releases as <catalogue>-<version>",
                        path=str(candidate),
                    )
                self.floor.check(loaded.catalogue, loaded.version, loaded.digest)
            except RegistryError as exc:
                rejected.append(Rejection(path=str(candidate), error=exc.to_dict()))
                continue
            except Exception as exc:  # nothing in the releases directory may kill a server holding a release
                rejected.append(Rejection(path=str(candidate), error=_unverifiable(candidate, exc).to_dict()))
                continue
            loaded = self._held.get(loaded.digest, loaded)
            self._held = MappingProxyType({**self._held, loaded.digest: loaded})
            self._active = loaded
            self.floor.record(loaded.catalogue, loaded.version, loaded.digest)
            return RefreshResult(
                "activated",
                loaded.release.release_id,
                loaded.digest,
                previous=current.release.release_id,
                rejected=tuple(rejected),
            )
        outcome: Literal["unchanged", "rejected"] = "rejected" if rejected else "unchanged"
        return RefreshResult(outcome, current.release.release_id, current.digest, rejected=tuple(rejected))

    def _hold_older_releases(self) -> None:
        """Also hold the older releases of the active catalogue that verify, never activating them.

        A replica that restarts after a refresh still serves the runs pinned to
        releases it had loaded before; one that does not verify is skipped
        (logged), so those runs get ``pinned_release_unavailable``, never bytes
        that did not verify.
        """
        current = self._active
        if self.releases_dir is None or not self.releases_dir.is_dir():
            return
        held = dict(self._held)
        for path in sorted(self.releases_dir.iterdir()):
            version = release_dir_version(path, current.catalogue)
            if version is None or semver_key(version) >= semver_key(current.version):
                continue
            try:
                loaded = load_release(
                    path, self.trust, self.keyring, self._module_factory, expected_scope=current.scope_name
                )
            except RegistryError as exc:
                _log.warning("older release not held", extra={"path": str(path), "error": exc.to_dict()})
                continue
            except Exception as exc:  # nothing in the releases directory may stop a server from starting
                error = _unverifiable(path, exc).to_dict()
                _log.warning("older release not held", extra={"path": str(path), "error": error})
                continue
            held.setdefault(loaded.digest, loaded)
        self._held = MappingProxyType(held)

    def _candidates(self, current: LoadedRelease) -> list[Path]:
        """Directories claiming a newer version of the active catalogue, newest first."""
        if self.releases_dir is None or not self.releases_dir.is_dir():
            return []
        newer: list[tuple[tuple[Any, ...], Path]] = []
        for path in self.releases_dir.iterdir():
            version = release_dir_version(path, current.catalogue)
            if version is not None and semver_key(version) > semver_key(current.version):
                newer.append((semver_key(version), path))
        return [p for _, p in sorted(newer, key=lambda kp: kp[0], reverse=True)]


def _unverifiable(path: Path, exc: Exception) -> RegistryError:
    """A release directory whose verification failed unexpectedly: refused like any other."""
    _log.error("release verification failed unexpectedly", extra={"path": str(path), "error": type(exc).__name__})
    return RegistryError(
        FailureCode.REFRESH_REJECTED, f"{path.name} could not be verified ({type(exc).__name__}); it is not served"
    )


def load_release(
    path: Path,
    trust: TrustStore,
    keyring: CheckpointKeyring,
    module_factory: ModuleFactory = WorkflowEngineQueryModule,
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
            path=str(Path(path) / "manifest.json"),
        )
    return LoadedRelease(release=release, module=module_factory(release, keyring))
