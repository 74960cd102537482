"""Reading a releases directory: which ``<catalogue>-<version>`` directories it claims to hold.

Names are claims, never trust: they only order candidates for verification
(the provider checks each verified manifest against its directory name). This
is the one scan both start and refresh use, and what a follower that pulls
releases into a local directory calls afterwards. A directory with no
release says how to fill it: ``make demo`` only where that is what fills it
(this checkout's own ``./releases``), else ``rimthan-pack build`` or ``pull``.
"""

from __future__ import annotations

import os
from pathlib import Path

from rimthan_workflow_registry.errors import FailureCode, RegistryError
from rimthan_workflow_registry.release import RELEASE_DIR_NAME, semver_key

_MAKEFILE_BYTES = 64 * 1024  # a checkout's Makefile is a few KiB: what is read of one to tell it
_CHECKOUT_DEMO = "rimthan_host.demo"  # what this checkout's `make demo` runs (no other Makefile's demo target)


def fill_hint(releases_dir: Path) -> str:
    """How to put a release in ``releases_dir``: ``make demo`` in this checkout (it builds ./releases),
    else rimthan-pack (a bridge project, an operator's directory: no Makefile of ours there)."""
    if _checkout_releases(releases_dir):
        return "run `make demo` or pass --release DIR"
    return (
        f"build a release into it with `rimthan-pack build SOURCE --key KEY --out {releases_dir}` or pull one with "
        f"`rimthan-pack pull oci://HOST/REPO:TAG --trust KEYS --out {releases_dir}` (docs/host-kit.md), "
        "or pass --release DIR"
    )


def _checkout_releases(releases_dir: Path) -> bool:
    """Whether ``releases_dir`` is the ./releases that this checkout's ``make demo`` builds, run from here."""
    makefile = Path("Makefile")
    if os.path.abspath(releases_dir) != os.path.abspath("releases") or not makefile.is_file():
        return False  # (a FIFO named Makefile is not opened: never waited on)
    try:
        with makefile.open("rb") as handle:
            return _CHECKOUT_DEMO.encode() in handle.read(_MAKEFILE_BYTES)
    except OSError:
        return False


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
