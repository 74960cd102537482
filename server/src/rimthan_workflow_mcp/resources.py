"""Immutable MCP resources: tool contracts and the files of every held release.

Every URI carries a digest of what it names, so a resource never changes
under its URI and clients may cache it forever:

- ``rimthan://contracts/<name>/<sha256hex>.schema.json`` - a JSON Schema
  contract the tools embed (hex: SHA-256 of the contract's canonical bytes);
- ``rimthan://manifests/<manifest-hex>/manifest.json`` - a release manifest
  (hex: the manifest digest, i.e. SHA-256 of exactly these bytes);
- ``rimthan://releases/<manifest-hex>/<path>`` - a catalogue file of that
  release, served only through ``VerifiedRelease.read_file`` (verified bytes);
  the same URIs the engine puts in step payloads (``step_payload.release_file_uri``).

The listing itself is not immutable: it says what the server holds now, and which held release a new run
starts on (:data:`NEW_RUNS_META` on that release's manifest resource: each served catalogue's active release),
with the workflows each release carries (:data:`WORKFLOWS_META`: what a host lists for a model to start).
It is served in pages (resource_pages.py): the manifest resources first, then the contracts, then each
release's files.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS
from rimthan_workflow_registry.canonical import DIGEST_PREFIX, SHA256_HEX_PATTERN, canonical_bytes, sha256_hex
from rimthan_workflow_registry.errors import FailureCode, RegistryError
from rimthan_workflow_registry.protocol_names import NEW_RUNS_META, RELEASE_META, WORKFLOWS_META
from rimthan_workflow_registry.run import release_file_uri

from .provider import LoadedRelease, ReleaseProvider
from .resource_pages import listing_key, page_span
from .rpc_errors import failure_error

SCHEME = "rimthan://"
CONTRACT_MIME = "application/schema+json"
MANIFEST_MIME = "application/json"
RELEASE_FILE_TEMPLATE = SCHEME + "releases/{manifest_hex}/{+path}"
_TEXT_TYPES = ("application/json", "application/toml", "text/markdown", "application/schema+json")
# matched with fullmatch: "$" would also take a URI that ends in a newline
_MANIFEST_URI = re.compile(f"rimthan://manifests/(?P<hex>{SHA256_HEX_PATTERN})/manifest\\.json")
_RELEASE_URI = re.compile(f"rimthan://releases/(?P<hex>{SHA256_HEX_PATTERN})/(?P<path>.+)")


def contract_uri(name: str, document: Mapping[str, Any]) -> str:
    return f"{SCHEME}contracts/{name}/{sha256_hex(canonical_bytes(dict(document)))}.schema.json"


def manifest_uri(manifest_digest: str) -> str:
    return f"{SCHEME}manifests/{_hex(manifest_digest)}/manifest.json"


def _hex(digest: str) -> str:
    return digest.removeprefix(DIGEST_PREFIX)


@dataclass(frozen=True)
class ContractResource:
    name: str
    uri: str
    text: str


class ResourceCatalogue:
    """Lists and reads the server's resources; contracts fixed, releases from the provider."""

    def __init__(self, provider: ReleaseProvider, contracts: Mapping[str, Mapping[str, Any]]) -> None:
        self.provider = provider
        self.contracts: dict[str, ContractResource] = {}
        for name, document in sorted(contracts.items()):
            uri = contract_uri(name, document)
            self.contracts[uri] = ContractResource(name, uri, canonical_bytes(dict(document)).decode("utf-8"))

    def contract_uris(self) -> dict[str, str]:
        """Contract name -> immutable URI."""
        return {c.name: c.uri for c in self.contracts.values()}

    # -- listing --------------------------------------------------------------------------

    def list_resources(self) -> list[types.Resource]:
        """The whole listing, every page of it in order (tests and benchmarks; a client is served pages)."""
        pages: list[types.Resource] = []
        cursor: str | None = None
        while True:
            page = self.list_page(cursor)
            pages += page.resources
            cursor = page.next_cursor
            if cursor is None:
                return pages

    def list_page(self, cursor: str | None) -> types.ListResourcesResult:
        """The page of ``resources/list`` that ``cursor`` names (None: the first): manifests, contracts, files.

        A cursor not to follow (stale, malformed, out of range) is a JSON-RPC -32602 (resource_pages.py)."""
        releases = _by_release(self.provider.held.values())  # one snapshot: a refresh may replace the mapping
        starting = {loaded.digest for loaded in self.provider.actives.values()}
        key = listing_key([*self.contracts, *(f"{r.digest} {r.digest in starting}" for r in releases)])
        files = sum(len(r.release.manifest.files) for r in releases)
        leading = len(releases) + len(self.contracts)
        try:
            span = page_span(key, leading + files, len(releases), cursor)
        except RegistryError as exc:
            raise failure_error(INVALID_PARAMS, exc) from None
        out: list[types.Resource] = []
        if span.start < leading:  # (a later page builds no manifest or contract resource, only to cut it away)
            heads = [*(self._manifest_resource(r, r.digest in starting) for r in releases), *self._contract_resources()]
            out = heads[span.start : span.stop]
        out += _file_resources(releases, max(0, span.start - leading), span.stop - span.start - len(out))
        return types.ListResourcesResult(resources=out, next_cursor=span.next_cursor)

    def _contract_resources(self) -> list[types.Resource]:
        return [
            types.Resource(
                uri=c.uri,
                name=f"contract {c.name}",
                title=f"Contract: {c.name}",
                mime_type=CONTRACT_MIME,
                size=len(c.text.encode("utf-8")),
            )
            for c in self.contracts.values()
        ]

    @staticmethod
    def _manifest_resource(loaded: LoadedRelease, starts_runs: bool) -> types.Resource:
        from rimthan_workflow_registry.run import available_workflows  # (the engine's side: not loaded at start)

        release = loaded.release
        said = "new runs of its workflows start on it" if starts_runs else "held for the runs pinned to it"
        return types.Resource(
            uri=manifest_uri(loaded.digest),
            name=f"{release.release_id} manifest",
            title=f"Signed manifest of {release.release_id}",
            description=f"{release.release_id}: {said}.",
            mime_type=MANIFEST_MIME,
            size=len(release.manifest_bytes),
            _meta={
                RELEASE_META: release.release_id,
                NEW_RUNS_META: starts_runs,
                WORKFLOWS_META: available_workflows(release.catalogue.workflows),
            },
        )

    def list_templates(self) -> list[types.ResourceTemplate]:
        return [
            types.ResourceTemplate(
                uri_template=RELEASE_FILE_TEMPLATE,
                name="release-file",
                title="A file of a held release",
                description="Verified bytes of a catalogue file of the release with this manifest digest (hex).",
            ),
            types.ResourceTemplate(
                uri_template=SCHEME + "manifests/{manifest_hex}/manifest.json",
                name="release-manifest",
                title="A held release's signed manifest",
                mime_type=MANIFEST_MIME,
                description="The exact signed manifest bytes; the hex is their SHA-256.",
            ),
        ]

    # -- reading --------------------------------------------------------------------------

    def read(self, uri: str) -> types.ReadResourceResult:
        contract = self.contracts.get(uri)
        if contract is not None:
            return _result(types.TextResourceContents(uri=uri, mime_type=CONTRACT_MIME, text=contract.text))
        if match := _MANIFEST_URI.fullmatch(uri):
            loaded = self._held(match.group("hex"), uri)
            return _result(
                types.TextResourceContents(
                    uri=uri, mime_type=MANIFEST_MIME, text=loaded.release.manifest_bytes.decode("utf-8")
                )
            )
        if match := _RELEASE_URI.fullmatch(uri):
            loaded = self._held(match.group("hex"), uri)
            return _result(self._read_release_file(loaded, match.group("path"), uri))
        raise _not_found(uri, "no such resource; list resources or use a URI a tool returned")

    def _held(self, hex_digest: str, uri: str) -> LoadedRelease:
        loaded = self.provider.get(DIGEST_PREFIX + hex_digest)
        if loaded is None:
            raise _not_found(
                uri, "this server holds no release with that manifest digest", FailureCode.PINNED_RELEASE_UNAVAILABLE
            )
        return loaded

    @staticmethod
    def _read_release_file(
        loaded: LoadedRelease, path: str, uri: str
    ) -> types.TextResourceContents | types.BlobResourceContents:
        entry = loaded.release.file_entry(path)
        if entry is None:
            raise _not_found(uri, f"{path!r} is not a file of {loaded.release.release_id}")
        try:
            data = loaded.release.read_file(path)
        except RegistryError as exc:
            # The bytes on disk no longer match the signed manifest: never serve them.
            raise failure_error(INTERNAL_ERROR, exc, uri=uri) from None
        if entry.media_type in _TEXT_TYPES:
            try:
                return types.TextResourceContents(uri=uri, mime_type=entry.media_type, text=data.decode("utf-8"))
            except UnicodeDecodeError:
                pass
        return types.BlobResourceContents(
            uri=uri, mime_type=entry.media_type, blob=base64.b64encode(data).decode("ascii")
        )


