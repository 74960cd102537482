"""``GET /healthz``: what a load balancer asks a replica before sending it calls.

A replica listens only once it holds a verified release (``serve`` loads or
pulls one before it binds, and refuses to start without one), so a replica
that answers is serving: ``200`` with ``{"status": "serving", "active":
[...]}``, the release each catalogue serves. A follower (``--releases-from``)
adds ``sync_failed``: ``null``, or why its last sync failed (or a pull in it)
(``code``, ``message``, ``since``: when syncs began failing), as information:
it still answers ``200``, serving what it holds, unless the operator opted
in with ``serve --stale-after SECONDS``: once syncs have failed and the last
one that did not is more than SECONDS ago (or, with none since start, the
follower began that long ago), it answers ``503`` with ``"status":
"stale"``, the failure (code, since) and ``stale`` (``after``,
``last_synced``), so a balancer drains a replica that lost its registry; the
first sync that succeeds makes it ``200`` again. After SIGTERM it stops
listening at once (calls in flight are drained), so a check then fails to
connect. The answer names releases, so the ``Host`` (and ``Origin``) check of
the MCP endpoint applies: a name not allowed gets the same ``421`` / ``403``.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

if TYPE_CHECKING:
    from .provider import ReleaseProvider, SyncFailure

HEALTH_PATH = "/healthz"
HEALTH_METHODS = ("GET", "HEAD")


class Health:
    """The ``/healthz`` answer of one replica (see module)."""

    def __init__(
        self, provider: ReleaseProvider, settings: TransportSecuritySettings, stale_after: float | None = None
    ) -> None:
        self.provider = provider
        self.security = TransportSecurityMiddleware(settings)
        self.stale_after = stale_after  # serve --stale-after: seconds past the last good sync before 503

    def asks(self, scope: Scope) -> bool:
        return scope["path"] == HEALTH_PATH and scope["method"] in HEALTH_METHODS

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        refused = await self.security.validate_request(Request(scope, receive), is_post=False)
        if refused is not None:
            await refused(scope, receive, send)
            return
        active = sorted(loaded.release.release_id for loaded in self.provider.actives.values())
        said: dict[str, Any] = {"status": "serving", "active": active}
        failed = self.provider.sync_failure() if self.provider.sync_failure is not None else None
        if self.provider.sync_failure is not None:  # a follower: why its last sync failed, if it did
            said["sync_failed"] = failed.to_dict() if failed is not None else None
        stale = self._stale(failed)
        if stale:
            said = {**said, "status": "stale", "stale": stale}
        body = json.dumps(said).encode("utf-8")
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": 503 if stale else 200, "headers": headers})
        await send({"type": "http.response.body", "body": body if scope["method"] == "GET" else b""})

    def _stale(self, failed: SyncFailure | None) -> dict[str, Any] | None:
        """With ``--stale-after``: how stale a failing follower is, once its last good sync is that long past."""
        if self.stale_after is None or failed is None or time.monotonic() - failed.synced_at <= self.stale_after:
            return None
        return {"after": self.stale_after, "last_synced": failed.last_synced}
