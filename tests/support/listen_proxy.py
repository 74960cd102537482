"""A Streamable HTTP proxy in front of a real ``rimthan-mcp``: what an older or a stalling verifier would answer.

``python listen_proxy.py UPSTREAM_URL MODE`` serves on a free port (it logs ``listening on <url>``) and passes
every HTTP request to the real verifier at ``UPSTREAM_URL`` unchanged, its answer streamed back (an SSE stream
too), except where ``MODE`` says otherwise:

- ``unacknowledged``: a ``subscriptions/listen`` request is never answered (held until the client goes away),
  as a verifier that stalls before acknowledging its listen stream;
- ``handshake-only``: a ``server/discover`` request gets ``Method not found``, as a verifier that serves only
  the 2025-11-25 handshake era, so a client connecting with ``mode="auto"`` falls back to ``initialize``.

Every tool call, resource listing and notification is the real verifier's.
"""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx2
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

UNACKNOWLEDGED = "unacknowledged"
HANDSHAKE_ONLY = "handshake-only"
MODES = (UNACKNOWLEDGED, HANDSHAKE_ONLY)
_HOP = {"host", "content-length", "transfer-encoding", "connection"}


def _method(body: bytes) -> tuple[str, Any]:
    try:
        message = json.loads(body)
    except ValueError:
        return "", None
    return (message.get("method", ""), message.get("id")) if isinstance(message, dict) else ("", None)


def _app(upstream: str, mode: str, client: httpx2.AsyncClient) -> Starlette:
    async def relay(request: Request) -> Response:
        body = await request.body()
        method, ident = _method(body)
        if mode == UNACKNOWLEDGED and method == "subscriptions/listen":
            print("listen-proxy: subscriptions/listen held", file=sys.stderr, flush=True)
            await anyio.sleep_forever()  # (cancelled when the client goes away)
        if mode == HANDSHAKE_ONLY and method == "server/discover":
            print("listen-proxy: server/discover refused", file=sys.stderr, flush=True)
            error = {"code": -32601, "message": "Method not found"}
            return JSONResponse({"jsonrpc": "2.0", "id": ident, "error": error})
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        sent = client.build_request(request.method, upstream, headers=headers, content=body)
        answer = await client.send(sent, stream=True)

        async def chunks() -> AsyncIterator[bytes]:
            try:
                async for chunk in answer.aiter_raw():
                    yield chunk
            finally:
                await answer.aclose()

        kept = {k: v for k, v in answer.headers.items() if k.lower() not in _HOP}
        return StreamingResponse(chunks(), status_code=answer.status_code, headers=kept)

    return Starlette(routes=[Route("/mcp", relay, methods=["GET", "POST", "DELETE"])])


async def serve(upstream: str, mode: str) -> None:
    if mode not in MODES:
        raise SystemExit(f"listen-proxy: MODE is one of {', '.join(MODES)}, not {mode!r}")
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    async with httpx2.AsyncClient(timeout=None) as client:
        config = uvicorn.Config(
            _app(upstream, mode, client),
            log_config=None,
            log_level="warning",
            lifespan="off",
            timeout_graceful_shutdown=1,  # (a listen request it holds would keep it from stopping)
        )
        print(f"listen-proxy: listening on http://127.0.0.1:{sock.getsockname()[1]}/mcp", file=sys.stderr, flush=True)
        await uvicorn.Server(config).serve(sockets=[sock])


if __name__ == "__main__":
    anyio.run(serve, sys.argv[1], sys.argv[2])
