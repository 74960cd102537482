"""A ``tools/call`` reply handed to the SDK as the dict its model dumps to, so the SDK does not dump it again.

The SDK shapes what a request handler returns in two passes: a model is first
dumped (``model_dump(by_alias=True, mode="json", exclude_none=True)``, a walk of
the whole result, ``structuredContent`` included), then that dict is validated
against the negotiated era's result schema and dumped again; a dict skips the
first pass only. Every result :func:`~rimthan_workflow_mcp.server.call_tool`
returns has one shape (one text content, the structured content, ``isError``),
which :func:`wire_reply` writes as the first pass would; any other shape is
dumped by pydantic as before. The SDK's check of the reply against the era's
schema still runs on every reply, and the bytes sent are the same.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types

_DUMP_OPTIONS: dict[str, Any] = {"by_alias": True, "mode": "json", "exclude_none": True}  # the SDK's first pass


def wire_reply(result: types.CallToolResult) -> dict[str, Any]:
    """``result`` as ``result.model_dump(by_alias=True, mode="json", exclude_none=True)`` gives it.

    Written directly for a result with no ``_meta`` and one plain text content
    (no annotations, no ``_meta``); the structured content is passed on as it
    is (the SDK's second pass writes it in JSON mode, as the first would).
    """
    content = result.content
    text = content[0] if len(content) == 1 else None
    if result.meta is not None or type(text) is not types.TextContent or not _plain(text):
        return result.model_dump(**_DUMP_OPTIONS)
    reply: dict[str, Any] = {"content": [{"type": "text", "text": text.text}]}
    if result.structured_content is not None:
        reply["structuredContent"] = result.structured_content
    reply["isError"] = result.is_error
    reply["resultType"] = result.result_type
    return reply


def _plain(text: types.TextContent) -> bool:
    return text.annotations is None and text.meta is None
