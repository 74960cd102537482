"""A POST body that is not one JSON-RPC message gets an ``Invalid Request`` a client can read (HTTP 400).

For handshake-era clients (``MCP-Protocol-Version`` 2025-11-25, or none) the
SDK's Streamable HTTP transport answered

- a batch (a JSON array), or JSON that is no JSON-RPC message, with 400 and
  pydantic's validation report: many lines, code -32602 (Invalid params);
- a request whose id is neither a string nor an integer (an object, an array,
  a float, a boolean, null) with 202 and no body: it read the request as a
  notification, so the client waited for an answer that never came.

:class:`ShapeAnswers` wraps a POST's ``receive`` and ``send``: it keeps the
first ``SCREEN_BYTES`` of the body as the SDK reads it (no second read, no
parse on the way in) and, when the SDK answers one of these, sends instead the
one-line ``Invalid Request`` (-32600, ``id`` null) ``message_shape`` words for
it, status 400, the SDK's headers kept. A body past ``SCREEN_BYTES`` that the
SDK accepted (202) is refused too: the notifications MCP defines are a few
hundred bytes, and this server sends no requests a response could answer. The
2026-07-28 path answers these with -32600 itself; its answers pass unchanged.

A request sent without an id (``tools/call`` with no ``id``: a client that
forgot it) is a notification to JSON-RPC: the SDK accepts it (202), nothing
answers it (the spec forbids answering a notification) and no tool runs. The
server's log says so once per session in one warning line (``CALL_WITHOUT_ID``,
naming the method): :class:`CallsWithoutId` remembers who was told, a session
by its ``Mcp-Session-Id`` and, stateless HTTP having no session, a client by
its host. Notifications MCP defines (``notifications/...``) are not named.
"""

from __future__ import annotations

import json

import mcp_types as types
from starlette.types import Message, Receive, Scope, Send

from .logs import get_logger
from .message_shape import (
    BATCH_REFUSED,
    ID_UNUSABLE,
    NOT_A_MESSAGE,
    NOTIFICATION_PREFIX,
    call_without_id,
    invalid_request,
    not_a_message,
    top_level_keys,
    top_level_method,
)

SCREEN_BYTES = 64 * 1024
SESSION_HEADER = b"mcp-session-id"  # (lower-cased, as ASGI gives header names)
ACCEPTED, BAD_REQUEST = 202, 400
SDK_VALIDATION_REPORT = "Validation error"  # how the SDK's 400 for a body of the wrong shape begins
NOTIFICATION_TOO_LARGE = (
    f"the message is a notification or a response past {SCREEN_BYTES // 1024} KiB: the ones a client sends this "
    "server are far smaller (it sends no requests to answer); send requests with a string or integer id"
)
CALL_WITHOUT_ID = call_without_id("accepted (202)")
TOLD_AT_MOST = 4096  # the sessions (or stateless clients) remembered as told; one forgotten is told again
_log = get_logger("transport")


class CallsWithoutId:
    """Who the log has told that a request without an id went unanswered: once per session (see module)."""

    def __init__(self) -> None:
        self._told: dict[str, None] = {}  # insertion order: the oldest is forgotten first

    def tell_once(self, who: str, method: str) -> None:
        if who in self._told:
            return
        self._told[who] = None
        if len(self._told) > TOLD_AT_MOST:
            del self._told[next(iter(self._told))]
        _log.warning(CALL_WITHOUT_ID, extra={"method": method})


def session_of(scope: Scope, session_id: bytes | None) -> str:
    """The session a POST belongs to: its ``Mcp-Session-Id`` (``session_id``), else (stateless) its client's host."""
    if session_id is not None:
        return f"session {bytes(session_id).decode('latin-1')}"
    client = scope.get("client")
    return f"client {client[0] if client else 'unknown'}"


class KeptBody:
    """A request's ``receive`` that keeps the first ``SCREEN_BYTES`` of its body as the app reads it (no second
    read, no parse)."""

    def __init__(self, receive: Receive) -> None:
        self._receive = receive
        self._kept: list[bytes] = []
        self.size = 0

    async def receive(self) -> Message:
        message = await self._receive()
        if message["type"] == "http.request":
            body: bytes = message.get("body", b"")
            self.size += len(body)
            if self.size <= SCREEN_BYTES:
                self._kept.append(body)
        return message

    @property
    def whole(self) -> bool:
        """Every byte received so far was kept."""
        return self.size <= SCREEN_BYTES

    def head(self) -> bytes:
        return b"".join(self._kept)


