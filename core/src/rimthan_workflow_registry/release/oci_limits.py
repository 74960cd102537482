"""How large a release an OCI pull takes: its files, each file's bytes, all of them together.

A pull (``rimthan-pack pull``, and every follower of a fleet) refuses an
artifact past one of these bounds before it downloads anything
(:func:`~rimthan_workflow_registry.release.oci.release_layers`), and ``push``
refuses to send one. So does an OCI manifest past ``MAX_OCI_MANIFEST_BYTES``
(:mod:`.oci_artifact`), which registries refuse. A release past them still builds, verifies and serves
from a directory; :func:`unpullable` lets ``build`` and ``check`` say so
before the release is signed, rather than at the first push.

Plain Python: the build imports this module, never the registry client.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rimthan_workflow_registry.release.format import CHECKSUMS_NAME, MANIFEST_NAME, SIGNATURE_SIZE
from rimthan_workflow_registry.release.oci_artifact import MAX_OCI_MANIFEST_BYTES, manifest_size

if TYPE_CHECKING:
    from .oci_unpullable import Unpullable

MAX_LAYERS = 4096  # the files of one release artifact: manifest.json, SHA256SUMS, signatures, catalogue files
MAX_LAYER_BYTES = 16 * 1024 * 1024  # one file
MAX_TOTAL_BYTES = 256 * 1024 * 1024  # the most a release artifact's layers hold
MANIFEST_PAST_NEXT = (
    "shorten the catalogue's longest file paths (non-ASCII characters count six times: the manifest escapes "
    "them), or split it into catalogues of fewer files; a release past the bound serves only from a directory "
    "(rimthan-mcp serve --releases-dir)"
)


@dataclass(frozen=True, eq=False, repr=False)  # a carrier: never compared or shown (a build pays for no such method)
class OwnFiles:
    """A release's own files, each a layer of its pushed artifact beside the catalogue files: the bytes of its
    ``manifest.json`` and ``SHA256SUMS``, and how many signatures (``SIGNATURE_SIZE`` bytes each) it has."""

    manifest: int
    checksums: int
    signatures: int

    def sizes(self) -> dict[str, int]:
        """Each own file's layer title and bytes (the signatures' titles stand for any key's)."""
        own = {MANIFEST_NAME: self.manifest, CHECKSUMS_NAME: self.checksums}
        own.update({f"signature {n + 1}": SIGNATURE_SIZE for n in range(self.signatures)})
        return own


def unpullable(sizes: Mapping[str, int], own: OwnFiles, *, name: str, version: str) -> list[Unpullable]:
    """Each bound a release ``name`` ``version`` of these catalogue files (path: bytes) and its ``own`` files is
    past, counted as a pull counts them (:func:`~rimthan_workflow_registry.release.oci.release_layers`): every
    file a layer, the release's own files too, each layer's bytes, all of them together, and the OCI manifest
    that lists them (:func:`~rimthan_workflow_registry.release.oci_artifact.manifest_size`)."""
    found: list[tuple[str | None, str]] = [
        (path, f"is {size} bytes; no OCI pull takes a release file over {MAX_LAYER_BYTES} bytes")
        for path, size in sorted(sizes.items())
        if size > MAX_LAYER_BYTES
    ]
    layers = own.sizes()
    found += [
        (None, f"its {title} would be {size} bytes; no OCI pull takes a release file over {MAX_LAYER_BYTES}")
        for title, size in layers.items()
        if size > MAX_LAYER_BYTES
    ]
    files = len(sizes) + len(layers)
    if files > MAX_LAYERS:
        found.append((None, f"has {files} files; no OCI pull takes a release of over {MAX_LAYERS}"))
    total = sum(sizes.values()) + sum(layers.values())
    if total > MAX_TOTAL_BYTES:
        found.append(
            (
                None,
                f"holds {total} bytes with its manifest, checksums and signatures; no OCI pull takes a release of "
                f"over {MAX_TOTAL_BYTES}",
            )
        )
    manifest = manifest_size(sizes, own, name=name, version=version) or 0
    if not found and manifest <= MAX_OCI_MANIFEST_BYTES:
        return []
    from .oci_unpullable import Unpullable  # only for a release past a bound (the module's docstring)

    said = [Unpullable(path, reason) for path, reason in found]
    if manifest > MAX_OCI_MANIFEST_BYTES:
        said.append(Unpullable(None, manifest_past(manifest), MANIFEST_PAST_NEXT))
    return said


def manifest_past(size: int) -> str:
    """Why an OCI manifest of ``size`` bytes is refused: what ``build``, ``check`` and ``push`` say."""
    return (
        f"its OCI manifest would be {size} bytes (a layer per file, each titled with its path); registries refuse "
        f"a manifest over {MAX_OCI_MANIFEST_BYTES} bytes (4 MiB), and so does every pull"
    )
