"""A delivered asset whose copy the bridge kept is gone: its text fetched again from the verifier, checked.

The bridge keeps the text of each asset it delivered (``.rimthan/assets/<sha256>``, :mod:`.delivered`) to put
the file back when it is missing or another release's. When that copy is gone too (untracked files cleaned),
the release still holds the file, and the verifier serves every file of a release it holds as a resource: the
manifest (``rimthan://manifests/<hex>/manifest.json``) names each file's path and SHA-256, and
``rimthan://releases/<hex>/<path>`` serves the file. Nothing served is trusted: a text is kept only if its
SHA-256 is the one the delivery record pinned when the asset was delivered from the verified release; one that
is not is :class:`CopyRefused` (``file_digest_mismatch``), nothing kept or put back. A verifier that cannot
serve the file (it no longer holds the release, or its manifest names no file of that digest) leaves the
refusal as it was: the user may still put the file back.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from mcp.shared.exceptions import MCPError
from rimthan_workflow_registry.canonical import DIGEST_PREFIX, sha256_hex
from rimthan_workflow_registry.errors import FailureCode
from rimthan_workflow_registry.run import release_file_uri

from .delivered import STORE_DIR, AssetClash, CopyGone
from .project_files import ProjectFiles
from .protocol import HarnessError, ResourceReader

T = TypeVar("T")
DIGEST_MISMATCH = FailureCode.FILE_DIGEST_MISMATCH.value


class CopyRefused(AssetClash):
    """The verifier served a text for a delivered asset whose SHA-256 is not the one delivered: nothing kept."""

    code = DIGEST_MISMATCH


async def restored(read: ResourceReader | None, files: ProjectFiles, release: str, restore: Callable[[], T]) -> T:
    """``restore()`` (one of :mod:`.delivered`'s put-backs); if it refuses for kept copies that are gone, those
    texts fetched from the verifier and checked (:func:`fetch_copies`), then ``restore()`` again."""
    try:
        return restore()
    except CopyGone as gone:
        if read is None or not await fetch_copies(read, files, release, gone):
            raise
    return restore()


async def fetch_copies(read: ResourceReader, files: ProjectFiles, release: str, gone: CopyGone) -> bool:
    """Keep the text of each digest ``gone`` names as the verifier serves it from ``release`` (a manifest digest),
    each checked against its digest: True once all are kept; False, nothing kept, if the verifier cannot serve one;
    :class:`CopyRefused`, nothing kept, if it serves one whose SHA-256 differs."""
    hex_digest = release.removeprefix(DIGEST_PREFIX)
    try:
        paths = _paths(json.loads(await read(f"rimthan://manifests/{hex_digest}/manifest.json")), gone.digests)
        if paths is None:
            return False
        served = {d: await read(release_file_uri(release, p)) for d, p in paths.items()}
    except (HarnessError, MCPError, ValueError, TypeError, AttributeError, KeyError, RecursionError):
        return False  # (no manifest, or not one: nothing is guessed from it)
    for digest, text in served.items():
        found = sha256_hex(text.encode("utf-8", "surrogatepass"))  # (a lone surrogate: no delivered text's bytes)
        if found != digest:
            raise CopyRefused(
                f"Nothing was changed: {DIGEST_MISMATCH}: the copy the bridge kept of {paths[digest]} of this run's "
                f"release is gone, and the verifier served that file with SHA-256 {found}, not {digest} as the "
                "bridge delivered it, so the bridge kept none of it and put nothing back. Ask the operator to check "
                "the verifier; if the user still has the file the bridge delivered, ask them to put it back "
                f"unchanged, then call {gone.then}; if not, call start_run with new_run true for a new run."
            )
    for digest, text in served.items():
        files.write(digest, f"{STORE_DIR}/{digest}", "text/markdown", text)
    return True


def refused_code(exc: AssetClash) -> dict[str, str]:
    """The code of a refusal that has one, as a reply's data says it (``{"refused": code}``), else nothing."""
    return {"refused": exc.code} if isinstance(exc, CopyRefused) else {}


def _paths(manifest: Mapping[str, Any], digests: tuple[str, ...]) -> dict[str, str] | None:
    """Each digest's path in ``manifest`` (a release manifest), or None if it names no file of one of them."""
    by_digest = {str(f["sha256"]): str(f["path"]) for f in manifest["files"]}
    return {d: by_digest[d] for d in digests} if all(d in by_digest for d in digests) else None
