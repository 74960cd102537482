"""HTTP: CORS for the origins the DNS-rebinding protection already accepts.

A browser page may read an answer from another origin only when the answer
says so (``Access-Control-Allow-Origin``), and sends a ``POST`` with a JSON
body only after a preflight ``OPTIONS`` was answered. Without this a page at
an origin the operator allowed with ``--allowed-host`` had its calls made but
their answers hidden, and its preflight answered 405. An origin the protection
refuses gets no CORS header, and its preflight the usual 405 (so a browser
sends nothing). The ``Origin`` check is the SDK's (``TransportSecuritySettings``):
an exact value, or ``scheme://host:*`` for any port.
"""

from __future__ import annotations

from collections.abc import Sequence

from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# What an MCP client sends on a request besides the CORS-safelisted headers (both protocol eras).
REQUEST_HEADERS = b"content-type, accept, authorization, last-event-id, mcp-protocol-version, mcp-session-id, " + (
    b"mcp-method, mcp-name"
)
# What a client reads from an answer: the session id (with --http-sessions) and the protocol version.
EXPOSED_HEADERS = b"mcp-session-id, mcp-protocol-version"
PREFLIGHT_MAX_AGE = b"600"  # seconds a browser may keep a preflight's answer


class CrossOrigin:
    """ASGI wrapper: a preflight from an allowed origin answered 204; every answer to one says it may read it."""

    def __init__(self, app: ASGIApp, security: TransportSecuritySettings, methods: Sequence[str]) -> None:
        self.app = app
        self.origins = tuple(o.lower() for o in security.allowed_origins)
        self.methods = ", ".join(methods).encode()

    def allows(self, origin: str) -> bool:
        """The SDK's Origin rule, with host names compared without case (as ``http_bounds`` compares them)."""
        origin = origin.lower()
        return origin in self.origins or any(
            o.endswith(":*") and origin.startswith(o[:-1]) and origin[len(o) - 1 :].isdigit() for o in self.origins
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        origin = _header(scope, b"origin") if scope["type"] == "http" else None
        if origin is None or not self.allows(origin.decode("latin-1")):
            await self.app(scope, receive, send)
        elif scope["method"] == "OPTIONS":
            headers = [*_allow(origin), (b"access-control-allow-methods", self.methods)]
            headers += [(b"access-control-allow-headers", REQUEST_HEADERS)]
            headers += [(b"access-control-max-age", PREFLIGHT_MAX_AGE), (b"content-length", b"0")]
            await send({"type": "http.response.start", "status": 204, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
        else:
            await self.app(scope, receive, _readable_from(origin, send))


def _header(scope: Scope, name: bytes) -> bytes | None:
    return next((value for key, value in scope["headers"] if key.lower() == name), None)


def _allow(origin: bytes) -> list[tuple[bytes, bytes]]:
    return [(b"access-control-allow-origin", origin), (b"vary", b"origin")]


def _readable_from(origin: bytes, send: Send) -> Send:
    """``send`` with the answer's head saying ``origin`` may read it and its MCP headers."""

    async def readable(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = [*message.get("headers", []), *_allow(origin)]
            message = {**message, "headers": [*headers, (b"access-control-expose-headers", EXPOSED_HEADERS)]}
        await send(message)

    return readable
