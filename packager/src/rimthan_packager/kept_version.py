"""The carrier of a ``migration_not_newer`` warning (``rimthan-pack build`` and ``check --releases-dir``).

Imported by :func:`rimthan_packager.kept_versions.kept_versions` only when the
releases directory holds an older release of the catalogue: a build into a
directory without one never creates the class (Python generates and compiles a
dataclass's methods when it is defined).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, eq=False, repr=False)  # a carrier for a warning: never compared or shown
class KeptVersion:
    """A workflow whose files differ from an older release's while its ``id@version`` is the same."""

    workflow: str  # id@version
    source: str  # its TOML, where the version is set
    release: Path  # the older release it differs from (the newest that differs)
    files: tuple[str, ...]  # the files that differ or that release lacks
