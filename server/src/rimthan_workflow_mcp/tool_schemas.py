"""The input and output schemas of the four tools, built from the contract documents.

Each input schema is closed and embeds every contract it reaches exactly once
under ``$defs`` (see :mod:`contract_schemas` for why); each output schema holds
its contracts inline (every client validates every result against it, see
:func:`result_schema`). Kept apart from the
documents themselves: these are what ``tools/list`` sends, the documents are
what the resources serve. Plain data, no MCP imports.
"""

from __future__ import annotations

from typing import Any

from rimthan_workflow_registry.limits import MAX_STEP_INPUTS, MAX_STEP_OUTPUTS, MAX_STEP_VALIDATORS

from .contract_schemas import (
    ARTIFACT,
    CONFIRMED_STATE_PROJECTION,
    CONTRACTS,
    FINDING,
    HOST,
    MIGRATION_REQUEST,
    RELEASE_ID,
    VALIDATION_BUNDLE,
    VALIDATOR_REPORT,
    VALIDATOR_SUMMARY,
    WORKFLOW_ID,
)
from .result_contracts import FAILURE, INPUT_BINDING, MIGRATION_PREVIEW, QUESTION, STEP_PAYLOAD
from .schema_parts import DIGEST, NAME, TOKEN, VERSION, about, closed, uses

_BY_ID = {doc["$id"]: name for name, doc in CONTRACTS.items()}
_LOCAL = "#/$defs/"


def _ref(document: dict[str, Any]) -> dict[str, str]:
    """A tool schema's pointer to a contract it embeds under ``$defs``."""
    return {"$ref": _LOCAL + _BY_ID[document["$id"]]}


def _referenced(node: Any) -> set[str]:
    """Contract names a schema fragment points at (``#/$defs/<name>``; contracts hold the ones they use inline)."""
    if isinstance(node, list):
        return set().union(*(_referenced(v) for v in node)) if node else set()
    if not isinstance(node, dict):
        return set()
    found = set().union(*(_referenced(v) for v in node.values())) if node else set()
    ref = node.get("$ref")
    if isinstance(ref, str):
        found.add(ref.removeprefix(_LOCAL))
    return found


def _tool_schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """A closed tool schema plus ``$defs`` holding every contract it reaches, each exactly once."""
    schema = closed(properties, required)
    needed: set[str] = set()
    frontier = _referenced(schema)
    while frontier - needed:
        name = sorted(frontier - needed)[0]
        needed.add(name)
        frontier |= _referenced(CONTRACTS[name])
    schema["$defs"] = {name: CONTRACTS[name] for name in sorted(needed)}
    return schema


def result_schema(statuses: list[str], never: frozenset[str] = frozenset()) -> dict[str, Any]:
    """A tool's output: one envelope; the status set differs per tool, and so do the parts it never fills.

    A part in ``never`` is declared as what the tool always sends there
    (``null``, or an empty list), so the schema names no contract the tool
    cannot return. A client validates every result against it, so it is
    shaped to be cheap for Python jsonschema (the Python SDK client's
    validator) with the same meaning: every contract is inline (``uses``,
    no ``$ref`` to look up and descend through per value), and a nullable
    part tries first what the tool usually sends there (see :func:`_nullable`):
    the part, but ``null`` for a question or a migration preview, which a
    run meets only now and then.
    """
    properties: dict[str, Any] = {
        "status": about(_STATUS, {"enum": statuses}),
        "workflow": about(
            "The run's workflow (id and version); null when the call was refused before one was selected.",
            _nullable(WORKFLOW_ID),
        ),
        "release": about(
            "The verified release that answered (id and manifest digest): every result names it, never null.",
            RELEASE_ID,
        ),
        "checkpoint": about(
            "The run's latest checkpoint token: send it exactly as received on the next call, and append a new "
            "one to the run's checkpoint log.",
            _nullable(TOKEN),
        ),
        "checkpoint_digest": about(
            "`sha256:` + hex SHA-256 of the checkpoint's ASCII bytes (the next token's `parent`).", _nullable(DIGEST)
        ),
        "sequence": about(
            "The checkpoint's sequence number: 1 at start, one more for each new checkpoint.",
            _nullable({"type": "integer", "minimum": 1}),
        ),
        "step": about("The step to perform now (null when there is none to show).", _nullable(uses(STEP_PAYLOAD))),
        "question": about(
            "With `input_required`: the question to ask the user.", _nullable(uses(QUESTION), null_first=True)
        ),
        "failures": about(
            "Every problem found, all at once (`blocked`, `deterministic_validation_failed`).",
            {"type": "array", "items": uses(FAILURE)},
        ),
        "findings": about(
            "With `validation_failed`: every validator's findings, each naming its validator.",
            {
                "type": "array",
                "items": closed(
                    {
                        "validator": about("The validator (`<id>@<version>`) that reported it.", NAME),
                        **FINDING["properties"],
                    },
                    ["validator", "severity", "message"],
                ),
            },
        ),
        "validators": about(
            "With `ready_for_semantic_validation`: the validators the bundle binds, to run in subagents.",
            {"type": "array", "items": uses(VALIDATOR_SUMMARY)},
        ),
        "validation_bundle": about(
            "With `ready_for_semantic_validation`: the signed bundle to send back to submit unchanged.",
            _nullable(uses(VALIDATION_BUNDLE)),
        ),
        "migration": about(
            "The migration target's preview when the server holds one that can take the run, or the migration done; "
            "null: no newer release can take the run now (a host drops any offer it kept).",
            _nullable(uses(MIGRATION_PREVIEW), null_first=True),
        ),
        "message": about("What happened, in words.", {"type": "string"}),
    }
    for name in never:
        empty = {"type": "array", "maxItems": 0} if properties[name].get("type") == "array" else _NULL
        properties[name] = about(
            f"Always {'empty' if empty is not _NULL else 'null'}: this tool never fills it.", empty
        )
    return closed(properties, list(properties))