def _by_release(held: Iterable[LoadedRelease]) -> list[LoadedRelease]:
    return sorted(held, key=lambda r: (r.catalogue, r.version, r.digest))


def _file_resources(releases: Sequence[LoadedRelease], skip: int, count: int) -> list[types.Resource]:
    """``count`` release-file resources, after the first ``skip``, of ``releases``' files in order."""
    out: list[types.Resource] = []
    if count <= 0:
        return out
    for loaded in releases:
        entries = loaded.release.manifest.files
        if skip >= len(entries):
            skip -= len(entries)
            continue
        for entry in entries[skip : skip + count - len(out)]:
            out.append(
                types.Resource(
                    uri=release_file_uri(loaded.digest, entry.path),
                    name=f"{loaded.release.release_id}:{entry.path}",
                    mime_type=entry.media_type,
                    size=entry.size,
                )
            )
        skip = 0
        if len(out) >= count:
            break
    return out


def _result(contents: types.TextResourceContents | types.BlobResourceContents) -> types.ReadResourceResult:
    # Immutable by construction (the URI names a digest): a long TTL is safe, but scope stays private.
    return types.ReadResourceResult(contents=[contents], ttl_ms=86_400_000, cache_scope="private")


_READ_A_LISTED_URI = "read a URI resources/list gives or a tool returned"  # what to do for a URI that names nothing


def _not_found(uri: str, message: str, code: FailureCode | None = None) -> MCPError:
    """A URI that names nothing held: ``invalid_arguments`` (read a listed URI), or ``code`` with its table line."""
    if code is None:
        failure = RegistryError(FailureCode.INVALID_ARGUMENTS, message, next_step=_READ_A_LISTED_URI)
    else:
        failure = RegistryError(code, message)
    return failure_error(INVALID_PARAMS, failure, uri=uri)
