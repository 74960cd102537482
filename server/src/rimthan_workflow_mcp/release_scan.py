"""Reading a releases directory: which ``<catalogue>-<version>`` directories it claims to hold.

Names are claims, never trust: they only order candidates for verification
(the provider checks each verified manifest against its directory name). This
is the one scan both start and refresh use, and what a follower that pulls
releases into a local directory calls afterwards. A directory with no
release says how to fill it: ``rimthan-pack build`` or ``pull`` (and, in a
checkout, ``make demo``).
"""

from __future__ import annotations

from pathlib import Path

from rimthan_workflow_registry.errors import FailureCode, RegistryError
from rimthan_workflow_registry.release import RELEASE_DIR_NAME, semver_key


def fill_hint(releases_dir: Path) -> str:
    """How to put a release in ``releases_dir``: words for a bridge project or an operator's directory first
    (rimthan-pack), then this checkout's ``make demo``, which builds ./releases."""
    return (
        f"build a release into it with `rimthan-pack build SOURCE --key KEY --out {releases_dir}` or pull one with "
        f"`rimthan-pack pull oci://HOST/REPO:TAG --trust KEYS --out {releases_dir}` (docs/host-kit.md), "
        "or pass --release DIR (in a Rimthan checkout, `make demo` builds ./releases)"
    )


def release_dir_version(path: Path, catalogue: str | None = None) -> str | None:
    """The version a ``<catalogue>-<version>`` directory name claims (unverified; for ordering only)."""
    claim = release_dir_claim(path)
    if claim is None or (catalogue is not None and claim[0] != catalogue):
        return None
    return claim[1]


def release_dir_claim(path: Path) -> tuple[str, str] | None:
    """``(catalogue, version)`` a directory name claims, or None for anything else."""
    match = RELEASE_DIR_NAME.fullmatch(path.name)
    if match is None:
        return None
    try:
        semver_key(match.group("version"))
    except ValueError:
        return None
    return match.group("name"), match.group("version")


def scan_releases(releases_dir: Path) -> dict[str, list[Path]]:
    """Catalogue name -> its claimed release directories, newest version first.

    Raises ``release_not_found`` when the directory is missing or holds no
    release directory at all (a typo'd path must not serve nothing silently).
    """
    if not releases_dir.is_dir():
        raise RegistryError(
            FailureCode.RELEASE_NOT_FOUND,
            f"no releases directory here; {fill_hint(releases_dir)}",
            path=str(releases_dir),
        )
    found: dict[str, list[tuple[tuple[object, ...], Path]]] = {}
    for path in releases_dir.iterdir():
        claim = release_dir_claim(path) if path.is_dir() else None
        if claim is not None:
            found.setdefault(claim[0], []).append((semver_key(claim[1]), path))
    if not found:
        raise RegistryError(
            FailureCode.RELEASE_NOT_FOUND,
            f"holds no <catalogue>-<version> release directory; {fill_hint(releases_dir)}",
            path=str(releases_dir),
        )
    return {
        name: [p for _, p in sorted(entries, key=lambda kp: kp[0], reverse=True)]
        for name, entries in sorted(found.items())
    }


def newest_release_dir(releases_dir: Path) -> Path:
    """The highest-versioned release directory of the one catalogue in ``releases_dir``."""
    scanned = scan_releases(releases_dir)
    if len(scanned) > 1:
        raise RegistryError(
            FailureCode.RELEASE_NOT_FOUND,
            f"holds releases of several catalogues ({', '.join(scanned)}); pass --release DIR",
            path=str(releases_dir),
        )
    return next(iter(scanned.values()))[0]
