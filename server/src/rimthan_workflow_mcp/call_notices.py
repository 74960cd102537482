"""The ``notifications/message`` a client gets per tool call: served (info) or refused (warning).

Never a state value: the tool, its status, step and sequence, or the
refusal's code. Handshake-era clients get it once they chose a level with
``logging/setLevel``; 2026-07-28 clients when the request opted in (the SDK
applies that gate).
"""

from __future__ import annotations

import warnings
from typing import Any

import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from .logs import get_logger

# RFC 5424 order, as MCP's logging levels.
LOG_LEVELS: tuple[types.LoggingLevel, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
NOTIFICATION_LOGGER = "rimthan"  # the logger a notifications/message names to the client (not logs.py's)
_log = get_logger("server")
# logging/setLevel and notifications/message are deprecated from 2026-07-28 on; they still serve 2025-11-25
# clients (and 2026-07-28 clients that opt in per request), so the SDK's deprecation notice is not news here: not
# where a notice is sent, nor where the server declaring the logging capability is made (server.py).
warnings.filterwarnings("ignore", category=MCPDeprecationWarning, module=r"rimthan_workflow_mcp\.(call_notices|server)")


async def notify_call(
    ctx: ServerRequestContext[Any], threshold: str | None, name: str, result: types.CallToolResult
) -> None:
    """One ``notifications/message`` for the call ``name`` answered with ``result``, if the client takes it.

    ``threshold``: the level a handshake-era client asked for with ``logging/setLevel`` (None: nothing is sent).
    """
    structured = result.structured_content or {}
    level: types.LoggingLevel
    if result.is_error:
        level, data = "warning", {"tool": name, "refused": (structured.get("error") or {}).get("code")}
    else:
        level = "info"
        data = {
            "tool": name,
            "status": structured.get("status"),
            "step": (structured.get("step") or {}).get("id"),
            "sequence": structured.get("sequence"),
        }
    modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
    if not modern and (threshold is None or LOG_LEVELS.index(level) < LOG_LEVELS.index(threshold)):
        return
    try:
        await ctx.session.send_log_message(level, data, logger=NOTIFICATION_LOGGER, related_request_id=ctx.request_id)
    except Exception:  # a log line must never fail the call it describes
        _log.debug("log notification not delivered", exc_info=True)
