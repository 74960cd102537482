"""The packager's memory of checks already passed, kept between runs in the user's cache directory.

Checking a catalogue schema against the 2020-12 metaschema is most of a
small build (15-25 ms per schema in a fresh process), and its answer depends
only on the schema's bytes and the checker's version. A server keeps the
passes in its state directory; the packager keeps them in
``$XDG_CACHE_HOME/rimthan/schema-checks.json`` (``~/.cache/rimthan/`` when
``XDG_CACHE_HOME`` is unset or relative), with the same rules
(:mod:`rimthan_workflow_registry.release.schema_checks`): keyed by SHA-256
and checker version, only passes remembered, bytes never seen are always
checked, an unreadable or malformed file is ignored and an unwritable one
only costs the checks again. Whoever can write that directory runs as the
user already, so the file adds no trust.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

CACHE_SUBDIR = "rimthan"


def cache_dir(environ: Mapping[str, str] = os.environ) -> Path | None:
    """``$XDG_CACHE_HOME/rimthan`` or ``~/.cache/rimthan``; ``None`` if there is no home to put it in."""
    base = environ.get("XDG_CACHE_HOME", "")
    if os.path.isabs(base):
        return Path(base) / CACHE_SUBDIR
    try:
        return Path.home() / ".cache" / CACHE_SUBDIR
    except RuntimeError:  # no HOME and no passwd entry
        return None


@contextmanager
def remembered_checks() -> Iterator[None]:
    """Within: the passes remembered by earlier runs count, and new ones are kept there too.

    Also a decorator (``@remembered_checks()``): the CLI commands that check a catalogue run inside it.
    """
    from rimthan_workflow_registry.release import SCHEMA_CHECKS, SCHEMA_CHECKS_FILE

    where = cache_dir()
    SCHEMA_CHECKS.persist_to(where / SCHEMA_CHECKS_FILE if where is not None else None)
    try:
        yield
    finally:
        SCHEMA_CHECKS.persist_to(None)  # what was learnt stays in this process only