_NULL = {"type": "null"}
_STATUS = (
    "`active` (do the step), `input_required` (ask the question), `blocked` (read `failures`), `advanced` (next "
    "step), `completed` (the run is over), `deterministic_validation_failed` (fix the artifacts), "
    "`ready_for_semantic_validation` (run the validators), `validation_failed` (repair, prepare again)."
)


def _nullable(schema: dict[str, Any], null_first: bool = False) -> dict[str, Any]:
    """``schema`` or ``null``: ``anyOf [schema, null]``, or ``[null, schema]`` for a part mostly null.

    The branches are disjoint, so the order does not change what is
    accepted; a client stops at the first that matches, so the branch the
    tool usually sends goes first. (One ``type`` list such as
    ``["object", "null"]`` means the same and is cheaper still, but the MCP
    Inspector's ``--strict`` check reports a type union as not portable to
    single-``type`` dialects.)
    """
    return {"anyOf": [_NULL, schema] if null_first else [schema, _NULL]}


START_STATUSES = ["active", "blocked", "input_required", "completed"]
CONTINUE_STATUSES = START_STATUSES
PREPARE_STATUSES = ["deterministic_validation_failed", "ready_for_semantic_validation"]
SUBMIT_STATUSES = ["validation_failed", "input_required", "advanced", "completed"]
# The parts of the envelope each tool never fills (see WorkflowEngineQueryModule: start and continue show a step,
# a question or a migration; prepare returns failures or a bundle; submit returns findings and the next step, and
# start, continue and submit say the migration offer, if any).
START_NEVER = frozenset({"findings", "validators", "validation_bundle"})
CONTINUE_NEVER = START_NEVER
PREPARE_NEVER = frozenset({"step", "question", "findings", "migration"})
SUBMIT_NEVER = frozenset({"validators", "validation_bundle"})

_CHECKPOINT_IN = about(
    "The latest checkpoint token this run returned, exactly as received (it carries the run's state).", TOKEN
)
_STATE_IN = about(
    "The run's confirmed state exactly as last confirmed (the state the checkpoint binds).",
    _ref(CONFIRMED_STATE_PROJECTION),
)
_HOST_IN = about("The same host object the run was started with.", _ref(HOST))

START_INPUT = _tool_schema(
    {
        "workflow": about("Workflow id or one of its entry aliases (e.g. `research-decision` or `research`).", NAME),
        "workflow_version": about("Exact workflow version; omitted: the newest version in the release.", VERSION),
        "confirmed_state": about(
            "The initial confirmed state: at least the fields the workflow's confirmed_state_schema requires, "
            "each confirmed by the user. A refusal lists every missing field with what it expects.",
            _ref(CONFIRMED_STATE_PROJECTION),
        ),
        "host": about("This harness: adapter, capabilities and repository policy (from the host adapter).", _ref(HOST)),
    },
    ["workflow", "confirmed_state", "host"],
)

CONTINUE_INPUT = _tool_schema(
    {
        "checkpoint": _CHECKPOINT_IN,
        "confirmed_state": _STATE_IN,
        "next_confirmed_state": about(
            "The state with changes (e.g. an answered question), each changed field freshly confirmed.",
            _ref(CONFIRMED_STATE_PROJECTION),
        ),
        "migration": about(
            "Only to move the run to the server's migration target release: preview first, then confirm.",
            _ref(MIGRATION_REQUEST),
        ),
    },
    ["checkpoint", "confirmed_state"],
)

PREPARE_INPUT = _tool_schema(
    {
        "checkpoint": _CHECKPOINT_IN,
        "confirmed_state": _STATE_IN,
        "host": _HOST_IN,
        "artifacts": about(
            "Every declared output of the active step, once each, with its exact bytes and readback attestation.",
            {"type": "array", "items": _ref(ARTIFACT), "maxItems": MAX_STEP_OUTPUTS},
        ),
        "inputs": about(
            "Earlier outputs the active step reads, bound by digest (as the step payload's `inputs` lists them).",
            {"type": "array", "items": _ref(INPUT_BINDING), "maxItems": MAX_STEP_INPUTS},
        ),
    },
    ["checkpoint", "confirmed_state", "host", "artifacts"],
)

SUBMIT_INPUT = _tool_schema(
    {
        "checkpoint": _CHECKPOINT_IN,
        "confirmed_state": _STATE_IN,
        "validation_bundle": about(
            "The validation bundle prepare_step_validation returned, unchanged.", _ref(VALIDATION_BUNDLE)
        ),
        "reports": about(
            "One report per validator the bundle marks report_required, no more and no fewer.",
            {"type": "array", "items": _ref(VALIDATOR_REPORT), "maxItems": MAX_STEP_VALIDATORS},
        ),
    },
    ["checkpoint", "confirmed_state", "validation_bundle", "reports"],
)
