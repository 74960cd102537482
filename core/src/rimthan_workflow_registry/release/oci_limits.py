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
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .oci_unpullable import Unpullable

MAX_LAYERS = 4096  # the files of one release artifact: manifest.json, SHA256SUMS, signatures, catalogue files
MAX_LAYER_BYTES = 16 * 1024 * 1024  # one file
MAX_TOTAL_BYTES = 256 * 1024 * 1024  # the most a release artifact's layers hold
RELEASE_OWN_FILES = 2  # manifest.json and SHA256SUMS, beside the signatures and the catalogue files


def unpullable(sizes: Mapping[str, int], signatures: int) -> list[Unpullable]:
    """Each bound a release of these catalogue files (path: bytes) and ``signatures`` signatures is past.

    The release's own ``manifest.json`` and ``SHA256SUMS`` count as files, not as bytes: they are small beside
    a 16 MiB file, so a release this says nothing of can still be past the total by a few kilobytes.
    """
    found: list[tuple[str | None, str]] = [
        (path, f"is {size} bytes; no OCI pull takes a release file over {MAX_LAYER_BYTES} bytes")
        for path, size in sorted(sizes.items())
        if size > MAX_LAYER_BYTES
    ]
    files = len(sizes) + RELEASE_OWN_FILES + signatures
    if files > MAX_LAYERS:
        found.append((None, f"has {files} files; no OCI pull takes a release of over {MAX_LAYERS}"))
    total = sum(sizes.values())
    if total > MAX_TOTAL_BYTES:
        found.append((None, f"holds {total} bytes; no OCI pull takes a release of over {MAX_TOTAL_BYTES}"))
    if not found:
        return []
    from .oci_unpullable import Unpullable  # only for a release past a bound (the module's docstring)

    return [Unpullable(path, reason) for path, reason in found]
