"""Serving the application over stdio: one client on stdin/stdout, the refresh triggers beside it.

Every request read before stdin closes is answered before the server exits
(``stdio_drain``), one stdio line is bounded on pipes (``stdio_pipes``), and a
client that closes its end of stdout stops the server (nothing more can reach
it). Nothing of the HTTP transport (``http_transport``) is imported here: a
stdio start does not pay for it.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
from mcp.server import Server

from .list_changed import ListingWatch
from .logs import get_logger
from .provider import ReleaseProvider
from .refresh_triggers import refresh_triggers
from .stdio_serve import serve_wire

_log = get_logger("transport")


def stdio_not_open() -> str | None:
    """Which of stdin and stdout the process was started with closed (Python then makes it None), or None."""
    return (
        " and ".join(name for name, stream in (("stdin", sys.stdin), ("stdout", sys.stdout)) if stream is None) or None
    )


async def serve_stdio(
    app: Server[Any], provider: ReleaseProvider, *, refresh_interval: float | None, watch: ListingWatch | None = None
) -> str | None:
    """Serve one client over stdin/stdout (``stdio_serve``), refresh triggers beside it; why it stopped, or None."""
    async with anyio.create_task_group() as tg:
        await tg.start(refresh_triggers, provider, refresh_interval, watch)
        _log.info("serving", extra={"transport": "stdio"})
        stopped = await serve_wire(app)
        tg.cancel_scope.cancel()  # a follower's sync under way is no call: stopped (refresh_now), not waited for
    return stopped
