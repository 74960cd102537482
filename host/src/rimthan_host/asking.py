"""Asking the person directly: elicitation in both MCP protocol eras.

A 2025-11-25 client that declared elicitation gets ``elicitation/create``
requests during the tool call; a 2026-07-28 client gets an ``input_required``
result carrying every question at once, answers them, and retries the same
call with the responses (the SDK's request-state boundary seals the state the
bridge round-trips). Only an ``accept`` whose form says yes (or, a fact's own
form, gives a value of its kind) is a confirmation; ``decline``, ``cancel`` or
an unticked box never is. A reply
that is no answer to the question (the wrong shape, another action, content
the requested schema refuses, an error) is :class:`ReplyUnreadable`: the
question ends, and nothing is recorded or sent. A client
without elicitation gets no questions: the bridge then asks the model to ask
the user, and records the confirmation as relayed by the model; a bridge that
requires elicitation (``rimthan-host serve --require-elicitation``) refuses
such a move instead (:func:`cannot_ask`), nothing recorded or sent.

A form's ``default`` is sent as the negotiated era allows: the 2025-06-18
schema gives only the boolean primitive a ``default`` (string, number and enum
defaults came with 2025-11-25), so a 2025-06-18 client gets the form without
them (the message still says what the model passed).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS, is_version_at_least
from pydantic import ValidationError
from rimthan_workflow_mcp.stdio_drain import INPUT_ENDED
from rimthan_workflow_registry.errors import FailureCode, quoted

from .require_option import REQUIRE_ELICITATION_ENV

# The errors meaning no reply can come: the end of input (our drain) and the end of the session (the SDK).
_NEVER_CAME = frozenset({INPUT_ENDED.message, "Connection closed"})

ACTIONS = ("accept", "decline", "cancel")
VALUE = "value"  # the content key of a fact's own form
SCALAR_DEFAULTS_SINCE = "2025-11-25"  # the era giving string, number and enum primitives a default (before: boolean)


@dataclass(frozen=True)
class Ask:
    """One question for the person: a confirmation (yes/no), a choice among ``choices``, or a fact's own ``form``
    (the primitive schema of the value they fill in or pick, under ``value``: :mod:`rimthan_host.fact_forms`)."""

    key: str
    message: str
    choices: tuple[str, ...] = ()
    default: str | None = None
    form: Mapping[str, Any] | None = None

    def schema(self, scalar_defaults: bool = True) -> dict[str, Any]:
        """The requested schema; without a ``default`` on a non-boolean primitive unless ``scalar_defaults``."""
        if self.form is not None:
            own = {k: v for k, v in self.form.items() if scalar_defaults or k != "default" or _boolean(self.form)}
            return {"type": "object", "properties": {VALUE: own}, "required": [VALUE]}
        if self.choices:
            prop: dict[str, Any] = {"type": "string", "title": "Answer", "enum": list(self.choices)}
            if scalar_defaults and self.default in self.choices:
                prop["default"] = self.default
            return {"type": "object", "properties": {"answer": prop}, "required": ["answer"]}
        return {
            "type": "object",
            "properties": {"confirm": {"type": "boolean", "title": "Confirm", "description": "Yes, this is right"}},
            "required": ["confirm"],
        }


def _boolean(form: Mapping[str, Any]) -> bool:
    return form.get("type") == "boolean"


@dataclass(frozen=True)
class Answer:
    """What the person did: ``accept`` with a value, or ``decline`` / ``cancel`` (never a confirmation)."""

    action: str
    value: Any = None
    filled: bool = False  # the value the person gave in a fact's own form (any value of its type, false too)

    @property
    def confirmed(self) -> bool:
        return self.action == "accept" and (self.filled or self.value not in (None, False, ""))

    @property
    def said(self) -> str:
        """What the person did, for the words and ``data.user``: ``no`` (an accept that confirms nothing), or the
        action (``decline``, ``cancel``; ``accept`` when it confirmed)."""
        return "no" if self.action == "accept" and not self.confirmed else self.action


class ReplyUnreadable(Exception):
    """The client's reply to the question ``key`` is no answer to it (``why``): nothing is recorded or sent."""

    code = FailureCode.CONFIRMATION_REQUIRED

    def __init__(self, key: str, why: str) -> None:
        super().__init__(why)
        self.key = key.removeprefix("fact:")
        self.why = why

    def words(self, tool: str) -> str:
        """The refusal for the model: one line with the code, then what to do."""
        return (
            f"{self.code.value}: the user's reply to the question about {self.key} could not be read ({self.why}); "
            "nothing was recorded or sent to the verifier, and the run is where it was.\n"
            f"next: call {tool} again to ask the user again; if the same happens, tell the user their client "
            "answers the question with a malformed reply."
        )


@dataclass(frozen=True)
class CannotAsk:
    """A move that would record the user's confirmation of ``what``, refused: the bridge requires elicitation and
    the client of the call declared none, so only the model's word could stand for the user's."""

    tool: str
    what: str
    code: ClassVar[FailureCode] = FailureCode.CONFIRMATION_REQUIRED

    def words(self) -> str:
        """The refusal for the model: one line with the code, then what to do."""
        return (
            f"{self.code.value}: this bridge requires the user's own confirmation (--require-elicitation) and the "
            f"client did not declare elicitation, so it cannot ask the user to confirm {self.what}; nothing was "
            "recorded or sent to the verifier, and the run is where it was.\n"
            f"next: tell the user; {self.tool} needs a client that declares elicitation (Claude Code does), or "
            f"rimthan-host serve started with neither --require-elicitation nor {REQUIRE_ELICITATION_ENV} on (the "
            "Claude Code plugin's require_elicitation option sets it): then the model relays the user's word."
        )


