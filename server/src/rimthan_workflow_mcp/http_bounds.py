"""Bounds on what HTTP clients can hold: the time to send a request, and the requests in flight.

uvicorn (h11) waits for ever for a request head that never ends and for a
body that is never finished, and a stateless ``GET /mcp`` holds an SSE stream
that nothing is ever sent on. Each is a connection (and its buffers: a body of
up to ``limits.MAX_REQUEST_BODY_BYTES``) a client could hold without end. Here:

- :class:`HeadDeadlineProtocol`: uvicorn's h11 protocol that closes a
  connection whose request line and headers have not all arrived within
  ``HEAD_SECONDS`` of connecting, or of the first byte of the next request on
  a kept-alive connection.
- :class:`BoundedRequests`: an ASGI wrapper. A stateless server answers ``GET``
  and ``DELETE`` with 405 and ``Allow: POST`` (the Streamable HTTP spec's
  answer when it offers no SSE stream); a body not received in full within
  ``BODY_SECONDS`` of the head gets 408 and the connection is closed. Every
  refusal made here (405, 408, 415, 503) carries a JSON-RPC ``Invalid
  Request`` (``id`` null: the request was not read) a client can read, as the
  SDK's refusals replaced below do: one body builder (``http_shape``).
- Every record logged while a request is handled names its client (``logs.PEER``).
- A request's head is read once (:func:`read_head`) and kept in the scope's state for the app behind
  (:func:`head_of`: the session room reads ``Mcp-Session-Id`` from it).
- A head h11 refuses (not HTTP/1.1, or past its 16 KiB bound) gets a JSON-RPC
  error too (uvicorn sent a bare text line), 431 for one too large.
- A body past ``limits.MAX_REQUEST_BODY_BYTES`` (declared by ``Content-Length``
  or grown past it in chunks) gets the SDK's 413, unread past the bound; here
  its body is a JSON-RPC error a client can read (``Invalid Request``, ``id``
  null: the request was not read, naming the bound) instead of a bare
  ``text/plain`` line; so is the SDK's DNS-rebinding refusal of a ``Host``
  (421) or an ``Origin`` (403) not allowed, and its 406 for an ``Accept``
  without what the answer needs (on the 2026-07-28 path it had no body).
  After a 413 the connection stays open: uvicorn reads what the client still
  sends of the body and discards it (closing at once reset the connection
  under a client still sending, which never read the answer), for
  at most ``LINGER_SECONDS`` (:class:`HeadDeadlineProtocol`; uvicorn's own
  keep-alive timer, 5 s, stops at the first byte that comes).
- A body that is not one JSON-RPC message (a batch, a request whose id is
  not a string or an integer) gets a one-line ``Invalid Request``
  (:mod:`http_shape`); a request without an id, accepted as a notification,
  is named in the log once per session.
- A request sending one of ``ONE_VALUE_HEADERS`` (``Content-Type``, the MCP
  routing headers, ``Mcp-Session-Id``) twice gets 400 with a JSON-RPC error,
  unread: a first-copy and a last-copy reader (the SDK's era routing, a proxy)
  would disagree.
- A request whose ``MCP-Protocol-Version`` header is empty or names no version
  the SDK serves gets 400 with the JSON-RPC ``Unsupported protocol version``
  (-32022, ``data``: ``supported`` and ``requested``), unread, naming the
  header, its value (cut at ``SHOWN_VERSION`` characters) and the versions
  served (``SUPPORTED_VERSIONS``, the SDK's own lists). The SDK sent such a
  request down the 2026-07-28 path, which answered 400 about a missing
  ``params._meta``.
- A ``POST`` whose media type is not ``application/json`` (compared without
  case, as RFC 9110 says) gets 415 with a JSON-RPC error, unread (the SDK
  answered a missing or ``text/plain`` one with a bare ``text/plain`` 400, and
  ``APPLICATION/JSON`` with 415).
- ``MAX_REQUESTS_IN_FLIGHT``: a request arriving while that many are being
  received or answered gets 503 at once (with ``Retry-After``), unread: with
  the 16.5 MiB body bound it caps what bodies can hold (about 2 GiB). A
  connection waiting for its next head is not counted, nor (with sessions) a
  ``GET`` stream. A 2026-07-28 ``subscriptions/listen`` stream is a ``POST`` in
  flight for as long as it is open: at most ``LISTEN_STREAMS`` are served at
  once (a further one is refused, ``listen_limit_reached``: ``list_changed.ListingListen``), so calls keep
  the other half of the slots.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from http import HTTPStatus

import h11
import mcp_types as types
from h11._connection import DEFAULT_MAX_INCOMPLETE_EVENT_SIZE  # uvicorn's default bound on a head
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from rimthan_workflow_registry.limits import MAX_REQUEST_BODY_BYTES, MAX_REQUESTS_IN_FLIGHT
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from .health import Health
from .http_shape import (
    BAD_REQUEST,
    SESSION_HEADER,
    CallsWithoutId,
    ShapeAnswers,
    error_body,
    json_headers,
    kept_body,
    session_of,
)
from .logs import PEER, get_logger
from .message_shape import invalid_request

HEAD_SECONDS = 10.0  # a client writes its request head at once: 10 s is slack on any network
BODY_SECONDS = 120.0  # the largest body (16.5 MiB) arrives in this at ~140 KiB/s
LINGER_SECONDS = 10.0  # the rest of a body answered early (413): discarded this long, then the connection ends
RETRY_AFTER_SECONDS = 1
STATELESS_ALLOW = "POST"
STATELESS_GET = (
    "this server is stateless: it offers no SSE stream (GET) and no session to end (DELETE), and takes only POST: "
    "send each JSON-RPC message as a POST"
)
BUSY = (
    f"too many requests are in flight ({MAX_REQUESTS_IN_FLIGHT}); this one was not read: "
    f"retry after {RETRY_AFTER_SECONDS} s (Retry-After)"
)
BODY_LATE = (  # formatted at use with BODY_SECONDS as it is then
    "the request body did not arrive within {:g} s of its head and was not read: "
    "send the whole body at once, or a smaller call"
)
# What the SDK's transport serves. The batch eras stay (an initialize offering one is answered with a later one,
# eras.py): the MCP conformance suite sends MCP-Protocol-Version 2025-03-26 inside a 2025-11-25 session.
SUPPORTED_VERSIONS = (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS)
VERSION_HEADER = MCP_PROTOCOL_VERSION_HEADER.encode("ascii")
UNSUPPORTED_VERSION = (
    "the request's MCP-Protocol-Version header is {}, a protocol version this server does not speak, and was not "
    f"read: send one of {', '.join(SUPPORTED_VERSIONS)} (or no header)"
)
SHOWN_VERSION = 80  # characters of a refused MCP-Protocol-Version quoted back
_CLOSE = [(b"connection", b"close")]
_CASELESS_HEADERS = frozenset({b"host", b"origin", b"content-type"})
JSON_MEDIA_TYPE = b"application/json"
TOO_LARGE = 413  # the SDK's answer to a body past its max_request_body_size, and only to that
TOO_LARGE_MESSAGE = (
    f"the request body is past the {MAX_REQUEST_BODY_BYTES} bytes ({MAX_REQUEST_BODY_BYTES / 2**20:g} MiB) one "
    "request may take (MAX_REQUEST_BODY_BYTES, what the largest call a tool's input schema accepts needs) and was "
    "not read: send a smaller call"
)
WRONG_HOST, WRONG_ORIGIN = 421, 403  # the SDK's DNS-rebinding refusals, and its only 421 and 403
NOT_ACCEPTABLE = 406  # the SDK's answer to an Accept header without what the answer needs (2026-07-28: no body)
NOT_ACCEPTABLE_MESSAGE = (
    "the request's Accept header does not take what the answer needs: send Accept: application/json, text/event-stream"
)
WRONG_HOST_MESSAGE = (
    "the request's Host is not one this server answers (DNS-rebinding protection): use the address it listens "
    "on, or have its operator add the name with --allowed-host"
)
WRONG_ORIGIN_MESSAGE = (
    "the request's Origin is not one this server answers (DNS-rebinding protection): send it from an allowed "
    "host, or without an Origin header"
)


def _error_body(message: str) -> bytes:
    return error_body(invalid_request(message))


TOO_LARGE_BODY = _error_body(TOO_LARGE_MESSAGE)
READABLE_REFUSALS = {
    TOO_LARGE: TOO_LARGE_BODY,
    WRONG_HOST: _error_body(WRONG_HOST_MESSAGE),
    WRONG_ORIGIN: _error_body(WRONG_ORIGIN_MESSAGE),
    NOT_ACCEPTABLE: _error_body(NOT_ACCEPTABLE_MESSAGE),
}
REFUSAL_EVENTS = {
    TOO_LARGE: "request refused: body past its bound",
    WRONG_HOST: "request refused: Host not allowed",
    WRONG_ORIGIN: "request refused: Origin not allowed",
    NOT_ACCEPTABLE: "request refused: Accept without what the answer needs",
}
NOT_JSON = (
    "the request's Content-Type is {} and was not read: send the JSON-RPC message with Content-Type: application/json"
)
ONE_VALUE_HEADERS = frozenset({b"content-type", b"mcp-protocol-version", b"mcp-method", b"mcp-name", SESSION_HEADER})
REPEATED_HEADER = (
    "the request has more than one {} header, which readers taking the first and the last would read apart; it was "
    "not read: send the header once"
)
HEAD_TOO_LARGE = 431  # h11's status hint for a head past its bound
NOT_HTTP_MESSAGE = "the request is not valid HTTP/1.1 and was not read: send a well-formed HTTP/1.1 request"
HEAD_TOO_LARGE_MESSAGE = (
    "the request's line and headers are past {} KiB and were not read: send fewer or shorter headers"
)
SHOWN_MEDIA_TYPE = 80  # characters of a refused Content-Type quoted back
BODY_IN = "rimthan.body_in"  # set by HeadDeadlineProtocol in scope["state"] once a request's body is all in
HEAD = "rimthan.head"  # the request's RequestHead, kept in scope["state"] by BoundedRequests (head_of)
_log = get_logger("transport")


class HeadDeadlineProtocol(H11Protocol):
    """h11 with a deadline on the request head (uvicorn's own waits for it for ever).

    Armed when a connection opens and when a part of a head arrives without its
    end (an idle kept-alive connection is uvicorn's: closed after 5 s), so a head
    that comes whole costs no timer. A body still arriving after its request was
    answered (a 413) ends ``LINGER_SECONDS`` after its first part came. It also marks a request whose body is in
    (``BODY_IN`` in the scope's state), which lets :class:`BoundedRequests` read
    it without a timer.
    """

    _head_timer: asyncio.TimerHandle | None = None
    _linger_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_timer = self.loop.call_later(HEAD_SECONDS, self._head_overdue)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_deadline()
        if self._linger_timer is not None:
            self._linger_timer.cancel()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        state = self.conn.their_state
        if state is h11.IDLE:  # a head begun and not ended
            if self._head_timer is None:
                self._head_timer = self.loop.call_later(HEAD_SECONDS, self._head_overdue)
            return
        self._disarm_head_deadline()
        if state is h11.DONE and self.cycle is not None:
            self.cycle.scope["state"][BODY_IN] = True
        elif state is h11.SEND_BODY and self.conn.our_state is h11.DONE and self._linger_timer is None:
            self._linger_timer = self.loop.call_later(LINGER_SECONDS, self._linger_over)  # answered, body still coming

    def _disarm_head_deadline(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _linger_over(self) -> None:
        self._linger_timer = None
        if (
            self.conn.our_state is h11.DONE
            and self.conn.their_state is h11.SEND_BODY
            and not self.transport.is_closing()
        ):
            _log.debug(
                "closed a connection: the body of an answered request went on", extra={"seconds": LINGER_SECONDS}
            )
            self.transport.close()

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to a head h11 refuses: a bare text line (``msg``), 400 even for a head past h11's
        bound. Here a JSON-RPC error, and 431 for a head too large (h11's own status hint)."""
        bound = self.config.h11_max_incomplete_event_size or DEFAULT_MAX_INCOMPLETE_EVENT_SIZE
        too_large = len(self.conn.trailing_data[0]) > bound
        status = HEAD_TOO_LARGE if too_large else BAD_REQUEST
        body = _error_body(HEAD_TOO_LARGE_MESSAGE.format(bound // 1024) if too_large else NOT_HTTP_MESSAGE)
        _log.info("request refused: not a valid HTTP/1.1 head", extra={"status": status})
        for event in (
            h11.Response(status_code=status, headers=[*json_headers(body), *_CLOSE], reason=HTTPStatus(status).phrase),
            h11.Data(data=body),
            h11.EndOfMessage(),
        ):
            self.transport.write(self.conn.send(event) or b"")
        self.transport.close()

    def _head_overdue(self) -> None:
        self._head_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            _log.debug("closed a connection: no complete request head", extra={"head_seconds": HEAD_SECONDS})
            self.transport.close()


class BoundedRequests:
    """ASGI wrapper: 405 (Allow: POST) for a stateless server's every method but POST, a cap on requests in
    flight, a deadline on the body; Host and Origin lower-cased."""

    def __init__(self, app: ASGIApp, *, stateless: bool, health: Health | None = None) -> None:
        self.app = app
        self.stateless = stateless
        self.health = health  # GET /healthz, for a load balancer (health.py)
        self.in_flight = 0
        self.calls_without_id = CallsWithoutId()  # told once per session (http_shape)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        client = scope.get("client")
        PEER.set(f"{client[0]}:{client[1]}" if client else None)  # this request's task (and its children) only
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        head = read_head(scope["headers"])
        scope.setdefault("state", {})[HEAD] = head  # (the dict HeadDeadlineProtocol marks BODY_IN in)
        scope = {**scope, "headers": head.headers}
        if self.health is not None and self.health.asks(scope):
            await self.health(scope, receive, _readable_refusals(send))
        elif self.stateless and scope["method"] != "POST":
            await self._get(scope, receive, send)
        elif (repeated := head.repeated) is not None:
            _log.info("request refused: a header repeated", extra={"header": repeated.decode("latin-1")})
            await _json_error(send, 400, REPEATED_HEADER.format(repeated.decode("latin-1")))
        elif (version := _unsupported_version(head)) is not None:
            _log.info("request refused: protocol version not supported", extra={"requested": version[:SHOWN_VERSION]})
            await _send_error(send, 400, _unsupported_version_error(version))
        elif scope["method"] == "GET":  # a session's stream: after the header checks, as a POST
            await self._get(scope, receive, send)
        elif scope["method"] == "POST" and (media_type := _media_type(head)) != JSON_MEDIA_TYPE:
            _log.info("request refused: not JSON", extra={"content_type": media_type.decode("latin-1")})
            shown = media_type[:SHOWN_MEDIA_TYPE].decode("latin-1") if media_type else "missing"
            await _json_error(send, 415, NOT_JSON.format(shown))
        elif self.in_flight >= MAX_REQUESTS_IN_FLIGHT:
            _log.warning("request refused: too many in flight", extra={"in_flight": self.in_flight})
            await _json_error(send, 503, BUSY, [(b"retry-after", b"%d" % RETRY_AFTER_SECONDS), *_CLOSE])
        else:
            self.in_flight += 1
            shape = ShapeAnswers(
                kept_body(scope, receive),
                _readable_refusals(send),
                self.calls_without_id,
                session_of(scope, head.first.get(SESSION_HEADER)),
            )
            receive, send = shape.receive, shape.send
            try:
                if scope.get("state", {}).get(BODY_IN):  # the usual case: the body came with the head
                    await self.app(scope, receive, send)
                else:
                    await _with_body_deadline(self.app, scope, receive, send)
            finally:
                self.in_flight -= 1

    async def _get(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Stateless: 405. With sessions, a session's server-to-client stream: no body, so not counted (the SDK
        caps sessions, one stream each), lest streams held open take every slot from the calls."""
        if self.stateless:
            await _json_error(send, 405, STATELESS_GET, [(b"allow", STATELESS_ALLOW.encode())])
        else:
            await self.app(scope, receive, _readable_refusals(send))


@dataclass(frozen=True)
class RequestHead:
    """A request's headers, read in one pass (:func:`read_head`) for every check made on them here."""

    headers: list[tuple[bytes, bytes]]  # as sent, the values of ``_CASELESS_HEADERS`` lower-cased
    first: dict[bytes, bytes]  # the first value of each of ``ONE_VALUE_HEADERS`` sent
    repeated: bytes | None  # the first of ``ONE_VALUE_HEADERS`` sent more than once


def read_head(raw: Iterable[tuple[bytes, bytes]]) -> RequestHead:
    """The request's headers, lower-casing what compares without case, and its one-value headers.

    Host and Origin name a host, and host names compare case-insensitively (RFC 9110 4.2.3): the SDK's
    DNS-rebinding check compares them exactly, against the lower-case values the server allows. So do a media
    type and its charset (RFC 9110 8.3.1, 8.3.2), which the SDK's transport compared exactly too. A repeated
    one-value header is refused: the SDK reads the protocol era from the first ``MCP-Protocol-Version`` and
    refuses a repeated one only on the 2026-07-28 path (``2025-11-25`` then ``2026-07-28`` was served as the
    first, the other order refused)."""
    headers: list[tuple[bytes, bytes]] = []
    first: dict[bytes, bytes] = {}
    repeated: bytes | None = None
    for name, value in raw:
        if name in _CASELESS_HEADERS:
            value = value.lower()
        headers.append((name, value))
        if name in ONE_VALUE_HEADERS:
            if name not in first:
                first[name] = value
            elif repeated is None:
                repeated = bytes(name)
    return RequestHead(headers, first, repeated)


def head_of(scope: Scope) -> RequestHead:
    """The head :class:`BoundedRequests` read for this request: every HTTP request the app is given has one."""
    head: RequestHead = scope["state"][HEAD]
    return head


def _media_type(head: RequestHead) -> bytes:
    """The request's media type (its Content-Type without parameters, lower-cased already), or b"" if none."""
    return head.first.get(b"content-type", b"").split(b";", 1)[0].strip()


def _unsupported_version(head: RequestHead) -> str | None:
    """The request's ``MCP-Protocol-Version`` when it sends one the SDK serves no path for (empty too), or None."""
    value = head.first.get(VERSION_HEADER)
    text = None if value is None else value.decode("latin-1")
    return None if text is None or text in SUPPORTED_VERSIONS else text


def _unsupported_version_error(requested: str) -> types.JSONRPCError:
    """The JSON-RPC ``Unsupported protocol version`` (-32022) for ``requested``, ``id`` null: nothing was read."""
    cut = requested[:SHOWN_VERSION]  # a header may be up to 16 KiB: what is echoed back is bounded
    data = types.UnsupportedProtocolVersionErrorData(supported=list(SUPPORTED_VERSIONS), requested=cut)
    shown = repr(cut + ("..." if len(requested) > SHOWN_VERSION else ""))
    error = types.ErrorData(
        code=types.UNSUPPORTED_PROTOCOL_VERSION,
        message=UNSUPPORTED_VERSION.format(shown if requested else "empty"),
        data=data.model_dump(mode="json"),
    )
    return types.JSONRPCError(jsonrpc="2.0", id=None, error=error)


async def _json_error(send: Send, status: int, message: str, extra: Sequence[tuple[bytes, bytes]] = ()) -> None:
    """An HTTP error whose body is a JSON-RPC Invalid Request (``id`` null: the request was not read)."""
    await _send_error(send, status, invalid_request(message), extra)


async def _send_error(
    send: Send, status: int, answer: types.JSONRPCError, extra: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    """An HTTP error whose body is the JSON-RPC error ``answer``."""
    body = error_body(answer)
    await send({"type": "http.response.start", "status": status, "headers": [*json_headers(body), *extra]})
    await send({"type": "http.response.body", "body": body})


async def _with_body_deadline(app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
    """Run ``app``; while it waits for a part of the body, a deadline ``BODY_SECONDS`` after the head holds."""
    deadline, state = asyncio.get_running_loop().time() + BODY_SECONDS, scope.get("state", {})
    body_in = False
    try:
        async with asyncio.timeout(None) as timeout:  # armed only while a part of the body is awaited

            async def bounded_receive() -> Message:
                nonlocal body_in
                if body_in or state.get(BODY_IN):  # no timer once the body is in
                    return await receive()
                timeout.reschedule(deadline)
                message = await receive()
                timeout.reschedule(None)
                body_in = not message.get("more_body", False)  # the last part (or the client left)
                return message

            await app(scope, bounded_receive, send)
    except TimeoutError:
        if not timeout.expired():
            raise
        # cancelled while the app waited for the body, before anything was answered
        _log.info("request body not received in time", extra={"body_seconds": BODY_SECONDS})
        await _json_error(send, 408, BODY_LATE.format(BODY_SECONDS), _CLOSE)


def _readable_refusals(send: Send) -> Send:
    """``send`` with the SDK's bare refusals (413, 421, 403, 406) answered as JSON-RPC errors."""
    replacing: bytes | None = None

    async def readable(message: Message) -> None:
        nonlocal replacing
        if message["type"] == "http.response.start" and message["status"] in READABLE_REFUSALS:
            status = message["status"]
            replacing = READABLE_REFUSALS[status]
            _log.info(REFUSAL_EVENTS[status], extra={"status": status})
            await send({"type": "http.response.start", "status": status, "headers": json_headers(replacing)})
        elif replacing is not None:
            if not message.get("more_body", False):
                await send({"type": "http.response.body", "body": replacing})
        else:
            await send(message)

    return readable
