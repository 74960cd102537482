"""What a JSON-RPC message's text holds, read without parsing it, and the refusals of messages MCP does not take.

The scanners (:func:`top_level_request_id`, :func:`top_level_response_id`,
:func:`top_level_keys`) read only the outermost object's keys, without
recursion, so text a parser refuses (nesting too deep, a lone surrogate) or a
line cut short can still be answered for its id. A key given twice is read as
``json.loads`` (and so the SDK) reads it: the last one counts, and a key
written with escapes (``"\u0069d"``) is the key it spells, so an answer goes to
the id the SDK would have read.

Refused on both transports with a JSON-RPC ``Invalid Request`` (-32600), ``id``
null, in one line:

- a batch (a JSON array): MCP removed JSON-RPC batching in its 2025-06-18
  revision ("Remove support for JSON-RPC batching",
  https://modelcontextprotocol.io/specification/2025-06-18/changelog), and this
  server serves 2025-11-25 and later;
- a request (a ``method`` and an ``id``) whose id is neither a string nor an
  integer: "Requests MUST include a string or integer ID. Unlike base JSON-RPC,
  the ID MUST NOT be null." (https://modelcontextprotocol.io/specification/2025-11-25/basic);
  the SDK read such a line as a notification and nobody answered;
- JSON that is no JSON-RPC message at all (a number, an object without
  ``jsonrpc: "2.0"``, a method that is not a string).

JSON-RPC 2.0 (section 5, https://www.jsonrpc.org/specification) answers an
Invalid Request with ``id`` null when the id cannot be read; a request's string
or integer id is kept when it can.
"""

from __future__ import annotations

import json

import mcp_types as types

_MAX_SCAN = 16 * 1024 * 1024
BATCH_REFUSED = (
    "the message is a JSON array (a JSON-RPC batch), which MCP does not take since its 2025-06-18 revision: "
    "send each request as a message of its own"
)
ID_UNUSABLE = (
    "the request's id is neither a string nor an integer (MCP requires one of those, never null): "
    "give each request a string or integer id"
)
NOTIFICATION_PREFIX = "notifications/"  # the notifications MCP defines: a request without an id is any other method


def call_without_id(taken: str) -> str:
    """The log line for a request sent without an id, read as a notification; ``taken``: what the transport did."""
    return (
        f"a request came without an id, so JSON-RPC reads it as a notification: {taken}, not answered, "
        "nothing run; give each request a string or integer id (said once per session)"
    )


NOT_A_MESSAGE = (
    'the message is JSON but no JSON-RPC message (an object with "jsonrpc": "2.0", a string "method" and, '
    "for a request, a string or integer id): send one JSON-RPC message object"
)


def invalid_request(message: str, request_id: types.RequestId | None = None) -> types.JSONRPCError:
    """The Invalid Request (-32600) answering a message MCP does not take."""
    return types.JSONRPCError(
        jsonrpc="2.0", id=request_id, error=types.ErrorData(code=types.INVALID_REQUEST, message=message)
    )


def not_a_message(raw: str) -> types.JSONRPCError:
    """The answer to ``raw``, valid JSON that is not one JSON-RPC message: a batch, or anything else."""
    if raw.lstrip().startswith("["):
        return invalid_request(BATCH_REFUSED)
    return invalid_request(NOT_A_MESSAGE, top_level_request_id(raw))


def has_top_level_id(raw: str) -> bool:
    """Whether the outermost object of ``raw`` has an ``id`` key (what a notification must not have)."""
    return "id" in (top_level_keys(raw) or {})


def top_level_method(raw: str) -> str | None:
    """The ``method`` of a JSON-RPC message's text, read as :func:`top_level_request_id` reads an id; ``None`` if
    unsure or absent."""
    keys = top_level_keys(raw)
    method = _scalar_after_colon(raw, keys["method"]) if keys is not None and "method" in keys else None
    return method if isinstance(method, str) else None


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
    keys = top_level_keys(raw, whole=whole)
    if keys is None or "method" not in keys or "id" not in keys:
        return None
    return _scalar_after_colon(raw, keys["id"])


def top_level_response_id(raw: str) -> int | str | None:
    """The ``id`` of a JSON-RPC response line (``result`` or ``error``, no ``method``), as :func:`top_level_request_id`
    reads a request's; ``None`` if unsure."""
    keys = top_level_keys(raw)
    if keys is None or "method" in keys or "id" not in keys or not ({"result", "error"} & set(keys)):
        return None
    return _scalar_after_colon(raw, keys["id"])


def top_level_keys(raw: str, *, whole: bool = True) -> dict[str, int] | None:
    """The keys of the line's outermost object, each with the index just after it; ``None`` if unsure.

    ``whole=False``: those before a string the line's cut leaves open.

    The brackets, commas and quotes outside strings are read one by one; a
    string is skipped whole, its end found by ``str.find`` (:func:`_string_end`
    when it holds a backslash).
    """
    if len(raw) > _MAX_SCAN or not raw.lstrip().startswith("{"):
        return None
    depth, i, n = 0, 0, len(raw)
    keys: dict[str, int] = {}
    expecting_key = False
    while i < n:
        c = raw[i]
        if c == '"':
            end = raw.find('"', i + 1)  # the string's end, unless a backslash comes first (then _string_end)
            if end > i + 1 and raw.find("\\", i + 1, end) >= 0:
                end = _string_end(raw, i)
            if end < 0:
                return None if whole else keys
            if depth == 1 and expecting_key:
                key = _key(raw[i : end + 1])
                if key is None:
                    return None
                keys[key] = end + 1  # (the last of a key given twice, as json.loads keeps)
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


def _key(quoted: str) -> str | None:
    """The key the JSON string ``quoted`` (quotes included) spells, its escapes read; ``None`` if it is no string."""
    if "\\" not in quoted:
        return quoted[1:-1]
    try:
        key = json.loads(quoted)
    except ValueError:
        return None
    return key if isinstance(key, str) else None


def _string_end(raw: str, start: int) -> int:
    """Where the string opened by the quote at ``start`` ends (its closing quote's index); -1 if the text does not
    close it.

    The string ends at the first quote no backslash escapes (a backslash escapes the character after it, whatever
    it is). Quotes and backslashes are found by ``str.find`` (memchr), not character by character, and no part of
    the text is searched twice (the quote found stays the candidate until an escape passes it).
    """
    at, quote = start + 1, raw.find('"', start + 1)
    while quote >= 0:
        backslash = raw.find("\\", at, quote)
        if backslash < 0:
            return quote
        at = backslash + 2
        if at > quote:
            quote = raw.find('"', at)
    return -1


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
