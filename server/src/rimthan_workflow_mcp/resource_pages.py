"""Pages of ``resources/list``: a stable slice of one listing each, named by an opaque, stateless cursor.

A release of many files held beside others would otherwise make one reply of tens of thousands of entries.
The listing is cut into pages of :data:`PAGE_SIZE` resources; the first page also holds every manifest
resource (they come first), so a client that reads only the first page still learns every workflow.

A cursor says which listing it belongs to (:func:`listing_key`: a digest of what the listing is built from,
the contracts and the held releases with where new runs start) and where its page starts. Nothing is kept
per cursor: any server holding the same releases (an HTTP replica) reads it the same. A cursor is checked,
never trusted: one from a listing that has changed since, or malformed, or naming a position no page starts
at, is refused (``invalid_arguments``, JSON-RPC -32602) with the one step that always works: list again
from the start. It is no secret (anyone who knows what is held can make one); a right one gives only a page
the listing would give anyway.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from rimthan_workflow_registry.errors import FailureCode, RegistryError

PAGE_SIZE = 500
"""Resources a page holds (the first page: at least every manifest). A page of release files is about 100 KB
of JSON, far below any client's message bound, and a release of 10,000 files still only some 20 pages
(docs/server.md says how that was measured); the host bridge follows up to 1000 pages."""

LIST_AGAIN = "list resources again from the start: call resources/list without a cursor, then follow nextCursor"
_VERSION = b"\x01"
_KEY_BYTES = 16
_POSITION_BYTES = 4
_CURSOR_BYTES = len(_VERSION) + _KEY_BYTES + _POSITION_BYTES
_CURSOR_CHARS = 28  # base64url of the 21 bytes, unpadded


@dataclass(frozen=True)
class PageSpan:
    """Where a page starts and ends in its listing, and the cursor of the next page (None: the last)."""

    start: int
    stop: int
    next_cursor: str | None


def listing_key(parts: Iterable[str]) -> bytes:
    """What names one listing: a digest of ``parts`` (each what the listing is built from, in its order)."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode("utf-8") + b"\n")
    return digest.digest()[:_KEY_BYTES]


def page_span(key: bytes, total: int, leading: int, cursor: str | None) -> PageSpan:
    """The page ``cursor`` names in the listing ``key`` of ``total`` resources, the first ``leading`` of which
    the first page must hold; ``None``: the first page. Raises ``RegistryError`` for a cursor not to follow."""
    first_stop = max(PAGE_SIZE, leading)
    start = 0 if cursor is None else _position(key, total, first_stop, cursor)
    stop = min(total, first_stop if start == 0 else start + PAGE_SIZE)
    return PageSpan(start, stop, _cursor(key, stop) if stop < total else None)


def _cursor(key: bytes, position: int) -> str:
    raw = _VERSION + key + position.to_bytes(_POSITION_BYTES, "big")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _position(key: bytes, total: int, first_stop: int, cursor: str) -> int:
    raw = _decoded(cursor)
    if raw is None or not raw.startswith(_VERSION):
        raise _refused("this cursor is not one this server gave")
    if raw[len(_VERSION) : len(_VERSION) + _KEY_BYTES] != key:
        raise _refused("the resource listing has changed since this cursor was given")
    position = int.from_bytes(raw[-_POSITION_BYTES:], "big")
    if position >= total or position < first_stop or (position - first_stop) % PAGE_SIZE:
        raise _refused("this cursor names no page of the resource listing")
    return position


def _decoded(cursor: str) -> bytes | None:
    """The cursor's bytes, or None unless it is exactly the form :func:`_cursor` writes."""
    if len(cursor) != _CURSOR_CHARS or not cursor.isascii():
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    except (binascii.Error, ValueError):
        return None
    if len(raw) != _CURSOR_BYTES or base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=") != cursor:
        return None
    return raw


def _refused(message: str) -> RegistryError:
    said = f"{message}; list resources again from the start, without a cursor"
    return RegistryError(FailureCode.INVALID_ARGUMENTS, said, next_step=LIST_AGAIN)
