"""Answer every stdio line the SDK's JSON parser refuses, instead of dropping it.

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
Request`` naming the bound. Other exceptions pass through. A subclass may read a refused line
a second way first (:meth:`AnsweringStream.reread`: the host bridge reads
lone surrogates and deeper nesting with Python's parser, to refuse them as
tool arguments naming their path).
"""

from __future__ import annotations

import json
import secrets
from typing import Self

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from pydantic import ValidationError
from rimthan_workflow_registry.limits import MAX_REQUEST_BODY_BYTES

from .logs import get_logger

_log = get_logger("transport")
_MAX_SCAN = 16 * 1024 * 1024
LINE_PAST_BOUND = "\x00rimthan-line-past-bound-" + secrets.token_hex(16) + ":"
"""What stands for a line refused for its length: not JSON, unguessable by a peer (random per process)."""
LINE_TOO_LONG = (
    f"the message is past the {MAX_REQUEST_BODY_BYTES} characters one line may take (MAX_REQUEST_BODY_BYTES, what "
    "the largest call a tool's input schema accepts needs) and was not read: send a smaller call"
)


def top_level_request_id(raw: str, *, whole: bool = True) -> int | str | None:
    """The ``id`` of a JSON-RPC request line, found without recursion; ``None`` if unsure.

    Scans only depth-1 keys of the outermost object, so deeply nested or
    otherwise unparseable parameters do not matter. Returns an id only when a
    top-level ``method`` key is present too (a request, not a response) and the
    id is a plain integer or a simple string. ``whole=False``: ``raw`` is the
    start of a line, cut anywhere (an id it cuts short is not taken).
    """
    if not whole:
        raw += "\x00"  # what follows the cut is unknown: no number or string ends at it
    keys = _top_level_keys(raw, whole=whole)
    if keys is None or "method" not in keys or "id" not in keys:
        return None
    return _scalar_after_colon(raw, keys["id"])


def top_level_response_id(raw: str) -> int | str | None:
    """The ``id`` of a JSON-RPC response line (``result`` or ``error``, no ``method``), as :func:`top_level_request_id`
    reads a request's; ``None`` if unsure."""
    keys = _top_level_keys(raw)
    if keys is None or "method" in keys or "id" not in keys or not ({"result", "error"} & set(keys)):
        return None
    return _scalar_after_colon(raw, keys["id"])


def _top_level_keys(raw: str, *, whole: bool = True) -> dict[str, int] | None:
    """The keys of the line's outermost object, each with the index just after it; ``None`` if unsure.

    ``whole=False``: those before a string the line's cut leaves open."""
    if len(raw) > _MAX_SCAN or not raw.lstrip().startswith("{"):
        return None
    depth, i, n = 0, 0, len(raw)
    keys: dict[str, int] = {}
    expecting_key = False
    while i < n:
        c = raw[i]
        if c == '"':
            end = i + 1
            while end < n and raw[end] != '"':
                end += 2 if raw[end] == "\\" else 1
            if end >= n:
                return None if whole else keys
            if depth == 1 and expecting_key:
                keys.setdefault(raw[i + 1 : end], end + 1)
                expecting_key = False
            i = end + 1
            continue
        if c in "{[":
            depth += 1
            expecting_key = c == "{" and depth == 1
        elif c in "}]":
            depth -= 1
        elif c == "," and depth == 1:
            expecting_key = True
        i += 1
    return keys


def _scalar_after_colon(raw: str, at: int) -> int | str | None:
    rest = raw[at:].lstrip()
    if not rest.startswith(":"):
        return None
    value = rest[1:].lstrip()
    digits = value[1:] if value.startswith("-") else value
    count = len(digits) - len(digits.lstrip("0123456789"))
    if 0 < count <= 18 and (len(digits) == count or digits[count] in ",} \t\r\n"):
        return int(value[: count + (1 if value.startswith("-") else 0)])
    if value.startswith('"'):
        end = value.find('"', 1)
        text = value[1:end] if end > 0 else ""
        if end > 0 and "\\" not in text and len(text) <= 256:
            return text
    return None


def _raw_input(exc: Exception) -> str | None:
    if isinstance(exc, ValidationError):
        for error in exc.errors():  # only "not JSON at all": valid JSON of the wrong shape is the session's
            value = error.get("input")
            if error.get("type") == "json_invalid" and isinstance(value, str):
                return value
    return None


REPLACEMENT_CHARACTER = "\ufffd"


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
    """``source`` as the server reads it, every line the parser refused answered on the way with a Parse error.

    A read stream (the SDK's ``ReadStream``), not a pump: a message reaches the
    server in the same event-loop step the transport handed it over, with no
    task or memory stream between them. A refused line is answered through
    ``write_stream`` and never reaches the server; other exceptions pass through.
    """

    def __init__(
        self,
        source: MemoryObjectReceiveStream[SessionMessage | Exception],
        write_stream: MemoryObjectSendStream[SessionMessage],
    ) -> None:
        self._source = source
        self._write_stream = write_stream

    async def receive(self) -> SessionMessage | Exception:
        while True:
            item = await self._source.receive()
            raw = _raw_input(item) if isinstance(item, Exception) else None
            if raw is None:
                return item
            if raw.startswith(LINE_PAST_BOUND):
                answer = too_long_error_for(raw)
                _log.warning(
                    "line refused: past its bound", extra={"id": answer.id, "max_chars": MAX_REQUEST_BODY_BYTES}
                )
                await self._write_stream.send(SessionMessage(answer))
                continue
            message = self.reread(raw)
            if message is not None:
                return message
            answer = parse_error_for(raw)
            _log.warning("line refused by the JSON parser", extra={"id": answer.id})
            await self._write_stream.send(SessionMessage(answer))

    def reread(self, raw: str) -> SessionMessage | None:
        """The message a refused line holds when read another way; ``None`` (here: always) answers it."""
        return None

    async def aclose(self) -> None:
        await self._source.aclose()
