"""Releases as OCI artifacts: the reference syntax, the artifact layout, and the one pull path.

A fleet gets its releases from an OCI registry (a content-addressed store every
operator already runs) instead of by copying directories. A release is one OCI
image manifest (artifact type :data:`ARTIFACT_TYPE`) with one layer per release
file (``manifest.json``, ``SHA256SUMS``, every signature and catalogue file),
each titled with its path in the release. The registry only carries bytes;
trust still comes from the signed Rimthan manifest.

:func:`pull_release` downloads into a hidden temporary directory beside the
destination, checks every blob against the digest and size the OCI manifest
advertised (streamed, bounded), runs :func:`verify_release` (the one
verification path), checks the signed version against a version tag, and only
then renames it to ``<catalogue>-<version>``; a failure raises :class:`RegistryError`, leaving nothing. A
local disk that fills or is read-only is ``io_error`` naming the releases directory, never the registry's fault.

All registry traffic goes through the ``oras`` client (credentials from the
Docker config file, or ``RIMTHAN_REGISTRY_USERNAME`` / ``_PASSWORD``, answered
to a registry's token or Basic challenge); TLS unless the caller asks for
plain HTTP, verified against ``REQUESTS_CA_BUNDLE`` when set (requests' own
setting), else the certifi bundle. :mod:`.oci_bounds` bounds every answer in
bytes and time and the tag list in pages, and keeps uploads and credentials
on the registry.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import oras.auth
import oras.provider
import oras.utils

from ..canonical import DIGEST_PATTERN, DIGEST_PREFIX, Sha256, digest_bytes
from ..errors import FailureCode, RegistryError, quoted
from ..remediation import local_io
from ..strict_json import parse_strict_json
from ..whole_writes import write_all
from .catalogue import semver_key
from .format import CATALOGUE_DIR, CHECKSUMS_NAME, MANIFEST_NAME, SIGNATURES_DIR
from .oci_artifact import (
    ARTIFACT_TYPE,
    DIGEST_ANNOTATION,
    LAYER_TYPES,
    MAX_OCI_MANIFEST_BYTES,
    OCI_MANIFEST_TYPE,
    TITLE,
)
from .oci_bounds import (
    PULL_DEADLINE,
    ResponseTooLarge,
    body_chunks,
    list_tags,
    registry_deadline,
)
from .oci_bounds import request_deadline as _request_deadline
from .oci_client import guarded, open_registry, registry_call
from .oci_client import refusal as _refuse
from .oci_install import Expected, install_release
from .oci_limits import MAX_LAYER_BYTES, MAX_LAYERS, MAX_TOTAL_BYTES
from .oci_stop import check_stop
from .paths import path_problem, path_set_problem
from .signature_check import NOT_TRUSTED
from .trust import TrustStore
from .verified import VerifiedRelease
from .verify import verify_release

SCHEME = "oci://"

# matched with fullmatch: "$" would also take a trailing newline
_DIGEST = re.compile(DIGEST_PATTERN)
_TAG = r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}"  # the distribution spec's tag: at most 128 characters
_REFERENCE = re.compile(
    r"(?P<host>[A-Za-z0-9.-]+(?::[0-9]{1,5})?)/(?P<repo>[a-z0-9]+(?:[._/-][a-z0-9]+)*)"
    r"(?::(?P<tag>" + _TAG + r"))?(?:@(?P<digest>" + DIGEST_PATTERN + "))?"
)
_ANY_TAG = re.compile(_TAG)
_VERSION_TAG = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+(?:[-_][0-9A-Za-z._-]*)?")


@dataclass(frozen=True)
class OciReference:
    """``oci://HOST[:PORT]/REPOSITORY[:TAG][@sha256:...]``, parsed."""

    host: str
    repository: str
    tag: str | None = None
    digest: str | None = None

    @property
    def target(self) -> str:
        """The ``host/repo[:tag|@digest]`` form the client speaks (a digest wins over a tag)."""
        base = f"{self.host}/{self.repository}"
        if self.digest:
            return f"{base}@{self.digest}"
        return f"{base}:{self.tag}" if self.tag else base

    def with_tag(self, tag: str) -> OciReference:
        return OciReference(self.host, self.repository, tag=tag)

    def __str__(self) -> str:
        return SCHEME + self.target


