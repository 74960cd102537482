"""A workflow changed since an older release of its catalogue, but still at the version that release has.

A run is pinned to its workflow's ``id@version``, and migrates only to a
newer version of it (``migration_not_newer`` otherwise): a workflow whose
files changed while its version stayed leaves the runs of the older release
no way onto the new one, and two releases then mean different things by one
key. ``check --releases-dir`` and ``build`` compare each workflow's files
(its TOML, schemas, instructions, assets, validator instructions) with the
same paths in the older releases of the catalogue in that directory, by the
digests their signed manifests list, and warn of each such workflow
(:class:`~rimthan_packager.kept_version.KeptVersion` carries each warning).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from rimthan_workflow_registry.errors import FailureCode, RegistryError
from rimthan_workflow_registry.release import (
    MANIFEST_NAME,
    Catalogue,
    Manifest,
    is_semver,
    semver_key,
)
from rimthan_workflow_registry.strict_json import parse_strict_json

if TYPE_CHECKING:
    from .kept_version import KeptVersion


def kept_versions(releases: Path, catalogue: Catalogue, digest_of: Callable[[str], str]) -> list[KeptVersion]:
    """Each workflow of ``catalogue`` changed since an older release in ``releases`` that has the same version of
    it; ``digest_of(path)`` is the SHA-256 (hex) of a file of the new release, asked once per file however many
    older releases hold the workflow (``check`` hashes the source's bytes for it)."""
    digest_of = cache(digest_of)
    found: dict[str, KeptVersion] = {}
    for release, manifest in _older(releases, catalogue.name, catalogue.version):
        from rimthan_workflow_registry.release import changed_workflow_files, file_digests  # only with an older one

        from .kept_version import KeptVersion  # the same: a build beside no older release never defines it

        keys = {f"{w.id}@{w.version}" for w in manifest.workflows}
        digests = file_digests(manifest)
        for workflow in catalogue.workflows:
            if workflow.key in keys and workflow.key not in found:
                changed = changed_workflow_files(workflow, digests, digest_of)
                if changed:
                    found[workflow.key] = KeptVersion(workflow.key, workflow.source, release, changed)
    return list(found.values())


def _older(releases: Path, name: str, version: str) -> Iterator[tuple[Path, Manifest]]:
    """The releases of ``name`` below ``version`` in ``releases``, newest first, with their manifests (one that
    cannot be read is passed over: verify and serve say what is wrong with it)."""
    prefix = f"{name}-"
    try:
        versions = [e.name.removeprefix(prefix) for e in releases.iterdir() if e.name.startswith(prefix)]
    except OSError:
        return
    below = semver_key(version)
    for older in sorted((v for v in versions if is_semver(v) and semver_key(v) < below), key=semver_key, reverse=True):
        manifest = _manifest(releases / f"{prefix}{older}")
        if manifest is not None:
            yield releases / f"{prefix}{older}", manifest


def _manifest(release: Path) -> Manifest | None:
    try:
        data = (release / MANIFEST_NAME).read_bytes()
        return Manifest.from_json(parse_strict_json(data, where=str(release), code=FailureCode.MANIFEST_INVALID))
    except (OSError, RegistryError, KeyError, TypeError, ValueError, AttributeError):
        return None
