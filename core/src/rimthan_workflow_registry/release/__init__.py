"""The release side: what a signed release is, and the one path that verifies it.

Modules, in the order a release is read:

``format``
    The on-disk layout (``manifest.json``, ``SHA256SUMS``, ``signatures/``,
    ``catalogue/``), the manifest record and its strict parser.
``trust``
    The trust store: trusted Ed25519 public keys, key ids and the k-of-n threshold.
``verify``
    ``verify_release`` - the one verification path, shared by the packager's
    self-check, ``rimthan-pack verify`` and the server's load and refresh.
``verified``
    ``VerifiedRelease``: a release that passed ``verify_release``; every read
    of a file is digest-checked again.
``catalogue`` / ``catalogue_rules`` / ``loader``
    The catalogue model (workflows, steps, assets, host adapters), the
    authoring rules build and load share, and ``ReleaseLoader`` that applies
    them (``ReleaseLoader._validate_workflow_catalogue``).

``__all__`` below is the public surface; anything not listed is internal.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rimthan_workflow_registry.release.catalogue import (
        AssetDefinition,
        Catalogue,
        HostAdapter,
        Question,
        StepDefinition,
        WorkflowDefinition,
        is_semver,
        semver_key,
    )
    from rimthan_workflow_registry.release.format import (
        CATALOGUE_DIR,
        CHECKSUMS_NAME,
        MANIFEST_NAME,
        OPEN_NOFOLLOW,
        RELEASE_DIR_NAME,
        SIGNATURES_DIR,
        FileEntry,
        Manifest,
        manifest_for,
        media_type_for,
        path_problem,
        path_set_problem,
        render_checksums,
        signature_name,
    )
    from rimthan_workflow_registry.release.loader import LoadedCatalogue, ReleaseLoader
    from rimthan_workflow_registry.release.manifest_parse import parse_manifest
    from rimthan_workflow_registry.release.trust import TrustStore, key_id_for, load_trust, public_key_pem
    from rimthan_workflow_registry.release.verified import VerifiedRelease
    from rimthan_workflow_registry.release.verify import ReleaseInspection, inspect_release, verify_release

__all__ = [
    "CATALOGUE_DIR",
    "CHECKSUMS_NAME",
    "MANIFEST_NAME",
    "OPEN_NOFOLLOW",
    "RELEASE_DIR_NAME",
    "SIGNATURES_DIR",
    "AssetDefinition",
    "Catalogue",
    "FileEntry",
    "HostAdapter",
    "LoadedCatalogue",
    "Manifest",
    "Question",
    "ReleaseInspection",
    "ReleaseLoader",
    "StepDefinition",
    "TrustStore",
    "VerifiedRelease",
    "WorkflowDefinition",
    "inspect_release",
    "is_semver",
    "key_id_for",
    "load_trust",
    "manifest_for",
    "media_type_for",
    "parse_manifest",
    "path_problem",
    "path_set_problem",
    "public_key_pem",
    "render_checksums",
    "semver_key",
    "signature_name",
    "verify_release",
]

# Each public name is imported from its module on first use, so importing one light module of this
# package (trust, say) does not import the verifier and jsonschema (CLI start-up).
_HOME = {
    "AssetDefinition": "rimthan_workflow_registry.release.catalogue",
    "CATALOGUE_DIR": "rimthan_workflow_registry.release.format",
    "CHECKSUMS_NAME": "rimthan_workflow_registry.release.format",
    "Catalogue": "rimthan_workflow_registry.release.catalogue",
    "FileEntry": "rimthan_workflow_registry.release.format",
    "HostAdapter": "rimthan_workflow_registry.release.catalogue",
    "LoadedCatalogue": "rimthan_workflow_registry.release.loader",
    "MANIFEST_NAME": "rimthan_workflow_registry.release.format",
    "Manifest": "rimthan_workflow_registry.release.format",
    "OPEN_NOFOLLOW": "rimthan_workflow_registry.release.format",
    "Question": "rimthan_workflow_registry.release.catalogue",
    "RELEASE_DIR_NAME": "rimthan_workflow_registry.release.format",
    "ReleaseInspection": "rimthan_workflow_registry.release.verify",
    "ReleaseLoader": "rimthan_workflow_registry.release.loader",
    "SIGNATURES_DIR": "rimthan_workflow_registry.release.format",
    "StepDefinition": "rimthan_workflow_registry.release.catalogue",
    "TrustStore": "rimthan_workflow_registry.release.trust",
    "VerifiedRelease": "rimthan_workflow_registry.release.verified",
    "WorkflowDefinition": "rimthan_workflow_registry.release.catalogue",
    "inspect_release": "rimthan_workflow_registry.release.verify",
    "is_semver": "rimthan_workflow_registry.release.catalogue",
    "key_id_for": "rimthan_workflow_registry.release.trust",
    "load_trust": "rimthan_workflow_registry.release.trust",
    "manifest_for": "rimthan_workflow_registry.release.format",
    "media_type_for": "rimthan_workflow_registry.release.format",
    "parse_manifest": "rimthan_workflow_registry.release.manifest_parse",
    "path_problem": "rimthan_workflow_registry.release.format",
    "path_set_problem": "rimthan_workflow_registry.release.format",
    "public_key_pem": "rimthan_workflow_registry.release.trust",
    "render_checksums": "rimthan_workflow_registry.release.format",
    "semver_key": "rimthan_workflow_registry.release.catalogue",
    "signature_name": "rimthan_workflow_registry.release.format",
    "verify_release": "rimthan_workflow_registry.release.verify",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(home), name)
    globals()[name] = value
    return value
