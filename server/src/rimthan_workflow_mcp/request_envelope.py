"""What a ``tools/call`` may carry besides its arguments: bounds on its ``id`` and its ``_meta``.

The HTTP body bound (``limits.MAX_REQUEST_BODY_BYTES``) holds every call the
tools' input schemas accept only if what surrounds the arguments is bounded
too: a string ``id`` (``MAX_REQUEST_ID_CHARS``) and ``_meta``
(``MAX_REQUEST_META_BYTES`` as compact JSON). :func:`check_envelope` refuses a
call past either with a JSON-RPC error naming the bound, on every transport,
before its arguments are looked at: a client library chose them, so it is the
library (not the model) that hears of it. A call without ``_meta`` costs one
length check; one with it, one compact serialisation of that (small) object.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError
from rimthan_workflow_registry.json_encoders import compact_encoder
from rimthan_workflow_registry.limits import MAX_REQUEST_ID_CHARS, MAX_REQUEST_META_BYTES

ID_TOO_LONG = (
    "the request id is a string of {chars} characters, past the {bound} a tools/call id may have "
    "(MAX_REQUEST_ID_CHARS): number requests, or use a UUID"
)
META_TOO_LARGE = (
    "the request's _meta is {size} bytes as compact JSON, past the {bound} it may hold "
    "(MAX_REQUEST_META_BYTES): send a progress token and the protocol's own keys, no payloads"
)
_COMPACT = compact_encoder(sort_keys=False, ensure_ascii=False)  # core's prebuilt C encoder: one C call
_WIRE_NAMES = {"progress_token": "progressToken"}  # the SDK hands _meta over with its Python names
META_UNREADABLE = (
    "the request's _meta cannot be written back as JSON (a NaN or an infinity, or nesting too deep): send plain JSON"
)


def check_envelope(request_id: object, meta: Mapping[str, Any] | None) -> None:
    """Raise ``MCPError`` (``Invalid Request`` / ``Invalid params``) when the id or ``_meta`` is past its bound."""
    if isinstance(request_id, str) and len(request_id) > MAX_REQUEST_ID_CHARS:
        raise MCPError(types.INVALID_REQUEST, ID_TOO_LONG.format(chars=len(request_id), bound=MAX_REQUEST_ID_CHARS))
    if not meta:
        return
    try:
        wire = {_WIRE_NAMES.get(key, key): value for key, value in meta.items()}
        size = len(_COMPACT(wire).encode("utf-8"))
    except (RecursionError, ValueError, TypeError):  # the parser took what strict JSON cannot write back (NaN)
        raise MCPError(types.INVALID_PARAMS, META_UNREADABLE) from None
    if size > MAX_REQUEST_META_BYTES:
        raise MCPError(types.INVALID_PARAMS, META_TOO_LARGE.format(size=size, bound=MAX_REQUEST_META_BYTES))
