"""The bridge's tools as a model sees them, and the check of a model's arguments against them.

The descriptions are the model's manual: each says when to call the tool and
what to do with its result, within the 6 KB the definitions may take
(``make agent-demo`` prints their size, tests/host keep it). Every input
schema is closed; :func:`argument_problem` turns a call that does not fit
(an unknown key, a missing one, a wrong type or value, a value JSON cannot
carry exactly, nesting past :data:`ARGUMENT_DEPTH`) into words saying how to
call the tool again, before anything reaches the run. :func:`without_host_hints`
first drops the arguments a host adds to every tool for itself (:data:`HOST_HINTS`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Any

from mcp import types
from rimthan_workflow_registry.errors import QUOTE_MAX_CHARS, quoted
from rimthan_workflow_registry.limits import MAX_ARGUMENT_DEPTH, depth_exceeds, first_non_json_value, too_deep_message

if TYPE_CHECKING:
    from rimthan_workflow_registry.jsonschema_formats import Draft202012Validator, ValidationError

INSTRUCTIONS = (
    "Drives a Rimthan workflow run in this project and keeps every token and digest for you. Call start_run "
    "(or resume_run after a restart), then do what each result says: write the files it names with your own "
    "tools, call step_done (with the facts the user confirmed in the step, if any), run each validator in its "
    "own subagent and pass its verdict with record_verdict, answer questions with answer_question. An error "
    "result says what to fix and which tool to call next; show_step says where the run is."
)
ARGUMENT_DEPTH = MAX_ARGUMENT_DEPTH - 2
"""Containers nested in one call's arguments. A fact's value reaches the verifier two levels deeper than the
bridge takes it (``facts.f`` -> ``migration.confirmed_state.state.f``), within the verifier's own bound there."""
PROBLEM_CHARS = 4 * QUOTE_MAX_CHARS
"""A problem's words quote what the model sent (unknown keys, a value's path, a wrong value): cut past this."""
HOST_HINTS = frozenset({"wait_for_previous"})
"""Arguments a host adds to every tool's schema for its own use and passes on with the call: Gemini CLI's
``wait_for_previous`` (run this call after the turn's earlier ones), which the model may set on any call."""
_FACTS = {
    "type": "object",
    "description": "Facts the user confirmed (ask; never invent): field name -> value, in the type its field takes "
    '(a list field as a JSON array of texts, e.g. ["A", "B"]; a date as YYYY-MM-DD).',
}


def _tool(name: str, description: str, properties: dict[str, Any], required: tuple[str, ...] = ()) -> types.Tool:
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    return types.Tool(name=name, description=description, input_schema=schema)


TOOLS: tuple[types.Tool, ...] = (
    _tool(
        "start_run",
        "Start a run of a workflow in this project. If the result lists missing facts, ask the user for all of "
        "them and call again with every fact. One run is active at a time: while one is unfinished, continue it, "
        "or pass new_run true if the user wants another (the unfinished one stays resumable).",
        {
            "workflow": {
                "type": "string",
                "description": "Workflow name, e.g. research (show_step with no run lists them).",
            },
            "facts": _FACTS,
            "new_run": {"type": "boolean", "description": "Start even though a run here is unfinished."},
        },
        ("workflow", "facts"),
    ),
    _tool(
        "show_step",
        "Where the active run is: the step's instructions, the files to write (with JSON Schema copies), the "
        "question, or the validators still waiting. Call it whenever unsure what to do next.",
        {},
    ),
    _tool(
        "answer_question",
        "Answer the question the run waits on with the user's choice, exactly one of the offered choices. Ask the "
        "user first, unless the result says they are asked directly in their client (then the bridge asks them, "
        "and field alone will do). Pass in field the question's field, "
        "as the result named it (required with an answer you relay): an answer re-sent after the run moved on is "
        "then refused, not taken for the next question.",
        {
            "answer": {
                "type": ["string", "number", "boolean"],
                "description": "The user's choice, as the choices show it (5 or true may also be sent as JSON).",
            },
            "field": {"type": "string", "description": "The question's field, as the result named it."},
        },
    ),
    _tool(
        "step_done",
        "The current step's work is done and its files are written at the listed paths (regular files in the "
        "project, not symlinks). The bridge reads and checks them; if refused, fix the named file and call again. "
        "Pass in facts every field the step had the user confirm (e.g. options, deadline), and in step the id of "
        "the step you finished (required for a step without files): a step_done re-sent after the run moved on is "
        "then refused, not taken for the next.",
        {"facts": _FACTS, "step": {"type": "string", "description": "The finished step's id, as the result named it."}},
    ),
    _tool(
        "record_verdict",
        "One validator's verdict, after you ran it in its named subagent with what the result lists for it "
        "(instruction text, id and version, the step's files, the confirmed state). One verdict per validator per "
        "round; the last one submits the step. After a fail, fix the "
        "files and call step_done: once a file changed, every validator runs again (a pass holds for the files it "
        "judged).",
        {
            "validator": {"type": "string", "description": "Validator name, e.g. evidence-auditor."},
            "verdict": {"type": "string", "enum": ["pass", "fail"]},
            "findings": {
                "type": "array",
                "items": {"type": "string"},
                "description": "What is wrong, one sentence each (required for fail).",
            },
        },
        ("validator", "verdict"),
    ),
    _tool(
        "migrate_run",
        "Move the run to the newer release a result offered. confirm false previews what restarts, what is redone "
        "and the facts it needs; confirm true migrates once the user agrees (the reply says how they are asked).",
        {
            "to_release": {"type": "string", "description": "Release id; default the one offered."},
            "confirm": {"type": "boolean"},
            "facts": {**_FACTS, "description": "New facts the newer release needs, confirmed by the user."},
        },
        ("confirm",),
    ),
    _tool(
        "resume_run",
        "Continue an unfinished run from its log: after a restart, or to switch to another run.",
        {"run": {"type": "string", "description": "Run id; default the latest unfinished."}},
    ),
)
_BY_NAME = {t.name: t for t in TOOLS}
_JSON_TYPES = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}


