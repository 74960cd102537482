"""HTTP sessions (``--http-sessions``): at the cap, the session idle the longest makes room; one request per id.

The SDK's session manager keeps at most ``MAX_SESSIONS`` sessions, each until
it has gone ``IDLE_SECONDS`` without a request in flight (an open ``GET``
stream counts as one), and while full it refuses every new session with 503.
So one client that sent ``MAX_SESSIONS`` initialize requests and walked away
(no connection held: about a minute from one connection) locked every other
client out for half an hour. Here a full manager closes the session that has
been idle the longest and admits the new one; that session's client gets
``404 Session not found`` on its next request, which the Streamable HTTP spec
tells it to answer with a new initialize (a run's state is in its tokens:
nothing is lost). Only when no session is idle - each has a request in flight
or a stream open, so each holds a connection - is a new one refused, as before.

A request whose id is the id of one still being answered in its session (the
SDK keys a session's answers by ``str(id)``, so ``7`` and ``"7"`` are one id)
is refused with 400 and a one-line JSON-RPC Invalid Request naming the id:
the SDK gave the second request the first one's answer slot, so the first
waited for ever: of 40 such requests at once in one session, 37 were still
unanswered after 15 s, and a session with a request in flight is never idle,
so it was never closed either. The id is read from the body the SDK has
already parsed, parsed once more with Python's parser, which reads an ``id``
key written twice as the SDK's does (its last value): a scan of the outermost
keys read the first, so requests whose last id was one in flight got past.

The sessions are kept in the order their last request ended, so the one to
close is found from the front, past the busy ones, not by a scan of all of
them. This reaches into the SDK's manager (``_admit_session``,
``_server_instances``, ``_session_owners``) and a transport
(``_validate_request_headers``, the last step before a request is dispatched,
and ``idle_scope``, whose deadline is infinite while a request is in flight);
``tests/server/test_http_sessions_room.py`` fails if they change.

Only an initialize opens a session. The SDK's manager admitted a session for
every request without an ``Mcp-Session-Id`` before its transport read it, so a
``GET``, a ``DELETE`` or a ``POST`` that is no initialize (or no JSON) was
refused 400 with a new session's id in its headers, and while the table was
full each such request closed a real client's idle session to make room for
a session it then dropped. Such a request is now answered by a transport of
no session (the same checks, the same 400, no ``Mcp-Session-Id``), read as
the SDK reads it, and no session is admitted or closed for it (this replaces
the manager's ``_handle_stateful_request``). Whether a request names a session
is read from the head ``http_bounds`` has read once (``head_of``): its headers
are not scanned again.
"""

from __future__ import annotations

import json
import math
from collections import OrderedDict, deque

import pydantic_core
from mcp.server.auth.middleware.bearer_auth import AuthorizationContext
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types import JSONRPCRequest, jsonrpc_message_adapter
from starlette.requests import Request
from starlette.types import Message, Receive, Scope, Send

from .http_bounds import head_of
from .http_shape import BAD_REQUEST, SESSION_HEADER, error_body, json_headers
from .logs import get_logger
from .message_shape import invalid_request

MAX_SESSIONS = 10_000  # the SDK's default, named here: about 400 MB of sessions idle at once
IDLE_SECONDS = 30 * 60.0  # the SDK's default: a session no one has used for this long is closed

IN_FLIGHT_ID = "rimthan.in_flight_id"  # the scope key a request's id is kept under while it is answered
NO_SESSION = "no-session"  # the id of the transport that answers a request opening none (never sent)
_log = get_logger("transport")


def make_room(manager: StreamableHTTPSessionManager) -> None:
    """Have ``manager`` close its longest-idle session rather than refuse a new one while it is full."""
    room = _SessionRoom(manager)
    setattr(manager, "_admit_session", room.admit)  # noqa: B010 (the instance's own method replaced)
    setattr(manager, "_handle_stateful_request", _OnlyInitializeOpens(manager))  # noqa: B010


class _OnlyInitializeOpens:
    """The manager's stateful requests: one without a session id reaches it only if it is an initialize."""

    def __init__(self, manager: StreamableHTTPSessionManager) -> None:
        self._manager = manager
        self._handle = manager._handle_stateful_request

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if SESSION_HEADER in head_of(scope).first:  # the head BoundedRequests read: not scanned again
            await self._handle(scope, receive, send)
            return
        received = await _body_messages(receive) if scope["method"] == "POST" else []
        replay = _replaying(received, receive)
        if _is_initialize(received):
            await self._handle(scope, replay, send)
        else:
            await self._refuse(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The SDK's transport's answer (its checks, in its order), by one that holds no session and names none."""
        manager = self._manager
        transport = StreamableHTTPServerTransport(
            mcp_session_id=NO_SESSION,
            is_json_response_enabled=manager.json_response,
            security_settings=manager.security_settings,
        )
        async with transport.connect():
            try:
                await transport.handle_request(scope, receive, _naming_no_session(send))
            finally:
                await transport.terminate()


async def _body_messages(receive: Receive) -> list[Message]:
    """A POST's body messages (the SDK's size bound has read and kept them already: no wait, no second copy)."""
    received: list[Message] = []
    while True:
        message = await receive()
        received.append(message)
        if message["type"] != "http.request" or not message.get("more_body", False):
            return received


def _replaying(received: list[Message], receive: Receive) -> Receive:
    pending = deque(received)

    async def replay() -> Message:
        return pending.popleft() if pending else await receive()

    return replay


def _is_initialize(received: list[Message]) -> bool:
    """Whether the body is an initialize request, read as the SDK's transport reads it."""
    body = b"".join(m.get("body", b"") for m in received if m["type"] == "http.request")
    try:
        message = jsonrpc_message_adapter.validate_python(pydantic_core.from_json(body), by_name=False)
    except ValueError:  # (pydantic's ValidationError is one)
        return False
    return isinstance(message, JSONRPCRequest) and message.method == "initialize"


