"""``GET /healthz``: what a load balancer asks a replica before sending it calls.

A replica listens only once it holds a verified release (``serve`` loads or
pulls one before it binds, and refuses to start without one), so a replica
that answers is serving: ``200`` with ``{"status": "serving", "active":
[...]}``, the release each catalogue serves, and ``not_activated`` (only when there is one): each newer release
the releases directory holds that the last start or refresh did not activate, and why (a full state directory; not a
failed sync, so no part of the stale rule: the registry was reached). A follower (``--releases-from``)
adds ``sync_failed``: ``null``, or why its last sync failed (or a pull in it)
(``code``, ``message``, ``since``: when syncs began failing), and ``refused`` (only when there is one): each
publish the last sync kept out (``reference``, ``code``, ``message``: a bad publish is no failed sync), as information:
it still answers ``200``, serving what it holds, unless the operator opted
in with ``serve --stale-after SECONDS``: once syncs have failed and the last
one that did not is more than SECONDS ago (kept across restarts: :mod:`.last_sync`; with none kept, the
follower began that long ago), or a sync has been under way for more than SECONDS (a registry that hangs is not
waited for; an ordinary sync is no trouble, however long after the last one it begins), it answers ``503`` with
``"status": "stale"``, the failure (code, since) and ``stale`` (``after``,
``last_synced``, ``sync_under_way_since``), so a balancer drains a replica that lost its registry; the
first sync that succeeds makes it ``200`` again. Each change is logged once (a warning, then an info line), when
it happens, whether or not anything probes: :meth:`Health.watch` judges again as each sync begins and ends (the
follower tells the event loop) and at the moment staleness would begin (one timer, re-armed at each sync); a
probe answers what was judged last and logs nothing. After
SIGTERM it stops
listening at once (calls in flight are drained), so a check then fails to
connect. The answer names releases, so the ``Host`` (and ``Origin``) check of
the MCP endpoint applies: a name not allowed gets the same ``421`` / ``403``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import TYPE_CHECKING, Any

from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from rimthan_workflow_registry.errors import FailureCode
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from .loading import utc_now
from .logs import get_logger

if TYPE_CHECKING:
    from .provider import ReleaseProvider, SyncStatus

HEALTH_PATH = "/healthz"
HEALTH_METHODS = ("GET", "HEAD")
_log = get_logger("health")
# a sync under way that has not ended: the registry took the connection and does not answer (its own code, when
# it ends at the sync's deadline)
_HANGS = FailureCode.OCI_REGISTRY_ERROR.value
_PAST = 0.01  # seconds past the moment staleness begins at which its timer fires
_CHECK = "check the registry and the network to it; the replica serves what it holds meanwhile"


class Health:
    """The ``/healthz`` answer of one replica (see module)."""

    def __init__(
        self, provider: ReleaseProvider, settings: TransportSecuritySettings, stale_after: float | None = None
    ) -> None:
        self.provider = provider
        self.security = TransportSecurityMiddleware(settings)
        self.stale_after = stale_after  # serve --stale-after: seconds past the last good sync before 503
        self._stale_since: str | None = None  # when an answer last turned 503 (UTC; None: the last was 200)
        self._judged: dict[str, Any] | None = None  # what :meth:`_judge` last found: how stale (None: not stale)
        self._timer: asyncio.TimerHandle | None = None  # at the moment staleness would begin

    def watch(self) -> None:
        """With ``--stale-after`` on a follower: log each change as it happens (call on the running event loop).

        The follower tells the loop as each sync begins and ends (from its thread); each time, and when the timer
        set for the moment the last good sync turns SECONDS old fires, the replica is judged again. Nothing wakes
        while nothing changes: the timer is set again only at a sync.
        """
        if self.stale_after is None or self.provider.watch_syncs is None:
            return
        loop = asyncio.get_running_loop()

        def told() -> None:  # in the syncing thread
            with contextlib.suppress(RuntimeError):  # the loop closed: the server has stopped
                loop.call_soon_threadsafe(self._judge)

        self.provider.watch_syncs(told)
        self._judge()

    def _judge(self) -> None:
        """The one place the answer is decided and a change of it said; sets the timer for when staleness would
        begin (if it is ahead). A probe answers what was judged last: it never says a change itself."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        status = self.provider.sync_status() if self.provider.sync_status is not None else None
        if status is None or self.stale_after is None:
            return
        now = time.monotonic()
        begins = status.stale_at(self.stale_after)
        stale = self._stale(status) if begins is not None and now > begins else None
        self._say_change(status, stale)
        self._judged = stale
        if stale is None and begins is not None:  # just past it, so the judgement then finds it past
            self._timer = asyncio.get_running_loop().call_later(begins - now + _PAST, self._judge)

    def asks(self, scope: Scope) -> bool:
        return scope["path"] == HEALTH_PATH and scope["method"] in HEALTH_METHODS

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        refused = await self.security.validate_request(Request(scope, receive), is_post=False)
        if refused is not None:
            await refused(scope, receive, send)
            return
        active = sorted(loaded.release.release_id for loaded in self.provider.actives.values())
        said: dict[str, Any] = {"status": "serving", "active": active}
        if self.provider.not_activated:  # a newer release held but not activated, and why (its code)
            said["not_activated"] = [rejection.held_back() for rejection in self.provider.not_activated]
        status = self.provider.sync_status() if self.provider.sync_status is not None else None
        if status is not None:  # a follower: why its last sync failed, if it did
            said["sync_failed"] = status.failure.to_dict() if status.failure is not None else None
            if status.refused:  # publishes kept out (not a failed sync): why this replica serves an older release
                said["refused"] = [rejection.refused_publish() for rejection in status.refused]
        stale = self._judged
        if stale:
            said = {**said, "status": "stale", "stale": stale}
        body = json.dumps(said).encode("utf-8")
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": 503 if stale else 200, "headers": headers})
        await send({"type": "http.response.body", "body": body if scope["method"] == "GET" else b""})

    def _stale(self, status: SyncStatus) -> dict[str, Any]:
        """What a stale answer says of the syncs: SECONDS, the last good sync, the sync under way."""
        return {"after": self.stale_after, "last_synced": status.last_synced, "sync_under_way_since": status.under_way}

    def _say_change(self, status: SyncStatus | None, stale: dict[str, Any] | None) -> None:
        """One warning when the answer turns 503, one info line when it turns 200 again; nothing per probe."""
        if status is None or (stale is not None) == (self._stale_since is not None):
            return
        if stale is None:
            _log.info("fresh again; /healthz answers 200", extra={"registry": status.registry,
                      "stale_since": self._stale_since, "last_synced": status.last_synced})  # fmt: skip
            self._stale_since = None
            return
        self._stale_since = utc_now()
        failed = status.failure
        code, since = (failed.error.get("code"), failed.since) if failed is not None else (_HANGS, status.under_way)
        _log.warning(
            "stale; /healthz answers 503",
            extra={"registry": status.registry, "code": code, "since": since, **stale,
                   "next": f"the last good sync is over {self.stale_after:g}s old: {_CHECK}"},
        )  # fmt: skip