def cannot_ask(tool: str, arguments: Mapping[str, Any]) -> CannotAsk | None:
    """The refusal of a call (``tool`` with its checked ``arguments``) that would record a user's confirmation, for
    a client that cannot elicit; None for a call that records none (a migration's preview, a question shown again)."""
    facts = arguments.get("facts") or {}
    named = f"the facts ({', '.join(quoted(field, 80) for field in facts)})" if facts else ""
    if tool in ("start_run", "step_done"):
        what = named
    elif tool == "answer_question":
        field = arguments.get("field")
        about = f" about {quoted(field, 80)}" if isinstance(field, str) else ""
        what = f"their answer to the question{about}" if arguments.get("answer") is not None else ""
    elif tool == "migrate_run":
        migration = "the migration" if arguments.get("confirm") is True else ""
        what = " and ".join(part for part in (migration, named) if part)
    else:
        what = ""
    return CannotAsk(tool, what) if what else None


def _never_came(error: types.ErrorData) -> bool:
    """Whether ``error`` is the end of the client's input (:data:`INPUT_ENDED`) or of the session (the SDK's own
    ``Connection closed``), not an error the client answered with (it may use the same code)."""
    return error.code == types.CONNECTION_CLOSED and error.message in _NEVER_CAME


class ReplyNeverCame(ReplyUnreadable):
    """The client closed its connection (its input ended) before the user answered ``key``: none can come now."""

    def __init__(self, key: str) -> None:
        super().__init__(key, "the client closed its connection before the user answered")

    def words(self, tool: str) -> str:
        return (
            f"{self.code.value}: the client closed its connection before the user answered the question about "
            f"{self.key}; nothing was recorded or sent to the verifier, and the run is where it was.\n"
            f"next: once the client is connected again, call {tool} again to ask the user again."
        )


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
    def scalar_defaults(self) -> bool:
        """Whether the negotiated era lets a form's string, number and enum primitives carry a ``default``."""
        return self.ctx is not None and is_version_at_least(str(self.ctx.protocol_version), SCALAR_DEFAULTS_SINCE)

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
                    one.message, one.schema(self.scalar_defaults), related_request_id=self.ctx.request_id
                )
            except MCPError as exc:  # the client answered with an error, a reply no parser reads, or is gone
                if _never_came(exc.error):
                    raise ReplyNeverCame(one.key) from None
                raise ReplyUnreadable(
                    one.key, f"the client answered with an error: {quoted(exc.error.message)}"
                ) from None
            except ValidationError as exc:  # a result of the wrong shape, an action the protocol has not
                raise ReplyUnreadable(one.key, f"it is no elicitation result: {_first_error(exc)}") from None
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
    """What the person did, as the reply says; :class:`ReplyUnreadable` for a reply that is no answer to ``ask``."""
    action = getattr(result, "action", None)
    if action not in ACTIONS:
        raise ReplyUnreadable(ask.key, "it is no elicitation result: its action is not accept, decline or cancel")
    if action != "accept":
        return Answer(str(action))
    content = getattr(result, "content", None)
    if ask.form is not None:
        return _filled(ask, ask.form, content.get(VALUE) if isinstance(content, dict) else None)
    name = "answer" if ask.choices else "confirm"
    value = content.get(name) if isinstance(content, dict) else None
    if not (value in ask.choices if ask.choices else isinstance(value, bool)):
        wanted = f"one of {', '.join(ask.choices)}" if ask.choices else "true or false"
        why = f"an accept whose content does not fit the requested schema: its {name} must be {wanted}"
        raise ReplyUnreadable(ask.key, why)
    return Answer("accept", value)


def _filled(ask: Ask, form: Mapping[str, Any], value: Any) -> Answer:
    """The value the person gave in ``ask``'s own form, if it is of the form's kind (its bounds are the verifier's
    to check); else :class:`ReplyUnreadable`."""
    choices = form.get("enum")
    kind = str(form.get("type"))
    if isinstance(choices, list):
        fits, wanted = value in choices, f"one of {', '.join(map(str, choices))}"
    else:
        fits, wanted = isinstance(value, _KINDS[kind]) and not _bool_as_number(kind, value), f"a {kind}"
    if not fits:
        why = f"an accept whose content does not fit the requested schema: its {VALUE} must be {wanted}"
        raise ReplyUnreadable(ask.key, why)
    return Answer("accept", value, filled=True)


_KINDS: dict[str, type | tuple[type, ...]] = {"string": str, "boolean": bool, "integer": int, "number": (int, float)}


def _bool_as_number(kind: str, value: Any) -> bool:
    """JSON's true is no number, though Python's ``bool`` is an ``int``."""
    return kind != "boolean" and isinstance(value, bool)


def _first_error(exc: ValidationError) -> str:
    """The first thing pydantic found wrong with a reply, in one short line."""
    first = exc.errors()[0]
    where = "/".join(str(part) for part in first.get("loc", ())) or "the result"
    return quoted(f"{where}: {first.get('msg')}", 120)
