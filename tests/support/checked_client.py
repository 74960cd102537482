"""The SDK client the suites call tools with: every refusal of a verifier tool is held to the refusal contract.

:class:`CheckedClient` is ``mcp.Client`` with one addition: each ``call_tool`` result that is an
``isError`` answer of a ``rimthan.*`` tool is checked against the published refusal contract
(:func:`support.refusal_contract.check_tool_result`) before the test sees it. Nothing else changes:
the call, its arguments and its result are the SDK's own. Every test that connects an SDK client in
the test process uses it (directly, or through ``support.servers`` / ``support.processes``); a host kit
object handed one (``client_caller``, a ``Bridge``, a ``StandIn``) calls the verifier through it too.
"""

from __future__ import annotations

from typing import Any, Self

from mcp import Client
from mcp_types import CallToolResult

from support.refusal_contract import check_tool_result


class CheckedClient(Client):
    """``mcp.Client`` whose ``call_tool`` checks a verifier tool's refusal against the refusal contract."""

    async def __aenter__(self) -> Self:  # the SDK's says ``Client``: ``async with`` keeps this class
        await super().__aenter__()
        return self

    async def call_tool(self, name: str, *args: Any, **kwargs: Any) -> CallToolResult:
        result = await super().call_tool(name, *args, **kwargs)
        check_tool_result(name, result)
        return result
