"""Answer stdio requests the SDK's JSON parser refuses, instead of dropping them.

The SDK's stdio transport hands a line it cannot parse (nesting deeper than
its parser allows, a lone surrogate escape, an integer of thousands of
digits) to the session as an exception, and the client never hears back for
that request id. A client waiting on it hangs. This guard sits between the
transport and the server: for such a line that is recognisably a request (a
top-level ``method`` and a scalar ``id``), it answers with the JSON-RPC
``Parse error`` for that id through the transport's own writer; anything else
passes through unchanged.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from anyio.abc import TaskStatus
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from .logs import get_logger

_log = get_logger("transport")
_MAX_SCAN = 16 * 1024 * 1024


def top_level_request_id(raw: str) -> int | str | None:
    """The ``id`` of a JSON-RPC request line, found without recursion; ``None`` if unsure.

    Scans only depth-1 keys of the outermost object, so deeply nested or
    otherwise unparseable parameters do not matter. Returns an id only when a
    top-level ``method`` key is present too (a request, not a response) and the
    id is a plain integer or a simple string.
    """
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
                return None
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
    if "method" not in keys or "id" not in keys:
        return None
    return _scalar_after_colon(raw, keys["id"])


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
        for error in exc.errors():
            value = error.get("input")
            if isinstance(value, str):
                return value
    return None


async def answer_unparseable(
    source: Any, sink: Any, write_stream: Any, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
) -> None:
    """Pump ``source`` into ``sink``, answering refused request lines with a JSON-RPC Parse error."""
    task_status.started()
    async with sink:
        async for item in source:
            if isinstance(item, Exception):
                raw = _raw_input(item)
                request_id = top_level_request_id(raw) if raw is not None else None
                if request_id is not None:
                    _log.warning("request refused by the JSON parser", extra={"id": request_id})
                    error = types.ErrorData(
                        code=types.PARSE_ERROR,
                        message="the request is not JSON this server can parse (nesting too "
                        "deep, a lone surrogate, or a number too long); resend it as "
                        "plain JSON",
                    )
                    await write_stream.send(
                        SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))
                    )
                    continue
            await sink.send(item)
