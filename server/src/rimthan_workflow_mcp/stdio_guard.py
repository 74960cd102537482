"""Answer every stdio line the SDK's JSON parser refuses, or finds no JSON-RPC message in, instead of dropping it.

The SDK's stdio transport hands a line it cannot parse (invalid UTF-8, which
it decodes with replacement characters; text that is not JSON; nesting deeper
than its parser allows, a lone surrogate escape, an integer of thousands of
digits) to the session as an exception, and the client never hears back. A
client waiting on it hangs. This guard (:class:`AnsweringStream`) is the
stream the server reads the transport through, and answers such a line with
the JSON-RPC ``Parse error`` (-32700) through the transport's own writer: for
the line's request id when it is recognisably a request (a top-level
``method`` and a scalar ``id``), else with ``id: null`` as JSON-RPC 2.0
prescribes. A line ``stdio_pipes`` refused for its length (past
``limits.MAX_REQUEST_BODY_BYTES`` characters, read no further than that) comes
as :data:`LINE_PAST_BOUND` and its id, and is answered with ``Invalid
Request`` naming the bound. Valid JSON that is no JSON-RPC message (a batch,
a number, ...) and a request whose id is neither a string nor an integer
(which the SDK reads as a notification) get an ``Invalid Request`` too
(``message_shape``). A request sent without an id (``tools/call`` with no ``id``), which JSON-RPC reads as a
notification and nothing answers or runs, is named in the log once (``CALL_WITHOUT_ID``: a stdio server has one
client), as over HTTP once per session. Other exceptions pass through. A subclass may read a refused line
a second way first (:meth:`AnsweringStream.reread`: the host bridge reads
lone surrogates and deeper nesting with Python's parser, to refuse them as
tool arguments naming their path).
"""

from __future__ import annotations

import json
import secrets
from collections import deque
from typing import Self

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from pydantic import ValidationError
from rimthan_workflow_registry.limits import MAX_REQUEST_BODY_BYTES

from .logs import get_logger
from .message_shape import (
    BATCH_REFUSED,
    ID_UNUSABLE,
    NOT_A_MESSAGE,
    NOTIFICATION_PREFIX,
    call_without_id,
    has_top_level_id,
    invalid_request,
    not_a_message,
    top_level_request_id,
)

_log = get_logger("transport")
LINE_PAST_BOUND = "\x00rimthan-line-past-bound-" + secrets.token_hex(16) + ":"
"""What stands for a line refused for its length: not JSON, unguessable by a peer (random per process)."""
LINE_TOO_LONG = (
    f"the message is past the {MAX_REQUEST_BODY_BYTES} characters one line may take (MAX_REQUEST_BODY_BYTES, what "
    "the largest call a tool's input schema accepts needs) and was not read: send a smaller call"
)


def _notification_with_id(message: types.JSONRPCMessage, line: str | None) -> bool:
    """A line the SDK read as a notification that has an ``id``: a request whose id it could not take."""
    return isinstance(message, types.JSONRPCNotification) and line is not None and has_top_level_id(line)


def _shape_refusal(exc: Exception, line: str | None) -> types.JSONRPCError | None:
    """The Invalid Request for valid JSON the SDK found no JSON-RPC message in (a batch, a number, ...); else None."""
    if not isinstance(exc, ValidationError) or any(e.get("type") == "json_invalid" for e in exc.errors()):
        return None
    if line is not None:
        return not_a_message(line)
    whole = next((e.get("input") for e in exc.errors() if e.get("type") == "model_type"), None)
    return invalid_request(BATCH_REFUSED if isinstance(whole, list) else NOT_A_MESSAGE)


def _raw_input(exc: Exception) -> str | None:
    if isinstance(exc, ValidationError):
        for error in exc.errors():  # only "not JSON at all": valid JSON of the wrong shape is the session's
            value = error.get("input")
            if error.get("type") == "json_invalid" and isinstance(value, str):
                return value
    return None


REPLACEMENT_CHARACTER = "\ufffd"
CALL_WITHOUT_ID = call_without_id("read")


def _request_without_id(message: types.JSONRPCMessage) -> str | None:
    """The method of a request sent without an id (a notification no MCP notification names), else None."""
    if isinstance(message, types.JSONRPCNotification) and not message.method.startswith(NOTIFICATION_PREFIX):
        return message.method
    return None