@dataclass(frozen=True)
class PulledRelease:
    """A release that came from a registry and verified, now at ``path``."""

    path: Path
    release: VerifiedRelease
    oci_digest: str
    already_present: bool
    replaced_damaged: str | None = None  # why the copy it replaced did not verify (``pull_release``)
    replaced_code: FailureCode | None = None  # that refusal's code

    @property
    def replaced_untrusted(self) -> bool:
        """The copy replaced was intact as far as its signatures go, but the trust store no longer vouches for it
        (a key removed, a threshold raised): not damage, the outcome of a trust change and a co-signed push."""
        return self.replaced_code in NOT_TRUSTED

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "release": self.release.release_id,
            "manifest_digest": self.release.manifest_digest,
            "oci_digest": self.oci_digest,
            "already_present": self.already_present,
            "replaced_damaged": self.replaced_damaged,
            "replaced_code": None if self.replaced_code is None else self.replaced_code.value,
            "replaced_untrusted": self.replaced_untrusted,
        }


def parse_reference(text: str) -> OciReference:
    """Parse an ``oci://`` reference or refuse it as ``oci_reference_invalid``."""
    body = text[len(SCHEME) :] if text.startswith(SCHEME) else None
    match = _REFERENCE.fullmatch(body or "")
    if match is None:
        raise _refuse(
            FailureCode.OCI_REFERENCE_INVALID,
            "expected oci://HOST[:PORT]/REPOSITORY[:TAG] or oci://HOST[:PORT]/REPOSITORY@sha256:<64 hex>",
            text,
        )
    return OciReference(match["host"], match["repo"], match["tag"], match["digest"])


SHOWN_TAGS = 10
"""How many of a bare repository's version tags a refused pull names (the newest)."""


def _names_a_release(ref: OciReference, *, plain_http: bool) -> None:
    """Refuse a bare repository: the client would ask for ``latest``, which no push writes (tags are versions).

    The refusal names the versions the repository holds (its tag list, through the same bounded client); when
    the list cannot be read, it says why and still refuses: nothing is pulled on a guess."""
    if ref.tag is not None or ref.digest is not None:
        return
    said = "names a repository, not a release: a pull needs the release's version tag or OCI digest"
    try:
        with registry_deadline(PULL_DEADLINE):
            tags = version_tags(open_registry(ref, plain_http=plain_http), ref)
    except RegistryError as exc:
        raise _bare(ref, f"{said}; its tags could not be listed ({exc.code.value}: {exc.message})") from None
    if not tags:
        raise _bare(ref, f"{said}; it holds no release version tag (push one first)")
    newest = tags[-SHOWN_TAGS:][::-1]
    more = f" and {len(tags) - len(newest)} older" if len(tags) > len(newest) else ""
    raise _bare(ref, f"{said}; it holds {', '.join(newest)}{more}", newest[0])


def _bare(ref: OciReference, message: str, newest: str | None = None) -> RegistryError:
    version = "<version>" if newest is None else newest
    return RegistryError(
        FailureCode.OCI_REFERENCE_INVALID,
        message,
        path=str(ref),
        next_step=f"add the release's version (`{ref}:{version}`: push tags each release with its version) "
        f"or the OCI digest push printed (`{ref}@sha256:<digest>`)",
    )


def is_version_tag(tag: str) -> bool:
    """Tags that name a release version (OCI tags cannot hold ``+``), and could be tags at all: a registry's
    tag list is not taken on trust, and a "version" longer than a tag could hold more digits than Python reads."""
    return bool(_VERSION_TAG.fullmatch(tag) and _ANY_TAG.fullmatch(tag))


def fetch_manifest(registry: oras.provider.Registry, ref: OciReference) -> tuple[str, dict[str, Any]]:
    """The OCI manifest ``ref`` names and its digest (checked against a requested digest)."""
    found = tagged_manifest(registry, ref)
    if found is None:
        raise _refuse(FailureCode.OCI_REGISTRY_ERROR, "no such tag or digest in the repository", str(ref))
    return found


def tagged_manifest(registry: oras.provider.Registry, ref: OciReference) -> tuple[str, dict[str, Any]] | None:
    """Like :func:`fetch_manifest`, but ``None`` when the registry does not know the reference."""
    container = registry.get_container(ref.target)
    with guarded(ref, "fetching the manifest"):
        try:  # read streamed and cut off past the limit, never read whole first
            response = registry.do_request(
                f"{registry.prefix}://{container.manifest_url()}", "GET", headers={"Accept": OCI_MANIFEST_TYPE}
            )
        except ResponseTooLarge:
            raise _refuse(
                FailureCode.OCI_ARTIFACT_INVALID, f"the OCI manifest is over {MAX_OCI_MANIFEST_BYTES} bytes", str(ref)
            ) from None
        if response.status_code == 404:
            return None
        registry_call(ref, "fetching the manifest", response)
        data = response.content
    digest = digest_bytes(data)
    if ref.digest is not None and digest != ref.digest:
        raise _refuse(FailureCode.OCI_BLOB_MISMATCH, f"the registry served a manifest with digest {digest}", str(ref))
    # strict, as a release's JSON: of a key written twice, another client may take the value we did not
    manifest = parse_strict_json(data, where=str(ref), code=FailureCode.OCI_ARTIFACT_INVALID)
    if not isinstance(manifest, dict):
        raise _refuse(FailureCode.OCI_ARTIFACT_INVALID, "the OCI manifest is not a JSON object", str(ref))
    return digest, manifest


