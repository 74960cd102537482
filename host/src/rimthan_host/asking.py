"""Asking the person directly: elicitation in both MCP protocol eras.

A 2025-11-25 client that declared elicitation gets ``elicitation/create``
requests during the tool call; a 2026-07-28 client gets an ``input_required``
result carrying every question at once, answers them, and retries the same
call with the responses (the SDK's request-state boundary seals the state the
bridge round-trips). Only an ``accept`` whose form says yes is a
confirmation; ``decline``, ``cancel`` or an unticked box never is. A client
without elicitation gets no questions: the bridge then asks the model to ask
the user, and records the confirmation as relayed by the model.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS


@dataclass(frozen=True)
class Ask:
    """One question for the person: a confirmation (yes/no) or a choice among ``choices``."""

    key: str
    message: str
    choices: tuple[str, ...] = ()
    default: str | None = None

    def schema(self) -> dict[str, Any]:
        if self.choices:
            prop: dict[str, Any] = {"type": "string", "title": "Answer", "enum": list(self.choices)}
            if self.default in self.choices:
                prop["default"] = self.default
            return {"type": "object", "properties": {"answer": prop}, "required": ["answer"]}
        return {
            "type": "object",
            "properties": {"confirm": {"type": "boolean", "title": "Confirm", "description": "Yes, this is right"}},
            "required": ["confirm"],
        }


@dataclass(frozen=True)
class Answer:
    """What the person did: ``accept`` with a value, or ``decline`` / ``cancel`` (never a confirmation)."""

    action: str
    value: Any = None

    @property
    def confirmed(self) -> bool:
        return self.action == "accept" and self.value not in (None, False, "")


class InputNeeded(Exception):
    """A 2026-07-28 client must answer these questions and retry the call."""

    def __init__(self, result: types.InputRequiredResult) -> None:
        super().__init__("input required")
        self.result = result


class Asker:
    """How this tool call can reach the person (if at all)."""

    def __init__(self, ctx: ServerRequestContext[Any] | None, params: types.CallToolRequestParams | None) -> None:
        self.ctx = ctx
        self.params = params

    @property
    def available(self) -> bool:
        if self.ctx is None:
            return False
        capabilities = self.ctx.session.client_capabilities
        return capabilities is not None and capabilities.elicitation is not None

    @property
    def modern(self) -> bool:
        return self.ctx is not None and self.ctx.protocol_version in MODERN_PROTOCOL_VERSIONS

    async def ask(self, asks: Sequence[Ask]) -> dict[str, Answer]:
        """Every question answered, in order; in the modern era raises :class:`InputNeeded` first."""
        if not asks:
            return {}
        assert self.ctx is not None and self.params is not None
        if self.modern:
            return self._from_responses(asks)
        out: dict[str, Answer] = {}
        for one in asks:
            try:
                result = await self.ctx.session.elicit_form(
                    one.message, one.schema(), related_request_id=self.ctx.request_id
                )
            except MCPError as exc:  # the client answered with an error, or a reply no parser reads
                out[one.key] = Answer(f"no readable answer: {exc.error.message}")
                break
            out[one.key] = _answer(one, result)
            if not out[one.key].confirmed:
                break  # nothing after a refusal is asked: the move will not happen
        return out

    def _from_responses(self, asks: Sequence[Ask]) -> dict[str, Answer]:
        assert self.params is not None
        responses: Mapping[str, Any] = self.params.input_responses or {}
        expected = json.dumps(sorted(a.key for a in asks))
        if self.params.request_state == expected and all(a.key in responses for a in asks):
            return {a.key: _answer(a, responses[a.key]) for a in asks}
        requests: dict[str, types.InputRequest] = {
            a.key: types.ElicitRequest(
                params=types.ElicitRequestFormParams(message=a.message, requested_schema=a.schema())
            )
            for a in asks
        }
        raise InputNeeded(types.InputRequiredResult(input_requests=requests, request_state=expected))


def _answer(ask: Ask, result: Any) -> Answer:
    action = getattr(result, "action", None)
    if action != "accept":
        return Answer(str(action or "cancel"))
    content = getattr(result, "content", None) or {}
    if ask.choices:
        value = content.get("answer")
        return Answer("accept", value if value in ask.choices else None)
    return Answer("accept", content.get("confirm") is True)
