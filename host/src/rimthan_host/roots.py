"""Whether the client's roots hold the project the bridge serves.

The bridge serves its ``--project`` (default its working directory), never a
folder it reads from the client's roots. A host whose roots are another folder
(a server added with ``--project`` elsewhere, a host opened in another
directory) reads its skills and subagents from there, so the prompt, skill,
subagents and adapter the bridge installs are not where that host looks. The
reply that sets up or resumes a run says so, once it knows: it asks the client
for its roots (a client that declared the capability, in the 2025-11-25 era)
and names both folders when none of them holds the project.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlsplit

import anyio
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError
from rimthan_workflow_registry.errors import quoted

from .asking import Asker

ROOTS_SECONDS = 5.0  # a client that declared roots and does not answer: no note, the reply as it is
ROOTS_NAMED = 5  # the note names this many of the client's roots, then how many more: one bounded line


async def outside_roots(asker: Asker, project: Path) -> str | None:
    """A note naming ``project`` and the client's roots when none holds it; None when one does or none is known."""
    ctx = asker.ctx
    if ctx is None or asker.modern:
        return None
    capabilities = ctx.session.client_capabilities
    if capabilities is None or capabilities.roots is None:
        return None
    try:
        with anyio.fail_after(ROOTS_SECONDS):
            listed = await ctx.session.list_roots()
    except (MCPError, TimeoutError, ValidationError):  # (NoBackChannelError is an MCPError)
        return None
    folders = [f for f in (_folder(r.uri) for r in listed.roots) if f is not None]
    here = project.resolve()
    if not folders or any(f == here or f in here.parents for f in folders):
        return None
    return (
        f"Note: this bridge serves the project directory {here}, which is not inside your client's roots "
        f"({_named(folders)}). The files it installed and the files you write are in {here}, "
        "where a host that reads skills and subagents from its own folder does not see them: tell the user, who "
        "can start the bridge in (or with --project) the folder they work in."
    )


def _named(folders: list[Path]) -> str:
    """The first :data:`ROOTS_NAMED` of ``folders``, each quoted (the client's words: one line, bounded), and how
    many more there are."""
    named = ", ".join(quoted(f) for f in folders[:ROOTS_NAMED])
    more = len(folders) - ROOTS_NAMED
    return f"{named} and {more} more" if more > 0 else named


def _folder(uri: object) -> Path | None:
    """The local folder a ``file://`` root names, resolved; None for any other URI, or one no folder can be at."""
    parts = urlsplit(str(uri))
    if parts.scheme != "file" or parts.netloc not in ("", "localhost") or not parts.path:
        return None
    try:
        return Path(unquote(parts.path)).resolve()
    except (OSError, ValueError, RuntimeError):  # a NUL in the path, a symbolic link loop: no folder of a project
        return None