def version_tags(registry: oras.provider.Registry, ref: OciReference) -> list[str]:
    """The repository's tags that name a release version, oldest first."""
    container = registry.get_container(ref.with_tag("latest").target)
    with guarded(ref, "listing tags"):
        tags = list_tags(registry, container)
    found = [t for t in tags if isinstance(t, str) and is_version_tag(t)]
    return sorted(found, key=lambda t: semver_key(t.replace("_", "+")))


def release_layers(manifest: Mapping[str, Any], where: str) -> list[dict[str, Any]]:
    """The manifest's layers if it is a well-formed Rimthan release artifact, else refuse."""
    if manifest.get("mediaType") != OCI_MANIFEST_TYPE or manifest.get("artifactType") != ARTIFACT_TYPE:
        raise _refuse(FailureCode.OCI_ARTIFACT_INVALID, f"not a Rimthan release (artifact type {ARTIFACT_TYPE})", where)
    layers = manifest.get("layers")
    if not isinstance(layers, list) or not layers or len(layers) > MAX_LAYERS:
        raise _refuse(FailureCode.OCI_ARTIFACT_INVALID, f"a release has 1 to {MAX_LAYERS} layers", where)
    total = 0
    for layer in layers:
        _check_layer(layer, where)
        total += layer["size"]
    if total > MAX_TOTAL_BYTES:
        raise _refuse(FailureCode.OCI_ARTIFACT_INVALID, f"the layers hold more than {MAX_TOTAL_BYTES} bytes", where)
    problem = path_set_problem(layer["annotations"][TITLE] for layer in layers)
    if problem is not None:
        raise _refuse(FailureCode.OCI_ARTIFACT_INVALID, f"layer titles {quoted(repr(problem[0]))}: {problem[1]}", where)
    return layers


def _check_layer(layer: Any, where: str) -> None:
    ok = (
        isinstance(layer, dict)
        and layer.get("mediaType") in LAYER_TYPES
        and isinstance(layer.get("digest"), str)
        and _DIGEST.fullmatch(layer["digest"]) is not None
        and type(layer.get("size")) is int
        and isinstance(layer.get("annotations"), dict)
        and isinstance(layer["annotations"].get(TITLE), str)
    )
    if not ok:
        raise _refuse(FailureCode.OCI_ARTIFACT_INVALID, "a layer is not a titled Rimthan release file", where)
    title = layer["annotations"][TITLE]
    problem = path_problem(title)
    if problem is None and not (
        title in (MANIFEST_NAME, CHECKSUMS_NAME)
        or title.startswith(f"{SIGNATURES_DIR}/")
        or title.startswith(f"{CATALOGUE_DIR}/")
    ):
        problem = "not a release file"
    if problem is not None:
        raise _refuse(FailureCode.OCI_ARTIFACT_INVALID, f"layer title {quoted(repr(title))}: {problem}", where)
    if not 0 <= layer["size"] <= MAX_LAYER_BYTES:
        raise _refuse(
            FailureCode.OCI_ARTIFACT_INVALID,
            f"layer {quoted(repr(title))} declares {quoted(layer['size'])} bytes; the limit is {MAX_LAYER_BYTES}",
            where,
        )


def _download(
    registry: oras.provider.Registry, ref: OciReference, layer: Mapping[str, Any], dest: Path, where: Path
) -> None:
    """Stream one blob to ``dest``, refusing any byte beyond its declared size or a digest mismatch.

    The local file's own failures (a full or read-only disk) are ``io_error`` naming ``where``, not the registry's.
    """
    title, size = layer["annotations"][TITLE], layer["size"]
    with local_io(where, f"writing {title}"):
        dest.parent.mkdir(parents=True, exist_ok=True)
        out = dest.open("xb", buffering=0)
    hasher, written = Sha256(), 0
    container = registry.get_container(ref.target)
    with out, guarded(ref, f"downloading {title}"):
        deadline = _request_deadline()
        with registry.get_blob(container, layer["digest"], stream=True) as response:
            registry_call(ref, f"downloading {title}", response)
            try:
                for chunk in body_chunks(response, size, deadline, ResponseTooLarge):
                    written += len(chunk)
                    hasher.update(chunk)
                    with local_io(where, f"writing {title}"):
                        write_all(out.fileno(), chunk)
            except ResponseTooLarge:
                written = size + 1  # more bytes than the manifest declared: a mismatch below
    if written != size or DIGEST_PREFIX + hasher.hexdigest() != layer["digest"]:
        raise _refuse(
            FailureCode.OCI_BLOB_MISMATCH,
            f"the registry served other bytes for {quoted(title)} than the manifest's {layer['digest']}",
            str(ref),
        )


