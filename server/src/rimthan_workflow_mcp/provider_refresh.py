"""What a refresh activates: per catalogue, the newest release in the releases directory that verifies.

A refresh rescans the directory per catalogue and activates the first release
newer than the catalogue's active one that verifies (and records it in the
activation floor before it serves); the last verified release stays active
otherwise, and every newer one refused is reported. A provider that follows
its directory also activates catalogues that appear in it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from rimthan_workflow_registry.release import semver_key

from .floor import ActivationFloor
from .loading import LoadedRelease, RefreshResult, Rejection, ReleaseLoader, rejection_of, verify_candidate
from .release_scan import release_dir_version


@dataclass(frozen=True)
class Activating:
    """What a refresh activates with: the provider's releases as they are now, and how it activates one."""

    actives: Callable[[], Mapping[str, LoadedRelease]]  # the active release per catalogue, read as each is scanned
    held: Callable[[], Mapping[str, LoadedRelease]]  # every release held, by manifest digest
    activate: Callable[[LoadedRelease], None]
    loader: ReleaseLoader
    floor: ActivationFloor


@dataclass(frozen=True)
class Activated:
    """The releases activated (each with the one it replaced) and the newer ones refused."""

    activated: tuple[tuple[LoadedRelease | None, LoadedRelease], ...]
    rejected: tuple[Rejection, ...]


def activate_newer(scanned: Mapping[str, list[Path]], catalogues: Iterable[str], with_: Activating) -> Activated:
    """Per catalogue (in name order), activate the first release in ``scanned`` newer than its active one that
    verifies; never an unverified one."""
    rejected: list[Rejection] = []  # found in releases_dir: not activated
    activated: list[tuple[LoadedRelease | None, LoadedRelease]] = []
    for catalogue in sorted(catalogues):
        current = with_.actives().get(catalogue)
        for candidate in scanned.get(catalogue, []):
            version = release_dir_version(candidate, catalogue)
            if current is not None and (version is None or semver_key(version) <= semver_key(current.version)):
                continue
            try:
                scope = current.scope_name if current else None
                loaded = verify_candidate(candidate, catalogue, with_.loader, with_.floor, expected_scope=scope)
                loaded = with_.held().get(loaded.digest, loaded)
                with_.floor.record(loaded.catalogue, loaded.version, loaded.digest)  # before it serves
            except Exception as exc:  # a refusal, or anything else: never fatal to a server holding a release
                rejected.append(rejection_of(candidate, exc))
                continue
            with_.activate(loaded)
            activated.append((current, loaded))
            break
    return Activated(tuple(activated), tuple(rejected))


def refresh_result(found: Activated, refused: tuple[Rejection, ...], active: LoadedRelease) -> RefreshResult:
    """The refresh's result: the first release activated (or the primary active one), and every rejection
    (``refused``: those found before the scan, first)."""
    rejected = (*refused, *found.rejected)
    if found.activated:
        previous, first = found.activated[0]
        return RefreshResult(
            "activated",
            first.release.release_id,
            first.digest,
            previous=previous.release.release_id if previous else None,
            rejected=rejected,
            activated=tuple(new.release.release_id for _, new in found.activated),
        )
    outcome: Literal["unchanged", "rejected"] = "rejected" if rejected else "unchanged"
    return RefreshResult(outcome, active.release.release_id, active.digest, rejected=rejected)
