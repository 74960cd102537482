"""One line in the operator's log per tool call: the trail a fleet's logs answer "which runs used release X"
and "who migrated what" from.

A served call is ``"call served"`` (info): the tool, the status, the release and step the run is now on, the
checkpoint's sequence and digest, and ``parent``, the digest of the checkpoint the call was sent with. Checkpoints
link by digest (a run's checkpoint names its parent's), so the records of one run chain from its
``start_workflow`` (sequence 1, no parent) whichever replica served each call. A confirmed migration adds
``migrated_from`` (the release the run left); ``peer`` (added to every record logged while an HTTP request is
handled) says which client asked. A refusal is ``"call refused"`` (info): the tool and the code. Never a
confirmed value, an artifact or a token.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import mcp_types as types
from rimthan_workflow_registry.run import token_digest

from .logs import get_logger

_log = get_logger("calls")


def log_call(tool: str, arguments: Mapping[str, Any], result: types.CallToolResult) -> None:
    """The call's one record (see module)."""
    if not _log.isEnabledFor(logging.INFO):  # an operator's --log-level warning: no record, none built
        return
    structured = result.structured_content or {}
    if result.is_error:
        _log.info("call refused", extra={"tool": tool, "code": (structured.get("error") or {}).get("code")})
        return
    sent = arguments.get("checkpoint")
    record: dict[str, Any] = {
        "tool": tool,
        "status": structured.get("status"),
        "release": (structured.get("release") or {}).get("id"),
        "step": (structured.get("step") or {}).get("id"),
        "sequence": structured.get("sequence"),
        "checkpoint": structured.get("checkpoint_digest"),
        "parent": token_digest(sent) if isinstance(sent, str) and sent.isascii() else None,
    }
    migration = structured.get("migration") or {}
    if migration.get("confirmed") and structured.get("checkpoint_digest"):
        record["migrated_from"] = (migration.get("from") or {}).get("release")
    _log.info("call served", extra=record)
