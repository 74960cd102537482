"""The verifier's resource listing as the bridge keeps it: read once per connection, read again once it changed.

The verifier lists every file of every held release as a resource; the bridge reads the listing only for the
workflows a model may start (:mod:`.offered`: the manifest resources' ``_meta``). So it keeps what it read for
the connection, and reads again only after the verifier said its listing changed (a release installed,
withdrawn, or new runs moved to another): ``notifications/resources/list_changed`` on a 2025-11-25 connection
(the SDK client's message handler), a resources list-changed event on the ``subscriptions/listen`` stream a
2026-07-28 connection opens for it (that era sends change notifications only there). A connection on which no
change would be told (the verifier declares none, refuses the listen stream, does not acknowledge it within
``ACK_SECONDS``, or the stream ends) keeps nothing: each list is read afresh, as before. So does a 2025-11-25
connection to a URL: its notifications come on an HTTP session's own stream, whose loss (the verifier restarted)
the SDK client does not tell. A new connection (a restarted child, a URL connected again) starts with
nothing kept.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
from anyio.abc import TaskStatus
from mcp import Client
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from .protocol import MetaLister

ACK_SECONDS = 10.0
"""How long a connection waits for the verifier to acknowledge its listen stream; then it serves on unwatched."""
_log = logging.getLogger(__name__)


@dataclass
class KeptListing:
    """One verifier connection's resource ``_meta``, kept while a change would be told (``watched``)."""

    watched: bool = False
    _metas: list[dict[str, Any]] | None = field(default=None, repr=False)
    _changes: int = 0  # changes told so far: a listing read across one is not kept

    def changed(self) -> None:
        """The verifier said its listing changed: the next read asks it again."""
        self._metas = None
        self._changes += 1

    async def read(self, fetch: MetaLister) -> list[dict[str, Any]]:
        """The kept ``_meta``, or ``fetch()``'s, kept if the connection was watched throughout and nothing changed."""
        if self._metas is not None:
            return list(self._metas)
        watched, changes = self.watched, self._changes
        metas = await fetch()
        if watched and self.watched and changes == self._changes:
            self._metas = metas
        return list(metas)

    async def on_message(self, message: object) -> None:
        """The SDK client's message handler: a 2025-11-25 ``notifications/resources/list_changed``."""
        if isinstance(message, types.ResourceListChangedNotification):
            self.changed()

    async def watch(self, client: Client, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Until the connection ends: whether a change would be told, and each change (started in the link's task
        group: started once that is known, so the connection's first list is kept too)."""
        if client.protocol_version not in MODERN_PROTOCOL_VERSIONS:  # (over a URL: see the module)
            declared = client.server_capabilities.resources
            self.watched = bool(declared and declared.list_changed) and not isinstance(client.server, str)
            task_status.started()
            return
        started = False
        try:
            with anyio.CancelScope(deadline=anyio.current_time() + ACK_SECONDS) as acking:
                async with client.listen(resources_list_changed=True) as changes:
                    acking.deadline = math.inf
                    self.watched = bool(changes.honored.resources_list_changed)
                    task_status.started()
                    started = True
                    async for _ in changes:
                        self.changed()
        except Exception as exc:  # (refused or lost: nothing is kept from now on; the list is read on each use)
            _log.info("the verifier's listing changes cannot be followed: %r", exc)
        finally:
            self.watched = False
            self.changed()
        if not started:  # (refused, or not acknowledged in time: the connection serves on, unwatched)
            task_status.started()
