"""The verifier's resource listing as the bridge keeps it: read once per connection, read again once it changed.

The verifier lists every file of every held release as a resource; the bridge reads the listing only for the
workflows a model may start (:mod:`.offered`: the manifest resources' ``_meta``). So it keeps what it read for
the connection, and reads again only after the verifier said its listing changed (a release installed,
withdrawn, or new runs moved to another): ``notifications/resources/list_changed`` on a 2025-11-25 connection
(the SDK client's message handler), a resources list-changed event on the ``subscriptions/listen`` stream a
2026-07-28 connection opens for it (that era sends change notifications only there). A connection on which no
change would be told (the verifier declares none, refuses the listen stream, or does not acknowledge it within
``ACK_SECONDS``) keeps nothing: each list is read afresh, as before. So does a 2025-11-25 connection to a URL (the
link says which it holds: ``over_url``): its notifications come on an HTTP session's own stream, whose loss (the
verifier restarted) the SDK client does not tell. A listen stream lost once acknowledged (a URL verifier restarted
on its port: the sessionless connection serves on, its stream is gone) drops what was kept, and is opened again on
the next use of the listing, which waits for it: acknowledged, the listing read then is kept again; refused or not
acknowledged in time, the connection keeps nothing from then on. A new connection (a restarted child, a URL
connected again) starts with nothing kept.
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

    over_url: bool  # the connection is to a URL, not a child over stdio (the link says which: see the module)
    watched: bool = False
    _metas: list[dict[str, Any]] | None = field(default=None, repr=False)
    _changes: int = 0  # changes told so far: a listing read across one is not kept
    _wanted: anyio.Event | None = field(default=None, repr=False)  # a lost stream waits for the listing's next use
    _opening: anyio.Event | None = field(default=None, repr=False)  # set once the stream opened again is answered

    def changed(self) -> None:
        """The verifier said its listing changed: the next read asks it again."""
        self._metas = None
        self._changes += 1

    async def read(self, fetch: MetaLister) -> list[dict[str, Any]]:
        """The kept ``_meta``, or ``fetch()``'s, kept if the connection was watched throughout and nothing changed."""
        if self._metas is not None:
            return list(self._metas)
        await self._listened_again()
        watched, changes = self.watched, self._changes
        metas = await fetch()
        if watched and self.watched and changes == self._changes:
            self._metas = metas
        return list(metas)

    async def _listened_again(self) -> None:
        """A listen stream lost once followed is opened again (by :meth:`watch`), once per loss, and waited for."""
        wanted, self._wanted = self._wanted, None
        if wanted is not None:
            self._opening = anyio.Event()
            wanted.set()
        if self._opening is not None:
            await self._opening.wait()

    async def on_message(self, message: object) -> None:
        """The SDK client's message handler: a 2025-11-25 ``notifications/resources/list_changed``."""
        if isinstance(message, types.ResourceListChangedNotification):
            self.changed()

    async def watch(self, client: Client, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Until the connection ends: whether a change would be told, and each change (started in the link's task
        group: started once that is known, so the connection's first list is kept too)."""
        if client.protocol_version not in MODERN_PROTOCOL_VERSIONS:  # (over a URL: see the module)
            declared = client.server_capabilities.resources
            self.watched = bool(declared and declared.list_changed) and not self.over_url
            task_status.started()
            return
        while await self._follow(client, task_status):  # (lost once followed: opened again on the next read)
            task_status = anyio.TASK_STATUS_IGNORED
            if self._wanted is not None:
                await self._wanted.wait()

    async def _follow(self, client: Client, task_status: TaskStatus[None]) -> bool:
        """One listen stream, each change on it told, until it ends: whether it was followed (acknowledged, the
        changes honoured) before it ended. Refused or not acknowledged within ``ACK_SECONDS``: never followed."""
        answered = followed = False
        try:
            with anyio.CancelScope(deadline=anyio.current_time() + ACK_SECONDS) as acking:
                async with client.listen(resources_list_changed=True) as changes:
                    acking.deadline = math.inf
                    self.watched = followed = bool(changes.honored.resources_list_changed)
                    answered = self._answered(task_status)
                    async for _ in changes:
                        self.changed()
        except Exception as exc:  # (refused or lost: nothing is kept until a stream is followed again)
            _log.info("the verifier's listing changes cannot be followed: %r", exc)
        finally:
            self.watched = False
            self.changed()
            self._wanted = anyio.Event() if followed else None
            if not answered:  # (refused, or not acknowledged in time: the connection serves on, unwatched)
                self._answered(task_status)
        return followed

    def _answered(self, task_status: TaskStatus[None]) -> bool:
        """The listen stream was answered (acknowledged, refused or given up): the connection and a read waiting
        for it go on."""
        task_status.started()
        opening, self._opening = self._opening, None
        if opening is not None:
            opening.set()
        return True
