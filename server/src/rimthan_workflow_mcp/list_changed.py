"""List-changed notifications when a refresh changes what ``resources/list`` (and ``prompts/list``) says.

A refresh (SIGHUP, ``--refresh-interval``, a follower's registry sync before it) may hold a new release,
stop holding one, or move which release new runs start on: the resource listing then says otherwise, and
when new runs start elsewhere so does the prompt listing (prompts are the active releases' own, prompts.py).
Rather than have a harness poll the listings, the server declares ``resources.listChanged`` and
``prompts.listChanged`` and tells each connected client once per change; a refresh that changes nothing
sends nothing.

Who is told, per era:

- 2025-11-25 (handshake): every connection that can carry a server notification - the stdio client, and
  over Streamable HTTP with ``--http-sessions`` each session (on its ``GET`` stream) - gets
  ``notifications/resources/list_changed`` and ``notifications/prompts/list_changed``. Stateless HTTP
  carries no server notification to this era, so it declares none.
- 2026-07-28: a client is told on the ``subscriptions/listen`` stream it opens (that era delivers change
  notifications only there), over stdio and over HTTP (the SDK answers a listen request with an SSE
  stream even when calls are answered in plain JSON), sessions or not.

Declared is exactly what is sent (:class:`ListingServer`): never ``tools.listChanged`` (the four tools never
change) nor ``resources.subscribe`` (every resource is immutable: no ``resources/updated`` is ever sent); a
listen stream's acknowledgment does not honor those kinds either (:class:`ListingListen`).

Each handshake-era connection, once initialized, runs one watcher: the ``notifications/initialized`` handler, which the
SDK runs in the connection's own task group, so it ends with the connection and nothing is kept for a
client that went away. Watchers wait on an :class:`~mcp.server.subscriptions.InMemorySubscriptionBus`
that :meth:`ListingWatch.refreshed` publishes to after each refresh; the SDK's
:class:`~mcp.server.subscriptions.ListenHandler` serves listen streams from the same bus.
"""

from __future__ import annotations

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
from mcp_types import INTERNAL_ERROR, SubscriptionsListenRequestParams, SubscriptionsListenResult
from rimthan_workflow_registry.errors import FailureCode, RegistryError

from .logs import get_logger
from .provider import ReleaseProvider
from .rpc_errors import failure_error

_log = get_logger("transport")
_Listing = tuple[frozenset[str], frozenset[str]]
_TOLD = (ResourcesListChanged, PromptsListChanged)  # the only events published (ListingWatch.refreshed)


class ListingServer(Server[Any]):
    """The SDK server declaring the list changes that are sent, in each era (see module).

    ``handshake_told`` (set by :meth:`ListingWatch.attach`): handshake-era connections are told, so
    ``resources.listChanged`` and ``prompts.listChanged`` are declared to them; 2026-07-28 declarations are the
    SDK's, derived from whether ``subscriptions/listen`` is served. Either way, minus what is never sent."""

    handshake_told = False

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        told = self.handshake_told
        options = notification_options or NotificationOptions(resources_changed=told, prompts_changed=told)
        return super().create_initialization_options(options, experimental_capabilities, extensions)

    def get_capabilities(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
        *,
        protocol_version: str | None = None,
    ) -> types.ServerCapabilities:
        """The SDK's, without ``tools.listChanged`` and ``resources.subscribe``: nothing either would promise is
        ever sent (the SDK declares both at 2026-07-28 whenever ``subscriptions/listen`` is served)."""
        declared = super().get_capabilities(
            notification_options, experimental_capabilities, extensions, protocol_version=protocol_version
        )
        tools, resources = declared.tools, declared.resources
        return declared.model_copy(
            update={
                "tools": tools and tools.model_copy(update={"list_changed": False}),
                "resources": resources and resources.model_copy(update={"subscribe": False}),
            }
        )


class ListingListen(ListenHandler):
    """The SDK's ``subscriptions/listen`` handler, its acknowledgment honoring only the kinds this server sends:
    resources and prompts list changes (not tool list changes, nor resource subscriptions: see module).

    Its own count of open streams refuses one past ``max_subscriptions`` first, coded (``listen_limit_reached``,
    with a next step), where the SDK would answer a bare "Subscription limit reached"."""

    def __init__(self, bus: InMemorySubscriptionBus, *, max_subscriptions: int) -> None:
        super().__init__(bus, max_subscriptions=max_subscriptions)
        self._bound = max_subscriptions
        self._open = 0

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], params: SubscriptionsListenRequestParams
    ) -> SubscriptionsListenResult:
        if self._open >= self._bound:
            _log.info("listen stream refused: the bound is reached", extra={"listen_streams": self._open})
            full = RegistryError(
                FailureCode.LISTEN_LIMIT_REACHED, f"{self._open} listen streams are open, the most this server serves"
            )
            raise failure_error(INTERNAL_ERROR, full)
        sent = params.notifications.model_copy(update={"tools_list_changed": None, "resource_subscriptions": None})
        self._open += 1
        try:
            return await super().__call__(ctx, params.model_copy(update={"notifications": sent}))
        finally:
            self._open -= 1


class ListingWatch:
    """Tells every watching connection when a refresh changed the held releases or where new runs start."""

    def __init__(self, provider: ReleaseProvider, *, handshake: bool, max_listen_streams: int) -> None:
        self._provider = provider
        self._bus = InMemorySubscriptionBus()
        self._seen = self._listing()
        self._handshake = handshake  # handshake-era connections can carry a notification (stdio, HTTP sessions)
        # 2026-07-28 clients' subscriptions/listen streams, served from the same bus
        self.listen = ListingListen(self._bus, max_subscriptions=max_listen_streams)

    def _listing(self) -> _Listing:
        """What the resource listing depends on: the held releases, and which of them new runs start on."""
        held = frozenset(self._provider.held)
        return held, frozenset(loaded.digest for loaded in self._provider.actives.values())

    def attach(self, app: ListingServer) -> None:
        """Every initialized handshake-era connection of ``app`` watches from now on (if it can be told)."""
        if self._handshake:
            app.handshake_told = True
            app.add_notification_handler("notifications/initialized", types.NotificationParams, self._watch)

    def close_listen_streams(self) -> None:
        """End every open listen stream with its result (the spec's graceful close): the server is stopping."""
        self.listen.close()

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
        """Until the connection ends: one ``notifications/resources/list_changed`` (or ``prompts/``) per change."""
        pending: set[type[ServerEvent]] = set()  # a change not yet sent says as much as several of its kind
        send, changes = anyio.create_memory_object_stream[ServerEvent](len(_TOLD))

        def deliver(event: ServerEvent) -> None:
            if type(event) in _TOLD and type(event) not in pending:
                pending.add(type(event))
                send.send_nowait(event)

        unsubscribe = self._bus.subscribe(deliver)
        try:
            async with changes:
                async for event in changes:
                    pending.discard(type(event))
                    if isinstance(event, PromptsListChanged):
                        await ctx.session.send_prompt_list_changed()
                    else:
                        await ctx.session.send_resource_list_changed()
        finally:
            unsubscribe()
            send.close()
