"""``rimthan-pack push``: publish a verified release as an OCI artifact.

The artifact layout (artifact type, media types, titles, annotations) and the
pull path live in the core (:mod:`rimthan_workflow_registry.release.oci`), so
the server's follower and ``rimthan-pack pull`` share them. Pushing never
changes a release: it verifies the release first, uploads each file as a blob
the registry addresses by its SHA-256 (blobs the registry already holds are
not sent again, so a co-signature push uploads one signature), and refuses to
move a tag that names another release unless told to; the old release stays
addressable by digest either way.

The registry's part of a push (the tag check, every upload, the manifest) has
one deadline, ``PUSH_DEADLINE`` (:mod:`rimthan_workflow_registry.release.oci_bounds`,
which also bounds every answer and keeps uploads on the registry's host). No
upload starts after one failed, and the manifest, which is what moves the tag,
is put only after every blob is in: a failed push never tags a partial release.
"""

from __future__ import annotations

import contextvars
import functools
import tempfile
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import oras.provider
from rimthan_workflow_registry.canonical import digest_bytes
from rimthan_workflow_registry.errors import FailureCode, RegistryError, quoted
from rimthan_workflow_registry.release import (
    CATALOGUE_DIR,
    CHECKSUMS_LAYER_TYPE,
    CHECKSUMS_NAME,
    DIGEST_ANNOTATION,
    EMPTY_CONFIG,
    EMPTY_CONFIG_TYPE,
    FILE_LAYER_TYPE,
    MANIFEST_LAYER_TYPE,
    MANIFEST_NAME,
    MANIFEST_PAST_NEXT,
    MAX_OCI_MANIFEST_BYTES,
    OCI_MANIFEST_TYPE,
    PUSH_DEADLINE,
    SIGNATURE_LAYER_TYPE,
    SIGNATURES_DIR,
    TITLE,
    OciReference,
    TrustStore,
    VerifiedRelease,
    artifact_manifest,
    descriptor,
    guarded,
    manifest_bytes,
    manifest_past,
    open_registry,
    registry_call,
    registry_deadline,
    release_layers,
    tagged_manifest,
    verify_release,
)

UPLOAD_WORKERS = 4


@dataclass(frozen=True)
class PushResult:
    """What a push published: the OCI manifest digest is the artifact's address."""

    reference: str
    tag: str
    oci_digest: str
    release: str
    manifest_digest: str
    uploaded: int
    reused: int
    replaced: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "reference": self.reference,
            "tag": self.tag,
            "oci_digest": self.oci_digest,
            "release": self.release,
            "manifest_digest": self.manifest_digest,
            "uploaded": self.uploaded,
            "reused": self.reused,
            "replaced": self.replaced,
        }


def _descriptor(media_type: str, data: bytes, title: str | None = None) -> dict[str, Any]:
    return descriptor(media_type, digest_bytes(data), len(data), title)


def release_files(release: VerifiedRelease) -> list[tuple[str, str]]:
    """``(title, media type)`` of every file a release holds, in a stable order."""
    root = release.root
    files = [(MANIFEST_NAME, MANIFEST_LAYER_TYPE), (CHECKSUMS_NAME, CHECKSUMS_LAYER_TYPE)]
    files += [(f"{SIGNATURES_DIR}/{p.name}", SIGNATURE_LAYER_TYPE) for p in sorted((root / SIGNATURES_DIR).iterdir())]
    files += [(f"{CATALOGUE_DIR}/{e.path}", FILE_LAYER_TYPE) for e in release.manifest.files]
    return files


def oci_manifest(release: VerifiedRelease, layers: list[dict[str, Any]]) -> dict[str, Any]:
    """The OCI image manifest of a release artifact (its layout: :mod:`~rimthan_workflow_registry.release.oci_artifact`,
    whose placeholder rendering build and check measure)."""
    return artifact_manifest(
        layers,
        version=release.manifest.release.version,
        release_id=release.release_id,
        manifest_digest=release.manifest_digest,
        config_digest=digest_bytes(EMPTY_CONFIG),
    )


def push_release(
    release_dir: Path, ref: OciReference, trust: TrustStore, *, plain_http: bool = False, replace_tag: bool = False
) -> PushResult:
    """Verify ``release_dir`` and publish it under ``ref`` (tag = its version unless ``ref`` names one)."""
    if ref.digest is not None:
        raise RegistryError(FailureCode.OCI_REFERENCE_INVALID, "push to a tag, not a digest", path=str(ref))
    release = verify_release(release_dir, trust, expected_profile=None)
    tag = ref.tag or release.manifest.release.version.replace("+", "_")
    target = ref.with_tag(tag)
    registry = open_registry(target, plain_http=plain_http)
    container = registry.get_container(target.target)
    blobs = [(_descriptor(EMPTY_CONFIG_TYPE, EMPTY_CONFIG), EMPTY_CONFIG)]
    for title, media_type in release_files(release):
        data = (release.root / title).read_bytes()
        blobs.append((_descriptor(media_type, data, title), data))
    manifest = oci_manifest(release, [layer for layer, _ in blobs[1:]])
    data = manifest_bytes(manifest)
    _check_pullable(manifest, len(data), target)  # before anything is sent
    with registry_deadline(PUSH_DEADLINE):  # the registry's part, however many blobs
        replaced = _check_tag(registry, target, release, replace_tag)
        uploaded = upload_blobs(registry, target, container, blobs)
        digest = put_manifest(registry, target, container, data)
    return PushResult(
        reference=str(target),
        tag=tag,
        oci_digest=digest,
        release=release.release_id,
        manifest_digest=release.manifest_digest,
        uploaded=uploaded,
        reused=len(blobs) - uploaded,
        replaced=replaced,
    )


