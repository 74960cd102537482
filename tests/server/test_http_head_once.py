"""The head ``http_bounds.BoundedRequests`` reads once is what the app behind it (the session room) decides from.

``session_room`` told a request naming a session from one opening none by scanning the headers a second time; it
now reads ``Mcp-Session-Id`` from the ``RequestHead`` kept in the scope's state (``http_bounds.head_of``). The
real ``BoundedRequests`` (sessions on) in front of an app that records what it is given, called as uvicorn calls
it: the head it reads is the one the checks made, in the very state dict uvicorn's protocol marks ``BODY_IN`` in.
"""

from __future__ import annotations

import anyio
from rimthan_workflow_mcp.http_bounds import BODY_IN, BoundedRequests, RequestHead, head_of
from rimthan_workflow_mcp.http_shape import SESSION_HEADER
from starlette.types import Message, Receive, Scope, Send

BODY = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}'


def _served(headers: list[tuple[bytes, bytes]]) -> tuple[RequestHead, dict[str, object], dict[str, object]]:
    """What the app behind ``BoundedRequests`` read as the request's head and state, and uvicorn's state."""
    seen: list[Scope] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(scope)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def receive() -> Message:
        return {"type": "http.request", "body": BODY, "more_body": False}

    async def send(_message: Message) -> None:
        return None

    state: dict[str, object] = {BODY_IN: True}
    scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": headers, "state": state, "client": None}
    anyio.run(BoundedRequests(app, stateless=False), scope, receive, send)
    (given,) = seen
    return head_of(given), given["state"], state


def test_the_app_behind_reads_the_session_id_from_the_head_read_once() -> None:
    common = [(b"host", b"127.0.0.1:8765"), (b"content-type", b"application/json")]
    head, given, uvicorns = _served([*common, (SESSION_HEADER, b"4f1c2d0e")])
    assert head.first.get(SESSION_HEADER) == b"4f1c2d0e" and head.repeated is None
    assert given is uvicorns  # one state dict: what the protocol marks in it later is seen behind
    head, _, _ = _served(common)
    assert SESSION_HEADER not in head.first