def without_host_hints(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The call's arguments less :data:`HOST_HINTS`: no tool of the bridge takes one, and none means the run."""
    return {key: value for key, value in arguments.items() if key not in HOST_HINTS}


def argument_problem(name: str, arguments: Mapping[str, Any]) -> str | None:
    """Why ``arguments`` do not fit tool ``name`` and how to call it instead; None when they fit.

    Values first (any depth, iteratively): one the protocol cannot carry exactly would fail on the way to the
    verifier, and only a value known to be plain JSON is shown back in a message.
    """
    schema = _BY_NAME[name].input_schema
    properties = list(schema["properties"])
    required = schema.get("required") or []
    problem = first_non_json_value(arguments) or _too_deep(arguments)
    if problem is None:
        errors = sorted(_checker(name).iter_errors(dict(arguments)), key=lambda e: list(e.path))
        if not errors:
            return None
        problem = "; ".join(dict.fromkeys(_problem(e, arguments, properties, required) for e in errors))
    takes = f"it takes {', '.join(properties)}" if properties else "it takes no arguments"
    needs = f" ({', '.join(required)} required)" if required else ""
    problem = quoted(problem, PROBLEM_CHARS)
    return f"Nothing was done: {problem}. Call {name} again with the arguments fixed: {takes}{needs}."


@cache
def _checker(name: str) -> Draft202012Validator:
    """Tool ``name``'s schema checker, made on the first call that needs it: a bridge answers ``tools/list`` (a
    host's first check that it is up) without importing jsonschema (``test_bridge_start_imports.py``)."""
    from rimthan_workflow_registry.jsonschema_formats import Draft202012Validator

    return Draft202012Validator(_BY_NAME[name].input_schema)


def _too_deep(arguments: Mapping[str, Any]) -> str | None:
    """Nesting past :data:`ARGUMENT_DEPTH`, named down to the argument's field (``facts.topic``)."""
    if not depth_exceeds(dict(arguments), ARGUMENT_DEPTH):
        return None
    where: list[str] = []
    node: Any = dict(arguments)
    left = ARGUMENT_DEPTH
    while len(where) < 2 and isinstance(node, dict):
        key = next(k for k, v in node.items() if depth_exceeds(v, left - 1))
        where, node, left = [*where, str(key)], node[key], left - 1
    return too_deep_message(".".join(where), left)


def _problem(error: ValidationError, arguments: Mapping[str, Any], known: list[str], required: list[str]) -> str:
    """One problem in words (the tools' schemas are flat: unknown and missing keys are top-level)."""
    where = ".".join(str(p) for p in error.path)
    if error.validator == "additionalProperties":
        extra = sorted(str(k) for k in arguments if k not in known)
        return f"unknown argument{'s' if len(extra) > 1 else ''} {', '.join(extra)}"
    if error.validator == "required":
        return f"missing argument {', '.join(k for k in required if k not in arguments)}"
    if error.validator == "enum":
        choices = " or ".join(json.dumps(c) for c in list(error.validator_value))  # type: ignore[arg-type]
        return f"{where} must be exactly {choices}, not {json.dumps(error.instance)}"
    if error.validator == "type":
        got = _JSON_TYPES.get(type(error.instance), "a number")
        return (
            f"{where} must be {_types(error.validator_value)}, not {got}{_FINDING if _a_report_finding(error) else ''}"
        )
    return f"{where or 'the arguments'}: {error.message}"


_FINDING = ": each finding is one sentence, e.g. the message of a finding in the subagent's report"


def _a_report_finding(error: ValidationError) -> bool:
    """A finding given as an object (a model passing the subagent's JSON report's findings as they are)."""
    return len(error.path) == 2 and error.path[0] == "findings" and isinstance(error.instance, dict)


def _types(json_types: object) -> str:
    """A schema's ``type`` in words: ``a string``, or ``a string, a number or a boolean``."""
    named = [_a(str(t)) for t in json_types] if isinstance(json_types, list) else [_a(str(json_types))]
    return named[0] if len(named) == 1 else f"{', '.join(named[:-1])} or {named[-1]}"


def _a(json_type: str) -> str:
    return {"object": "an object", "array": "an array"}.get(json_type, f"a {json_type}")
