"""The releases ``rimthan-mcp audit`` reads to tell how a run ended.

The audit verifies each release it is given exactly as ``serve`` would
(signatures against the trust store, manifest, every file), and keys the ones
that verify by manifest digest, the identity checkpoints pin. A release that
does not verify is never read; it is named with its failure code so an ending
left untold says why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rimthan_workflow_registry.errors import RegistryError
from rimthan_workflow_registry.release import TrustStore, VerifiedRelease, verify_release

from .release_scan import scan_releases


@dataclass(frozen=True)
class AuditReleases:
    """Verified releases by manifest digest, and the directories refused (``path: code``)."""

    verified: dict[str, VerifiedRelease]
    refused: tuple[str, ...]

    def missing_note(self) -> str:
        """Why a pinned release may be absent: what was refused, or that none was given."""
        if self.refused:
            return "refused here: " + ", ".join(self.refused)
        if not self.verified:
            return "pass --releases-dir DIR or --release DIR (verified with --trust) to read it"
        return "it is not among the releases given"


def read_audit_releases(
    release_dirs: Sequence[Path], releases_dir: Path | None, trust: TrustStore | None
) -> AuditReleases:
    """Verify ``release_dirs`` and every release directory in ``releases_dir``; nothing without a trust store."""
    if trust is None:
        return AuditReleases({}, ())
    candidates = list(release_dirs)
    if releases_dir is not None:
        candidates += [p for paths in scan_releases(releases_dir).values() for p in paths]
    verified: dict[str, VerifiedRelease] = {}
    refused: list[str] = []
    for path in candidates:
        try:
            release = verify_release(path, trust)
        except RegistryError as exc:
            refused.append(f"{path}: {exc.code.value}")
            continue
        verified[release.manifest_digest] = release
    return AuditReleases(verified, tuple(refused))
