"""``GET /healthz``: what a load balancer asks a replica before sending it calls.

A replica listens only once it holds a verified release (``serve`` loads or
pulls one before it binds, and refuses to start without one), so a replica
that answers is serving: ``200`` with ``{"status": "serving", "active":
[...]}``, the release each catalogue serves. A follower (``--releases-from``)
adds ``sync_failed``: ``null``, or why its last sync failed (or a pull in it)
(``code``, ``message``, ``since``: when syncs began failing), as information:
it still answers ``200``, serving what it holds. After SIGTERM it stops
listening at once (calls in flight are drained), so a check then fails to
connect. The answer names releases, so the ``Host`` (and ``Origin``) check of
the MCP endpoint applies: a name not allowed gets the same ``421`` / ``403``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

if TYPE_CHECKING:
    from .provider import ReleaseProvider

HEALTH_PATH = "/healthz"
HEALTH_METHODS = ("GET", "HEAD")


class Health:
    """The ``/healthz`` answer of one replica (see module)."""

    def __init__(self, provider: ReleaseProvider, settings: TransportSecuritySettings) -> None:
        self.provider = provider
        self.security = TransportSecurityMiddleware(settings)

    def asks(self, scope: Scope) -> bool:
        return scope["path"] == HEALTH_PATH and scope["method"] in HEALTH_METHODS

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        refused = await self.security.validate_request(Request(scope, receive), is_post=False)
        if refused is not None:
            await refused(scope, receive, send)
            return
        active = sorted(loaded.release.release_id for loaded in self.provider.actives.values())
        said: dict[str, Any] = {"status": "serving", "active": active}
        if self.provider.sync_failure is not None:  # a follower: why its last sync failed, if it did
            failed = self.provider.sync_failure()
            said["sync_failed"] = failed.to_dict() if failed is not None else None
        body = json.dumps(said).encode("utf-8")
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body if scope["method"] == "GET" else b""})