_KEPT_BODY = "rimthan.kept_body"  # the scope key of a request's one KeptBody


def kept_body(scope: Scope, receive: Receive) -> tuple[KeptBody, Receive]:
    """The request's one :class:`KeptBody` and the ``receive`` to pass on: the first wrapper to ask (the stop's
    answer, outermost) makes it and keeps it in ``scope``; a wrapper inside it (the shape answers) reads the same
    kept bytes, its ``receive`` already the kept one, so the body is kept once."""
    kept = scope.get(_KEPT_BODY)
    if isinstance(kept, KeptBody):
        return kept, receive
    kept = scope[_KEPT_BODY] = KeptBody(receive)
    return kept, kept.receive


class ShapeAnswers:
    """One POST's ``receive`` and ``send``, the SDK's answers to a body of the wrong shape replaced (see module)."""

    def __init__(
        self, body: tuple[KeptBody, Receive], send: Send, calls: CallsWithoutId | None = None, session: str = ""
    ) -> None:
        self._body, self.receive = body  # (kept_body: the request's one keeper of its first bytes)
        self._send = send
        self._calls = calls
        self._session = session
        self._held: list[Message] = []  # the SDK's 400, until its body shows whether it is the validation report
        self._replaced = False

    async def send(self, message: Message) -> None:
        if self._replaced:
            return  # the SDK's body for the answer replaced
        if message["type"] == "http.response.start" and message["status"] in (ACCEPTED, BAD_REQUEST):
            if message["status"] == BAD_REQUEST:
                self._held.append(message)
                return
            answer = self._refusing_accepted()
            if answer is not None:
                await self._answer(message, answer)
                return
            self._tell_if_a_request()
        if self._held:
            await self._settle_held(message)
            return
        await self._send(message)

    async def _settle_held(self, message: Message) -> None:
        self._held.append(message)
        if message.get("more_body", False):
            return
        start, *parts = self._held
        self._held = []
        answer = self._refusing_report(b"".join(part.get("body", b"") for part in parts))
        if answer is not None:
            await self._answer(start, answer)
            return
        for held in (start, *parts):
            await self._send(held)

    def _text(self) -> str | None:
        """The body as text when all of it was kept, else None."""
        return self._body.head().decode("utf-8", "replace") if self._body.whole else None

    def _refusing_accepted(self) -> types.JSONRPCError | None:
        """The refusal of a body the SDK accepted as a notification or a response, if it was a request."""
        text = self._text()
        if text is None:
            return invalid_request(NOTIFICATION_TOO_LARGE)
        keys = top_level_keys(text) or {}
        return invalid_request(ID_UNUSABLE) if "id" in keys and "method" in keys else None

    def _tell_if_a_request(self) -> None:
        """An accepted message whose method is a request's (not ``notifications/``): the log says so, once."""
        if self._calls is None:
            return
        text = self._text()
        method = top_level_method(text) if text is not None else None
        if method is not None and not method.startswith(NOTIFICATION_PREFIX):
            self._calls.tell_once(self._session, method)

    def _refusing_report(self, sdk_body: bytes) -> types.JSONRPCError | None:
        """The refusal replacing the SDK's 400 when it is its validation report; None for any other 400."""
        try:
            error = json.loads(sdk_body).get("error") or {}
        except (ValueError, AttributeError):
            return None
        report = error.get("code") == types.INVALID_PARAMS and str(error.get("message", ""))
        if not report or not report.startswith(SDK_VALIDATION_REPORT):
            return None
        text = self._text()
        if text is not None:
            return not_a_message(text)
        batch = self._body.head().lstrip().startswith(b"[")
        return invalid_request(BATCH_REFUSED if batch else NOT_A_MESSAGE)

    async def _answer(self, start: Message, answer: types.JSONRPCError) -> None:
        self._replaced = True
        _log.info("request refused: not one JSON-RPC message", extra={"why": answer.error.message})
        body = error_body(answer)
        headers = [(k, v) for k, v in start.get("headers", []) if k.lower() not in (b"content-length", b"content-type")]
        headers += json_headers(body)
        await self._send({"type": "http.response.start", "status": BAD_REQUEST, "headers": headers})
        await self._send({"type": "http.response.body", "body": body})


def error_body(answer: types.JSONRPCError) -> bytes:
    """The one line of JSON an HTTP refusal carries."""
    return answer.model_dump_json(by_alias=True, exclude_unset=True).encode()


def json_headers(body: bytes) -> list[tuple[bytes, bytes]]:
    """The headers of a JSON body: its media type and length."""
    return [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