def too_long_error_for(raw: str) -> types.JSONRPCError:
    """The Invalid Request answering a line refused for its length (``raw``: :data:`LINE_PAST_BOUND` and its id)."""
    request_id = json.loads(raw.removeprefix(LINE_PAST_BOUND))
    error = types.ErrorData(code=types.INVALID_REQUEST, message=LINE_TOO_LONG)
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error)


def parse_error_for(raw: str) -> types.JSONRPCError:
    """The Parse error answering one refused line, for its id when one can be read safely."""
    if REPLACEMENT_CHARACTER in raw:
        message = "the line is not valid UTF-8 (or not JSON); send each JSON-RPC message as one UTF-8 JSON line"
    else:
        message = (
            "the request is not JSON this server can parse (not JSON at all, nesting too deep, a lone surrogate, "
            "or a number too long); resend it as plain JSON"
        )
    error = types.ErrorData(code=types.PARSE_ERROR, message=message)
    return types.JSONRPCError(jsonrpc="2.0", id=top_level_request_id(raw), error=error)


class ClosingStream:
    """A stream's ``async with`` face: ``aclose`` on the way out."""

    async def aclose(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


class ReadingStream(ClosingStream):
    """A read stream's ``async for`` face: ``receive`` until the end of the stream."""

    async def receive(self) -> SessionMessage | Exception:
        raise NotImplementedError

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None


class AnsweringStream(ReadingStream):
    """``source`` as the server reads it, every line the server does not take answered on the way.

    A read stream (the SDK's ``ReadStream``), not a pump: a message reaches the
    server in the same event-loop step the transport handed it over, with no
    task or memory stream between them. A refused line is answered through
    ``write_stream`` and never reaches the server; other exceptions pass through.
    ``lines``: the lines the transport read, one for each item it hands over, in
    order (``stdio_pipes`` keeps them). With them a request whose id is not a
    string or an integer, which the SDK reads as a notification, is refused too
    (``message_shape``); without them it reaches the server as the SDK read it.
    """

    def __init__(
        self,
        source: MemoryObjectReceiveStream[SessionMessage | Exception],
        write_stream: MemoryObjectSendStream[SessionMessage],
        lines: deque[str] | None = None,
    ) -> None:
        self._source = source
        self._write_stream = write_stream
        self._lines = lines
        self._told_without_id = False  # CALL_WITHOUT_ID said: once for the one client

    async def receive(self) -> SessionMessage | Exception:
        while True:
            item = await self._source.receive()
            line = self._lines.popleft() if self._lines else None
            passed = self._passed(item, line)
            if not isinstance(passed, types.JSONRPCError):
                return passed
            await self._write_stream.send(SessionMessage(passed))

    def _passed(
        self, item: SessionMessage | Exception, line: str | None
    ) -> SessionMessage | Exception | types.JSONRPCError:
        """What reaches the server for ``item`` (read from ``line``), or the answer that refuses it."""
        if isinstance(item, SessionMessage):
            if not _notification_with_id(item.message, line):
                self._tell_if_without_id(item.message)
                return item
            _log.warning("line refused: a request id neither a string nor an integer")
            return invalid_request(ID_UNUSABLE)
        raw = _raw_input(item)
        if raw is None:
            taken = self.reshape(item)
            if taken is not None:
                return taken
            answer = _shape_refusal(item, line)
            if answer is not None:
                _log.warning("line refused: no JSON-RPC message", extra={"id": answer.id})
            return item if answer is None else answer
        if raw.startswith(LINE_PAST_BOUND):
            answer = too_long_error_for(raw)
            _log.warning("line refused: past its bound", extra={"id": answer.id, "max_chars": MAX_REQUEST_BODY_BYTES})
            return answer
        message = self.reread(raw)
        if message is not None:
            return message
        answer = parse_error_for(raw)
        _log.warning("line refused by the JSON parser", extra={"id": answer.id})
        return answer

    def _tell_if_without_id(self, message: types.JSONRPCMessage) -> None:
        method = _request_without_id(message)
        if method is not None and not self._told_without_id:
            self._told_without_id = True
            _log.warning(CALL_WITHOUT_ID, extra={"method": method})

    def reread(self, raw: str) -> SessionMessage | None:
        """The message a refused line holds when read another way; ``None`` (here: always) answers it."""
        return None

    def reshape(self, exc: Exception) -> SessionMessage | None:
        """The message for JSON the SDK found no JSON-RPC message in; ``None`` (here: always) answers it."""
        return None

    async def aclose(self) -> None:
        await self._source.aclose()
