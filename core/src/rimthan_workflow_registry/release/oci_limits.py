"""How large a release an OCI pull takes: its files, each file's bytes, all of them together.

A pull (``rimthan-pack pull``, and every follower of a fleet) refuses an
artifact past one of these bounds before it downloads anything
(:func:`~rimthan_workflow_registry.release.oci.release_layers`), and ``push``
refuses to send one. A release past them still builds, verifies and serves
from a directory; :func:`unpullable` lets ``build`` and ``check`` say so
before the release is signed, rather than at the first push.

Plain Python: the build imports this module, never the registry client.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rimthan_workflow_registry.release.format import CHECKSUMS_NAME, MANIFEST_NAME, SIGNATURE_SIZE

if TYPE_CHECKING:
    from .oci_unpullable import Unpullable

MAX_LAYERS = 4096  # the files of one release artifact: manifest.json, SHA256SUMS, signatures, catalogue files
MAX_LAYER_BYTES = 16 * 1024 * 1024  # one file
MAX_TOTAL_BYTES = 256 * 1024 * 1024  # the most a release artifact's layers hold


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


def unpullable(sizes: Mapping[str, int], own: OwnFiles) -> list[Unpullable]:
    """Each bound a release of these catalogue files (path: bytes) and its ``own`` files is past, counted as a
    pull counts them (:func:`~rimthan_workflow_registry.release.oci.release_layers`): every file a layer, the
    release's own files too, each layer's bytes, and all of them together."""
    found: list[tuple[str | None, str]] = [
        (path, f"is {size} bytes; no OCI pull takes a release file over {MAX_LAYER_BYTES} bytes")
        for path, size in sorted(sizes.items())
        if size > MAX_LAYER_BYTES
    ]
    layers = own.sizes()
    found += [
        (None, f"its {name} would be {size} bytes; no OCI pull takes a release file over {MAX_LAYER_BYTES}")
        for name, size in layers.items()
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
    if not found:
        return []
    from .oci_unpullable import Unpullable  # only for a release past a bound (the module's docstring)

    return [Unpullable(path, reason) for path, reason in found]
