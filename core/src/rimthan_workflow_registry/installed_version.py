"""The version of an installed distribution, from its metadata: what an MCP ``initialize`` reply names.

Both servers (``rimthan-mcp serve`` and ``rimthan-host serve``) report this in
``serverInfo.version``, the number ``--version`` prints. ``importlib.metadata``
is imported on the first call only: a build never pays for it.
"""

from __future__ import annotations

from functools import cache

# What a server run from a source tree without installed metadata reports: never an empty version.
UNINSTALLED_VERSION = "0.0.0"


@cache
def installed_version(distribution: str) -> str:
    """``distribution``'s installed version (``0.1.0``); :data:`UNINSTALLED_VERSION` when it is not installed."""
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return UNINSTALLED_VERSION