def _naming_no_session(send: Send) -> Send:
    async def without_id(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = [(k, v) for k, v in message.get("headers", []) if bytes(k).lower() != SESSION_HEADER]
            message = {**message, "headers": headers}
        await send(message)

    return without_id


class _SessionRoom:
    """A manager's sessions in the order their last request ended, the least recently used first."""

    def __init__(self, manager: StreamableHTTPSessionManager) -> None:
        self._manager = manager
        self._admit = manager._admit_session
        self._by_use: OrderedDict[str, StreamableHTTPServerTransport] = OrderedDict()

    def admit(self, requestor: AuthorizationContext | None) -> StreamableHTTPServerTransport | None:
        cap = self._manager.max_sessions
        if cap is not None and len(self._manager._server_instances) >= cap:
            self._close_longest_idle()
        transport = self._admit(requestor)
        if transport is not None and transport.mcp_session_id is not None:
            self._track(transport.mcp_session_id, transport)
        return transport

    def _track(self, key: str, transport: StreamableHTTPServerTransport) -> None:
        """Keep ``transport`` in order of use from now on, one request per id in flight, forgotten once terminated."""
        handle, terminate, screen = transport.handle_request, transport.terminate, transport._validate_request_headers
        self._by_use[key] = transport
        answering: set[str] = set()

        async def handled(scope: Scope, receive: Receive, send: Send) -> None:
            try:
                await handle(scope, receive, send)
            finally:
                answering.discard(scope.pop(IN_FLIGHT_ID, None))
                if key in self._by_use:
                    self._by_use.move_to_end(key)

        async def screened(request: Request, send: Send) -> bool:
            request_id = await _post_request_id(request)
            if request_id is not None and request_id in answering:
                await _refuse_repeated_id(request_id, send)
                return False
            if request_id is not None:
                answering.add(request_id)
                request.scope[IN_FLIGHT_ID] = request_id
            return await screen(request, send)

        async def terminated() -> None:
            self._by_use.pop(key, None)
            await terminate()

        setattr(transport, "handle_request", handled)  # noqa: B010
        setattr(transport, "_validate_request_headers", screened)  # noqa: B010
        setattr(transport, "terminate", terminated)  # noqa: B010

    def _close_longest_idle(self) -> None:
        """Forget the session idle the longest (its id answers 404 from now on) and end its server task."""
        for key, transport in self._by_use.items():
            if _idle(transport) and self._manager._server_instances.get(key) is transport:
                break
        else:
            return
        del self._by_use[key]
        self._manager._server_instances.pop(key, None)
        self._manager._session_owners.pop(key, None)
        assert transport.idle_scope is not None  # (_idle found it)
        transport.idle_scope.cancel()  # its server task ends and terminates the transport
        _log.info("session closed to make room", extra={"sessions": len(self._manager._server_instances) + 1})


def _idle(transport: StreamableHTTPServerTransport) -> bool:
    """Whether ``transport`` has no request in flight (and is not already ending)."""
    scope = transport.idle_scope
    return scope is not None and not scope.cancel_called and math.isfinite(scope.deadline)


async def _post_request_id(request: Request) -> str | None:
    """A POSTed request's id as the SDK keys its answer (``str(id)``), from the body it already read; else None.

    The SDK has parsed and accepted this body before it asks for its headers to be checked, so it parses here too,
    once, and reads as the SDK's parser does (an ``id`` key written twice: its last value)."""
    if request.method != "POST":
        return None
    try:
        message = json.loads(await request.body())  # (read and kept by the SDK: not read again)
    except (ValueError, RecursionError):  # (none the SDK accepts: its parser refuses deeper nesting)
        return None
    found = message.get("id") if isinstance(message, dict) and "method" in message else None
    return None if found is None else str(found)


async def _refuse_repeated_id(request_id: str, send: Send) -> None:
    words = (
        f"a request with id {json.dumps(request_id)} is still being answered in this session: "
        "give each request an id of its own (MCP: never one used before in the session)"
    )
    _log.info("request refused: its id is in flight", extra={"id": request_id[:64]})
    body = error_body(invalid_request(words))
    await send({"type": "http.response.start", "status": BAD_REQUEST, "headers": json_headers(body)})
    await send({"type": "http.response.body", "body": body})
