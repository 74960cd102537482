"""HTTP: a call cut off by the stop is answered with a JSON-RPC error, not uvicorn's bare 500.

At SIGTERM (or Ctrl-C) uvicorn stops accepting, waits up to ``DRAIN_SECONDS``
for the calls in flight, then cancels the ones still running (a client that
never finishes sending its body, say); its protocol answered each with a
bare ``500 Internal Server Error`` and no JSON-RPC body, which a client could
not tell from a fault of the server's and which did not say that it may retry.
:class:`AnswerAtStop` wraps each request: one cancelled once the drain's
deadline passed (:attr:`CutOff.passed`), before its answer began, is answered
HTTP 503 (``Connection: close``) with the JSON-RPC error ``Connection closed``
(``CONNECTION_CLOSED``, -32000: what the SDK answers such a call over stdio)
saying the server stopped and the call may be retried against another replica.
The error carries the request's id when what the body sent so far is one
JSON-RPC message (its first ``SCREEN_BYTES``), else ``id`` null, which the SDK's
client reads as the answer to the request it sent (a non-2xx status). A call
whose answer had begun can only have its connection closed, as before;
:class:`CutOff` counts both kinds for the stop line (``http_transport.http_stopped``).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

import mcp_types as types
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .http_shape import KeptBody, error_body, json_headers, kept_body
from .logs import get_logger
from .stdio_drain import DRAIN_SECONDS

SERVICE_UNAVAILABLE = 503  # the replica is going away: a load balancer or client may send the call elsewhere
STOPPED = (
    f"Connection closed: the server stopped before it answered (its calls in flight got {DRAIN_SECONDS} s to "
    "finish); the call was not completed and may be retried against another replica"
)
ANSWERED_SECONDS = 1.0  # how long the stop waits for the cancelled calls' answers to be written (it is at once)
_CLOSE = [(b"connection", b"close")]
_log = get_logger("transport")


@dataclass
class CutOff:
    """The stop's drain: whether its deadline passed, and the calls cancelled then, answered or cut short."""

    passed: bool = False
    answered: int = 0  # answered with the STOPPED error
    cut_short: int = 0  # their answer had begun: only their connection could be closed


class _Call:
    """One request's ``receive`` and ``send``, watched: the first bytes of its body, and whether it was answered."""

    def __init__(self, body: tuple[KeptBody, Receive], send: Send) -> None:
        self._body, self.receive = body  # (kept_body: the request's one keeper of its first bytes)
        self._send = send
        self.answering = False

    async def send(self, message: Message) -> None:
        self.answering = self.answering or message["type"] == "http.response.start"
        await self._send(message)

    def request_id(self) -> types.RequestId | None:
        """The id of the request the body sent so far holds whole, else None (not read, or not one request)."""
        if not self._body.whole:
            return None
        try:
            message = json.loads(self._body.head())
        except ValueError:
            return None
        found = message.get("id") if isinstance(message, dict) else None
        return found if isinstance(found, str | int) and not isinstance(found, bool) else None


class AnswerAtStop:
    """ASGI wrapper: a request cancelled by the stop's drain gets the ``STOPPED`` error (see module)."""

    def __init__(self, app: ASGIApp, cut_off: CutOff) -> None:
        self.app = app
        self.cut_off = cut_off

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        call = _Call(kept_body(scope, receive), send)
        try:
            await self.app(scope, call.receive, call.send)
        except asyncio.CancelledError:
            if not self.cut_off.passed:
                raise
            if call.answering:
                self.cut_off.cut_short += 1
                raise
            await self._answer(send, call.request_id())

    async def _answer(self, send: Send, request_id: types.RequestId | None) -> None:
        """The stop's error for a call it cut off; the task's cancellation is taken (the call is answered)."""
        self.cut_off.answered += 1
        answer = types.JSONRPCError(
            jsonrpc="2.0", id=request_id, error=types.ErrorData(code=types.CONNECTION_CLOSED, message=STOPPED)
        )
        body = error_body(answer)
        _log.info("call cut off by the stop: answered", extra={"status": SERVICE_UNAVAILABLE, "id": request_id})
        headers = [*json_headers(body), *_CLOSE]
        await send({"type": "http.response.start", "status": SERVICE_UNAVAILABLE, "headers": headers})
        await send({"type": "http.response.body", "body": body})
