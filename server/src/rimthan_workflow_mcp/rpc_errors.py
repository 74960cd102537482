"""A failure answered as a JSON-RPC error (a resource or prompt read): its code and what to do, in ``data``.

A tool refusal carries ``{"error": {code, message, next}}``; ``resources/read`` and ``prompts/get`` have no
result to carry it in, so their refusals are JSON-RPC errors whose ``data`` holds the same ``code`` and
``next`` (``remediation.harness_next_step``: the one table, no second copy), plus what was asked for.
"""

from __future__ import annotations

from typing import Any

from mcp.shared.exceptions import MCPError
from rimthan_workflow_registry.errors import RegistryError
from rimthan_workflow_registry.remediation import harness_next_step


def failure_error(jsonrpc_code: int, failure: RegistryError, **asked: Any) -> MCPError:
    """``failure`` as a JSON-RPC error: message ``<code>: <message>``; ``data``: code, next and ``asked``."""
    data = {"code": failure.code.value, **asked, "next": harness_next_step(failure)}
    return MCPError(code=jsonrpc_code, message=f"{failure.code.value}: {failure.message}", data=data)
