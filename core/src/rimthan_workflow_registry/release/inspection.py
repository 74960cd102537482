"""What ``rimthan-pack inspect`` shows of a release, and a co-signer's check: every step of the one verification path.

Apart from :mod:`~rimthan_workflow_registry.release.verify` so that the paths that only verify (a build's self-check,
``rimthan-pack verify``, the server's load) never create its result type: a frozen dataclass costs every process
that defines it about 3.7 M instructions (its generated methods compiled), 0.7% of a 1 MiB build.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rimthan_workflow_registry.release.format import SIGNATURES_DIR, Manifest, key_id_from_signature_name
from rimthan_workflow_registry.release.loader import LoadedCatalogue
from rimthan_workflow_registry.release.tree_walk import walk_release
from rimthan_workflow_registry.release.trust import TrustStore
from rimthan_workflow_registry.release.verify import examine_release


@dataclass(frozen=True)
class ReleaseInspection:
    """What ``rimthan-pack inspect`` shows. ``verified_signers`` is ``None`` without a trust store."""

    root: Path
    manifest: Manifest
    manifest_digest: str
    loaded: LoadedCatalogue
    signature_key_ids: tuple[str, ...]
    verified_signers: tuple[str, ...] | None


def inspect_release(
    path: Path | str, trust: TrustStore | None = None, *, require_threshold: bool = True
) -> ReleaseInspection:
    """Every verification step; signatures too when ``trust`` is given.

    Without a trust store the signature files are listed but not checked, so
    the result is for display only and is deliberately not a ``VerifiedRelease``.
    ``require_threshold=False`` (a co-signer's check) still fails on any trusted
    signature that does not verify, but not on too few: that is what co-signing collects.
    """
    root = Path(path)
    release = examine_release(root, trust, None, None, require_threshold=require_threshold)
    tree = walk_release(root)
    present = tuple(k for k in (key_id_from_signature_name(Path(p).name) for p in tree.under(SIGNATURES_DIR)) if k)
    return ReleaseInspection(
        root=root,
        manifest=release.manifest,
        manifest_digest=release.manifest_digest,
        loaded=LoadedCatalogue(catalogue=release.catalogue, schemas=release.schemas),
        signature_key_ids=present,
        verified_signers=release.signer_key_ids if trust is not None else None,
    )
