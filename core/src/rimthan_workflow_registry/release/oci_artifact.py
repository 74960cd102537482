"""The OCI manifest a release is pushed as: its media types, titles and annotations, rendered as ``push`` puts it.

Plain Python, no registry client: ``rimthan-pack push`` renders the manifest it
puts here (:func:`artifact_manifest`, :func:`manifest_bytes`), and
``rimthan-pack build`` and ``check`` render the same manifest with a
placeholder for each digest (:func:`manifest_size`) to say, before the
release is signed, that it would be past :data:`MAX_OCI_MANIFEST_BYTES`
(registries refuse a larger manifest, and so does every pull), rather than at
the first push.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .format import CATALOGUE_DIR, CHECKSUMS_NAME, MANIFEST_NAME, SIGNATURE_SIZE, SIGNATURE_SUFFIX, SIGNATURES_DIR

if TYPE_CHECKING:
    from .oci_limits import OwnFiles

MAX_OCI_MANIFEST_BYTES = 4 * 1024 * 1024  # the distribution spec's bound: registries refuse a larger manifest

ARTIFACT_TYPE = "application/vnd.rimthan.release.v1"
OCI_MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
EMPTY_CONFIG_TYPE = "application/vnd.oci.empty.v1+json"
MANIFEST_LAYER_TYPE = "application/vnd.rimthan.release.manifest.v1+json"
CHECKSUMS_LAYER_TYPE = "application/vnd.rimthan.release.checksums.v1"
SIGNATURE_LAYER_TYPE = "application/vnd.rimthan.release.signature.v1"
FILE_LAYER_TYPE = "application/vnd.rimthan.release.file.v1"
LAYER_TYPES = frozenset({MANIFEST_LAYER_TYPE, CHECKSUMS_LAYER_TYPE, SIGNATURE_LAYER_TYPE, FILE_LAYER_TYPE})
TITLE = "org.opencontainers.image.title"
VERSION_ANNOTATION = "org.opencontainers.image.version"
DIGEST_ANNOTATION = "dev.rimthan.release.manifest-digest"
RELEASE_ANNOTATION = "dev.rimthan.release.id"
EMPTY_CONFIG = b"{}"

_NO_DIGEST = "sha256:" + "0" * 64  # every digest is as long: a manifest of these is as long as the pushed one
_NO_KEY_ID = "0" * 64  # a key id is a SHA-256 in hex
# What a layer adds besides its title, at most: its descriptor with a size of 20 digits and a media type (and its
# key) of 128 characters, spaced as json.dumps spaces by default (wider than what is put), and a comma.
_LAYER_OVERHEAD = 129 + len(json.dumps({"annotations": {TITLE: ""}, "digest": _NO_DIGEST, "size": 10**20}))
_ESCAPED = 12  # the most JSON characters one character of a title takes (\ud83d\ude00: outside the BMP)
_MANIFEST_OVERHEAD = 4096  # the rest: schema version, media and artifact types, config, annotations


def descriptor(media_type: str, digest: str, size: int, title: str | None = None) -> dict[str, Any]:
    """One OCI descriptor: the config's, or a layer's (with its path in the release as its title)."""
    out: dict[str, Any] = {"mediaType": media_type, "digest": digest, "size": size}
    if title is not None:
        out["annotations"] = {TITLE: title}
    return out


def artifact_manifest(
    layers: list[dict[str, Any]], *, version: str, release_id: str, manifest_digest: str, config_digest: str
) -> dict[str, Any]:
    """The OCI image manifest of a release artifact: its ``layers`` and the release it carries."""
    return {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST_TYPE,
        "artifactType": ARTIFACT_TYPE,
        "config": descriptor(EMPTY_CONFIG_TYPE, config_digest, len(EMPTY_CONFIG)),
        "layers": layers,
        "annotations": {
            VERSION_ANNOTATION: version,
            RELEASE_ANNOTATION: release_id,
            DIGEST_ANNOTATION: manifest_digest,
        },
    }


def manifest_bytes(manifest: Mapping[str, Any]) -> bytes:
    """The OCI manifest as it is put: compact JSON, sorted keys."""
    return json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode("utf-8")


def manifest_size(sizes: Mapping[str, int], own: OwnFiles, *, name: str, version: str) -> int | None:
    """The bytes of the OCI manifest ``push`` would put for a release of these catalogue files (path: bytes) and
    its ``own`` files, or ``None`` when it is surely within :data:`MAX_OCI_MANIFEST_BYTES` (no manifest rendered).

    Rendered with a placeholder of the same length for every digest and key id, so exact, without hashing a file.
    """
    signature = f"{SIGNATURES_DIR}/{_NO_KEY_ID}{SIGNATURE_SUFFIX}"
    titles = sum(len(path) + len(CATALOGUE_DIR) + 1 for path in sizes)
    titles += len(MANIFEST_NAME) + len(CHECKSUMS_NAME) + own.signatures * len(signature)
    layers = len(sizes) + 2 + own.signatures
    if _MANIFEST_OVERHEAD + layers * _LAYER_OVERHEAD + _ESCAPED * titles <= MAX_OCI_MANIFEST_BYTES:
        return None
    files = [
        descriptor(MANIFEST_LAYER_TYPE, _NO_DIGEST, own.manifest, MANIFEST_NAME),
        descriptor(CHECKSUMS_LAYER_TYPE, _NO_DIGEST, own.checksums, CHECKSUMS_NAME),
        *[descriptor(SIGNATURE_LAYER_TYPE, _NO_DIGEST, SIGNATURE_SIZE, signature)] * own.signatures,
        *[descriptor(FILE_LAYER_TYPE, _NO_DIGEST, size, f"{CATALOGUE_DIR}/{path}") for path, size in sizes.items()],
    ]
    manifest = artifact_manifest(
        files, version=version, release_id=f"{name}@{version}", manifest_digest=_NO_DIGEST, config_digest=_NO_DIGEST
    )
    return len(manifest_bytes(manifest))