def pull_release(
    ref: OciReference,
    trust: TrustStore,
    out_dir: Path,
    *,
    plain_http: bool = False,
    expected_profile: str | None = None,
    expected_scope: str | None = None,
    replace_damaged: bool = False,
) -> PulledRelease:
    """Download, check and verify the release ``ref`` names, then move it to ``out_dir/<catalogue>-<version>``.

    A copy already there that no longer verifies is replaced by the verified pull only when
    ``replace_damaged`` (:mod:`~rimthan_workflow_registry.release.oci_install`); else it is refused, saying how.
    """
    _names_a_release(ref, plain_http=plain_http)
    registry = open_registry(ref, plain_http=plain_http)
    expected = Expected(trust, expected_profile, expected_scope)
    with local_io(out_dir, "making the download directory"):
        out_dir.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".pull-", dir=out_dir))
    try:
        with registry_deadline(PULL_DEADLINE):  # the registry's part, however many layers
            oci_digest, manifest = fetch_manifest(registry, ref)
            layers = release_layers(manifest, str(ref))
            for layer in layers:
                _download(registry, ref, layer, staging / layer["annotations"][TITLE], out_dir)
        release = _verified_download(staging, ref, trust, expected_profile, expected_scope)
        _check_tag(ref, release, manifest)
        final = out_dir / release_dir_name(release)
        check_stop()  # asked to stop while it verified: nothing is moved into place
        installed = install_release(staging, final, release, expected, replace_damaged=replace_damaged)
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # after a replacement: the damaged copy
    moved = verify_release(final, trust, expected_profile=expected_profile, expected_scope=expected_scope)
    return PulledRelease(
        final, moved, oci_digest, installed.already_present, installed.replaced_damaged, installed.replaced_code
    )


# A release short of trusted signatures is fixed where it was built, then pushed again: not in the download.
_PULLED_NEXT = {
    FailureCode.SIGNATURE_THRESHOLD_NOT_MET: "have more trusted key holders co-sign the release where it was built "
    "(rimthan-pack sign RELEASE --key THEIR_KEY) and push it again, or pull with the --trust that names its signers",
}


def _verified_download(
    staging: Path, ref: OciReference, trust: TrustStore, profile: str | None, scope: str | None
) -> VerifiedRelease:
    """The one verification path on the download; a refusal names the file in the artifact, not the download
    directory (deleted as the refusal is reported)."""
    try:
        return verify_release(staging, trust, expected_profile=profile, expected_scope=scope)
    except RegistryError as exc:
        where = exc.path.replace(str(staging), str(ref), 1) if exc.path else str(ref)
        raise type(exc)(
            exc.code, exc.message, path=where, details=exc.details, next_step=_PULLED_NEXT.get(exc.code, exc.next_step)
        ) from exc


def _check_tag(ref: OciReference, release: VerifiedRelease, manifest: Mapping[str, Any]) -> None:
    """A version tag must name the signed version; the annotations must name the signed manifest."""
    version = release.manifest.release.version
    if ref.digest is None and ref.tag is not None and is_version_tag(ref.tag) and ref.tag != version.replace("+", "_"):
        raise _refuse(
            FailureCode.OCI_TAG_MISMATCH,
            f"tag {ref.tag} points at {release.release_id}; a version tag must name its own signed version",
            str(ref),
        )
    annotations = manifest.get("annotations")
    claimed = annotations.get(DIGEST_ANNOTATION) if isinstance(annotations, dict) else None
    if claimed != release.manifest_digest:
        raise _refuse(
            FailureCode.OCI_ARTIFACT_INVALID,
            f"the artifact claims manifest digest {quoted(claimed)}, its manifest.json is {release.manifest_digest}",
            str(ref),
        )


def release_dir_name(release: VerifiedRelease) -> str:
    """``<catalogue>-<version>``: the directory name a release lives under."""
    ident = release.manifest.release
    return f"{ident.catalogue}-{ident.version}"