def _check_pullable(manifest: dict[str, Any], size: int, target: OciReference) -> None:
    """Refuse a release no pull would take, by the pull path's own rules (:func:`release_layers`: at most
    ``MAX_LAYERS`` files, ``MAX_LAYER_BYTES`` each, ``MAX_TOTAL_BYTES`` in all) and its manifest bound
    (``size``: the manifest's bytes as :func:`put_manifest` puts them).

    A release past them builds and verifies, and a registry takes it; every
    pull, ``rimthan-pack pull`` and each follower of the fleet, would then
    refuse it (``oci_artifact_invalid``). Said here, nothing has been sent.
    """
    try:
        release_layers(manifest, str(target))
    except RegistryError as exc:
        raise RegistryError(
            exc.code,
            f"not pushed: no pull would take this release ({exc.message})",
            path=str(target),
            next_step="serve it from a directory (rimthan-mcp serve --releases-dir), or split the catalogue so "
            "that each release is within the limits docs/fleet.md lists",
        ) from None
    if size > MAX_OCI_MANIFEST_BYTES:
        raise RegistryError(
            FailureCode.OCI_ARTIFACT_INVALID,
            f"not pushed: {manifest_past(size)}",
            path=str(target),
            next_step=MANIFEST_PAST_NEXT,
        )


def _check_tag(
    registry: oras.provider.Registry, target: OciReference, release: VerifiedRelease, replace: bool
) -> str | None:
    """The release digest the tag named before, refusing to move it to another release unless ``replace``."""
    found = tagged_manifest(registry, target)
    if found is None:
        return None
    annotations = found[1].get("annotations")
    before = annotations.get(DIGEST_ANNOTATION) if isinstance(annotations, dict) else None
    if before == release.manifest_digest:
        return None
    if not replace:
        raise RegistryError(
            FailureCode.OCI_TAG_EXISTS,
            f"the tag names another release ({quoted(before)}, OCI {found[0]}); a published release is never replaced",
            path=str(target),
        )
    return str(before)


def upload_blobs(
    registry: oras.provider.Registry, ref: OciReference, container: Any, blobs: list[tuple[dict[str, Any], bytes]]
) -> int:
    """Upload every blob on ``UPLOAD_WORKERS`` threads; how many were sent. The first failure is raised.

    No upload starts after one failed (the push is refused either way, and
    the manifest is put only after every blob is in). Each upload runs in a
    copy of the caller's context, so the push deadline bounds it there too.
    """
    with ThreadPoolExecutor(max_workers=UPLOAD_WORKERS) as pool:
        futures = [pool.submit(_in_context(upload_blob), registry, ref, container, *blob) for blob in blobs]
        done, pending = wait(futures, return_when=FIRST_EXCEPTION)
        for future in pending:
            future.cancel()  # those already running end by the deadline
    failure = next((f.exception() for f in futures if f in done and f.exception() is not None), None)
    if failure is not None:
        raise failure
    return sum(future.result() for future in futures)


def _in_context(call: Callable[..., int]) -> Callable[..., int]:
    """``call``, run in a copy of this thread's context (its deadline) on whichever thread runs it."""
    context = contextvars.copy_context()  # one copy per call: a context is entered by one thread at a time
    return functools.partial(context.run, call)


def upload_blob(
    registry: oras.provider.Registry, ref: OciReference, container: Any, layer: dict[str, Any], data: bytes
) -> int:
    """Upload one blob unless the registry already holds it; 1 if sent, 0 if reused."""
    with guarded(ref, f"uploading {layer.get('annotations', {}).get(TITLE, 'the config')}"):
        if registry.blob_exists(layer, container):
            return 0
        with tempfile.NamedTemporaryFile() as tmp:
            tmp.write(data)
            tmp.flush()
            response = registry.put_upload(tmp.name, container, layer)
        registry_call(ref, "uploading a blob", response, ok=(200, 201, 202))
    return 1


def put_manifest(registry: oras.provider.Registry, ref: OciReference, container: Any, data: bytes) -> str:
    """PUT a manifest's bytes (:func:`manifest_bytes`) and check the registry addresses it by our digest."""
    digest = digest_bytes(data)
    with guarded(ref, "uploading the manifest"):
        response = registry.do_request(
            f"{registry.prefix}://{container.manifest_url()}",
            "PUT",
            data=data,
            headers={"Content-Type": OCI_MANIFEST_TYPE},
        )
        registry_call(ref, "uploading the manifest", response, ok=(200, 201))
    served = response.headers.get("Docker-Content-Digest")
    if served not in (None, digest):
        raise RegistryError(
            FailureCode.OCI_BLOB_MISMATCH,
            f"the registry stored the manifest as {quoted(served)}, not {digest}",
            path=str(ref),
        )
    return digest
