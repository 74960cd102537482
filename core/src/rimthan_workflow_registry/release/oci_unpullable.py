"""Why no OCI pull would take a release: what ``build`` and ``check`` warn of, past a bound of ``oci_limits``.

Defined apart from :mod:`rimthan_workflow_registry.release.oci_limits`, whose
bounds every build checks, and imported only when a release is past one: a
build within them never defines the type (each frozen dataclass costs a
process its generated methods' compilation).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Unpullable:
    """Why no OCI pull would take a release: the file it names (``None`` for the release as a whole), why, and
    what to do when it is not the general step (keep within the limits, or serve from a directory)."""

    path: str | None
    reason: str
    next_step: str | None = None
