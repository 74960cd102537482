"""The releases a :class:`~rimthan_workflow_mcp.provider.ReleaseProvider` starts with.

Two ways to start. :func:`start_named` serves the one release the operator
named (``--release``, optionally with ``--migration-target``): it verifies,
or the start is refused. :func:`start_directory` serves every catalogue found
in a releases directory: per catalogue the newest release that verifies and
is not below the activation floor is active; a corrupt or refused newer one
is skipped and reported, so one bad publish is never an outage.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rimthan_workflow_registry.errors import FailureCode, RegistryError

from .floor import ActivationFloor
from .loading import LoadedRelease, Rejection, ReleaseLoader, recorded_at_start, rejection_of, verify_candidate
from .logs import get_logger
from .release_scan import scan_releases

_log = get_logger("provider")


@dataclass(frozen=True)
class NamedStart:
    """The named release, verified and not below the floor, and the migration target verified beside it."""

    active: LoadedRelease
    migration_target: LoadedRelease | None


@dataclass(frozen=True)
class DirectoryStart:
    """Each catalogue's active release (the first: the primary one), and the newer releases not activated."""

    actives: tuple[LoadedRelease, ...]
    rejected: tuple[Rejection, ...]


def start_named(
    release_dir: Path,
    migration_target_dir: Path | None,
    loader: ReleaseLoader,
    floor: ActivationFloor,
    *,
    lower_floor: bool,
    record_floor: bool,
) -> NamedStart:
    """Verify the named release (and migration target) and check the rollback floor (recorded when
    ``record_floor``), or raise."""
    active = loader.load(release_dir)
    floor.check(active.catalogue, active.version, active.digest, lower_floor=lower_floor)
    target = None
    if migration_target_dir is not None:
        target = loader.load(migration_target_dir, expected_scope=active.scope_name, migration=True)
    if record_floor:
        floor.record(active.catalogue, active.version, active.digest, lower_floor=lower_floor)
    return NamedStart(active, target)


def start_directory(
    releases_dir: Path, loader: ReleaseLoader, floor: ActivationFloor, *, lower_floor: bool, record_floor: bool
) -> DirectoryStart:
    """Each catalogue's newest release in ``releases_dir`` that verifies.

    A newer release that does not verify (or is below the activation floor,
    or is published under a name its manifest does not carry) is skipped and
    kept in ``rejected``. Raises only when no release of any catalogue
    verifies, with every rejection in the message.
    """
    scanned = scan_releases(releases_dir)
    actives: list[LoadedRelease] = []
    rejected: list[Rejection] = []
    unrecorded: list[RegistryError] = []  # releases the floor could not record (a full or read-only disk)
    for catalogue, candidates in scanned.items():
        for candidate in candidates:
            try:
                loaded = verify_candidate(candidate, catalogue, loader, floor, lower_floor=lower_floor)
            except Exception as exc:  # a refusal, or anything else: never fatal to a server holding a release
                rejected.append(rejection_of(candidate, exc))
                continue
            if record_floor and not recorded_at_start(floor, loaded, unrecorded, lower_floor=lower_floor):
                rejected.append(Rejection(str(candidate), unrecorded[-1]))
                continue  # an older release the floor already records may serve, as a refresh keeps one
            actives.append(loaded)
            break
    for rejection in rejected:
        _log.warning("release not activated", extra={"path": rejection.path, "error": rejection.error})
    if not actives and unrecorded:
        raise unrecorded[0]  # nothing the floor already records to serve: the state directory is what to fix
    if not actives:
        summary = "; ".join(f"{Path(r.path).name}: {said}" for r in rejected for said in r.summaries())
        first = FailureCode(rejected[0].code) if rejected else FailureCode.RELEASE_NOT_FOUND
        raise RegistryError(
            first,
            f"no release of {', '.join(scanned)} verifies ({summary})",
            path=str(releases_dir),
            details={"rejected": [r.to_dict() for r in rejected]},
        )
    return DirectoryStart(tuple(actives), tuple(rejected))
