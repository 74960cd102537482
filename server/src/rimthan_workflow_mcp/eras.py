"""Protocol eras: a client offering a revision that allows JSON-RPC batches is answered with one that does not.

MCP 2024-11-05 and 2025-03-26 allow a JSON-RPC batch (an array of requests);
the 2025-06-18 revision removed batching, and this server refuses a batch on
both transports (:mod:`message_shape`). The SDK answered an ``initialize``
offering either old revision with that same revision, so a client was told
its batches would be served and each was refused. The lifecycle's version
negotiation (https://modelcontextprotocol.io/specification/2025-11-25/basic/lifecycle#version-negotiation):
"If the server supports the requested protocol version, it MUST respond with
the same version. Otherwise, the server MUST respond with another protocol
version it supports. This SHOULD be the latest version supported by the
server." :func:`negotiate_served_era` does so: such an offer is answered with
``SERVED_HANDSHAKE`` (the SDK's newest handshake revision), and a client that
cannot speak it disconnects, as the lifecycle says. Over HTTP an
``MCP-Protocol-Version`` header naming an old revision is refused unread
(``http_bounds``): no answer of this server ever agreed to one.

The SDK's handshake commits the version it reads from the request's own
``params`` after the middleware chain returns (a ``replace``-d context would
answer one version and commit another), so the offer is rewritten in those
params, in place; params that cannot be rewritten are refused, never served at
the old revision.
"""

from __future__ import annotations

from typing import Any

from mcp.server import ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_REQUEST
from mcp_types.version import LATEST_HANDSHAKE_VERSION

from .logs import get_logger

BATCH_ERAS = ("2024-11-05", "2025-03-26")  # the revisions that allow JSON-RPC batches (removed in 2025-06-18)
SERVED_HANDSHAKE = LATEST_HANDSHAKE_VERSION  # what an offer of one of those is answered with
NOT_REWRITABLE = (
    "the initialize request offers protocol version {}, which allows JSON-RPC batches this server does not serve, "
    f"and could not be answered with {SERVED_HANDSHAKE}: offer {SERVED_HANDSHAKE} (or 2025-06-18)"
)
_log = get_logger("transport")


async def negotiate_served_era(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Middleware: an ``initialize`` offering a batch era (:data:`BATCH_ERAS`) is negotiated to
    :data:`SERVED_HANDSHAKE`, in the params the SDK commits from (see module)."""
    params = ctx.params
    if ctx.method == "initialize" and params is not None and params.get("protocolVersion") in BATCH_ERAS:
        offered = params["protocolVersion"]
        if not isinstance(params, dict):
            raise MCPError(code=INVALID_REQUEST, message=NOT_REWRITABLE.format(offered))
        params["protocolVersion"] = SERVED_HANDSHAKE
        _log.info("batch-era offer answered with a served version", extra={"offered": offered})
    return await call_next(ctx)
