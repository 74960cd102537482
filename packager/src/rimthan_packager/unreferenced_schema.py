"""A schema file of the source no workflow references: what a build's refusal of it names.

Defined apart from :mod:`rimthan_packager.layout`, which looks for such files
on every build, and imported only when one is found: a build with none never
defines the type (each frozen dataclass costs a process its generated
methods' compilation).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class UnreferencedSchema:
    """A schema file of the source no workflow references, and the referenced one its name is closest to."""

    path: str
    closest: str | None
    mark: str | None = None  # its layout.KEEP_MARK value as JSON when it has one that says no reason
