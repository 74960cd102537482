"""``notifications/resources/list_changed`` when a refresh changes what ``resources/list`` says.

A refresh (SIGHUP, ``--refresh-interval``, a follower's registry sync before it) may hold a new release,
stop holding one, or move which release new runs start on: the resource listing then says otherwise.
Rather than have a harness poll the listing, the server declares ``resources.listChanged`` and tells each
connected client once per change; a refresh that changes nothing sends nothing.

Who is told: every handshake-era (2025-11-25) connection that can carry a server notification - the
stdio client, and over Streamable HTTP with ``--http-sessions`` each session (on its ``GET`` stream) -
and, over stdio, a 2026-07-28 client on the ``subscriptions/listen`` stream it opens (that era delivers
change notifications only there; ``prompts/list`` follows the active releases too, so a change of those
is also a prompts change). Stateless HTTP carries no server notification, so it declares none; nor does
2026-07-28 over HTTP, whose listen streams this server does not serve.

Each handshake-era connection, once initialized, runs one watcher: the ``notifications/initialized`` handler, which the
SDK runs in the connection's own task group, so it ends with the connection and nothing is kept for a
client that went away. Watchers wait on an :class:`~mcp.server.subscriptions.InMemorySubscriptionBus`
that :meth:`ListingWatch.refreshed` publishes to after each refresh; the SDK's
:class:`~mcp.server.subscriptions.ListenHandler` serves listen streams from the same bus.
"""

from __future__ import annotations

import contextlib
from typing import Any

import anyio
import mcp_types as types
from mcp.server import InitializationOptions, NotificationOptions, Server, ServerRequestContext
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    PromptsListChanged,
    ResourcesListChanged,
    ServerEvent,
)

from .logs import get_logger
from .provider import ReleaseProvider

_log = get_logger("transport")
_Listing = tuple[frozenset[str], frozenset[str]]


class ListingServer(Server[Any]):
    """The SDK server declaring ``resources.listChanged`` to handshake-era clients (a :class:`ListingWatch`
    tells them); 2026-07-28 capabilities are the SDK's own, derived from what is served."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        told = notification_options or NotificationOptions(resources_changed=True)
        return super().create_initialization_options(told, experimental_capabilities, extensions)


class ListingWatch:
    """Tells every watching connection when a refresh changed the held releases or where new runs start."""

    def __init__(self, provider: ReleaseProvider, *, listen: bool = False) -> None:
        self._provider = provider
        self._bus = InMemorySubscriptionBus()
        self._seen = self._listing()
        # ``listen`` (stdio): 2026-07-28 clients' subscriptions/listen streams, served from the same bus
        self.listen = ListenHandler(self._bus) if listen else None

    def _listing(self) -> _Listing:
        """What the resource listing depends on: the held releases, and which of them new runs start on."""
        held = frozenset(self._provider.held)
        return held, frozenset(loaded.digest for loaded in self._provider.actives.values())

    def attach(self, app: Server[Any]) -> None:
        """Every initialized handshake-era connection of ``app`` watches from now on."""
        app.add_notification_handler("notifications/initialized", types.NotificationParams, self._watch)

    async def refreshed(self) -> bool:
        """After a refresh: whether the listing changed; if so every watching connection is told."""
        now = self._listing()
        if now == self._seen:
            return False
        actives_moved = now[1] != self._seen[1]
        self._seen = now
        _log.info("resource listing changed: notifying connected clients")
        await self._bus.publish(ResourcesListChanged())
        if actives_moved:  # prompts are the active releases' (prompts.py)
            await self._bus.publish(PromptsListChanged())
        return True

    async def _watch(self, ctx: ServerRequestContext[Any], params: types.NotificationParams) -> None:
        """Until the connection ends: one ``notifications/resources/list_changed`` per change published."""
        send, changes = anyio.create_memory_object_stream[ServerEvent](1)

        def deliver(event: ServerEvent) -> None:
            if not isinstance(event, ResourcesListChanged):  # declared to this era: resources only
                return
            with contextlib.suppress(anyio.WouldBlock):  # one change not yet sent says as much as several
                send.send_nowait(event)

        unsubscribe = self._bus.subscribe(deliver)
        try:
            async with changes:
                async for _ in changes:
                    await ctx.session.send_resource_list_changed()
        finally:
            unsubscribe()
            send.close()
