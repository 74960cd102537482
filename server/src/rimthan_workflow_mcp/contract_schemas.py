"""The JSON Schema contracts of the four tools (Draft 2020-12, all closed).

Each contract is a standalone document with a stable ``$id``; one contract
uses another by ``$ref`` to that ``$id``, never by an inline copy. Every tool
input and output schema embeds each contract it needs exactly once, verbatim,
under ``$defs`` and points at it with ``#/$defs/<name>``, so a client needs
nothing else and no ``$id`` ever appears twice in one schema (JSON Schema
validators such as Ajv, which the TypeScript MCP SDK uses, refuse a duplicated
``$id`` as ambiguous). The server serves the very same documents as immutable
resources. Plain data, no MCP imports.
"""

from __future__ import annotations

from typing import Any

from rimthan_workflow_registry.run import MAX_TOKEN_CHARS

DRAFT = "https://json-schema.org/draft/2020-12/schema"
ID_BASE = "https://rimthan.dev/contracts/"
MAX_TEXT = 8 * 1024 * 1024
MAX_TOKEN = MAX_TOKEN_CHARS

_DIGEST = {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"}
_SHA256_HEX = {"type": "string", "pattern": "^[0-9a-f]{64}$"}
_NAME = {"type": "string", "minLength": 1, "maxLength": 128}
_NAMES = {"type": "array", "items": _NAME, "uniqueItems": True, "maxItems": 256}
_VERSION = {"type": "string", "minLength": 1, "maxLength": 64}
_TEXT = {"type": "string", "maxLength": 4096}
_TOKEN = {"type": "string", "minLength": 1, "maxLength": MAX_TOKEN}
_GLOBS = {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 512}, "maxItems": 256}


def _closed(properties: dict[str, Any], required: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    schema.update(extra)
    return schema


def _about(text: str, schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with a ``description``: every input field says what it is for, so a harness
    author (or a model reading ``tools/list``) never has to guess from a refusal."""
    return {**schema, "description": text}


def _document(name: str, title: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"$schema": DRAFT, "$id": contract_id(name), "title": title, **body}


def contract_id(name: str) -> str:
    return f"{ID_BASE}{name}.schema.json"


def _uses(document: dict[str, Any]) -> dict[str, str]:
    """A ``$ref`` from one contract document to another, by the other's absolute ``$id``."""
    return {"$ref": document["$id"]}


CONFIRMED_STATE_PROJECTION = _document(
    "confirmed-state-projection",
    "Confirmed state: every value plus a confirmation per top-level field",
    _closed(
        {
            "state": _about(
                "Every confirmed value, one top-level field per entry, exactly as the workflow's "
                "confirmed_state_schema describes them; send the whole object on every call.",
                {"type": "object", "maxProperties": 256},
            ),
            "confirmations": _about(
                "One confirmation per top-level field of `state`, keyed by the field name.",
                {
                    "type": "object",
                    "maxProperties": 256,
                    "additionalProperties": _closed(
                        {
                            "value_digest": _about(
                                "`sha256:` + hex SHA-256 of the field value's RFC 8785 canonical JSON bytes.",
                                _DIGEST,
                            ),
                            "confirmed_at": _about(
                                "When the user confirmed this value, in Unix seconds; a changed field needs a "
                                "time at or after the current checkpoint's.",
                                {"type": "integer", "minimum": 0, "maximum": 253402300799},
                            ),
                            "confirmed_by": _about(
                                "Who confirmed, and how (e.g. the user through the client's elicitation form).",
                                _TEXT,
                            ),
                        },
                        ["value_digest", "confirmed_at"],
                    ),
                },
            ),
        },
        ["state", "confirmations"],
    ),
)

HOST = _document(
    "host",
    "The calling harness: adapter, capabilities and repository policy",
    _closed(
        {
            "harness": _about("The harness driving the run, as the host adapter names it (e.g. `claude-code`).", _NAME),
            "adapter": _about(
                "The release's host adapter this harness follows; must be one the workflow pins.",
                _closed(
                    {
                        "id": _about("Host adapter id (e.g. `claude-code`).", _NAME),
                        "version": _about("Host adapter version (e.g. `1.0.0`).", _VERSION),
                    },
                    ["id", "version"],
                ),
            ),
            "capabilities": _about(
                "Host capabilities the harness really has (e.g. `workspace.write`, `subagents`, `skills`).", _NAMES
            ),
            "validator_capabilities": _about(
                "Capabilities for running semantic validators (e.g. `subagent.isolated-context`).", _NAMES
            ),
            "repository_policy": _about(
                "What the user or the repository allows the harness to write; never claim more.",
                _closed(
                    {
                        "writable_paths": _about("Glob patterns of project paths the harness may write.", _GLOBS),
                        "protected_paths": _about("Glob patterns of project paths it must never write.", _GLOBS),
                    },
                    ["writable_paths", "protected_paths"],
                ),
            ),
        },
        ["harness", "adapter", "capabilities", "validator_capabilities", "repository_policy"],
    ),
)

ARTIFACT = _document(
    "artifact",
    "One declared output: exact bytes (UTF-8 text) plus the host's readback attestation",
    _closed(
        {
            "artifact_id": _about("The declared output id of the active step.", _NAME),
            "path": _about(
                "The output's declared path, relative to the project root.",
                {"type": "string", "minLength": 1, "maxLength": 1024},
            ),
            "media_type": _about(
                "The declared media type (`application/json` or `text/markdown`).",
                {"type": "string", "maxLength": 128},
            ),
            "content": _about(
                "The exact file bytes as UTF-8 text, as read back from disk.",
                {"type": "string", "maxLength": MAX_TEXT},
            ),
            "attestation": _about(
                "The host's readback of the written file (required for every step after setup-workspace).",
                _closed(
                    {
                        "path": _about(
                            "The path the harness wrote and read back, relative to the project root.",
                            {"type": "string", "minLength": 1, "maxLength": 1024},
                        ),
                        "sha256": _about("Hex SHA-256 of the bytes read back from disk.", _SHA256_HEX),
                        "size": _about("Size in bytes of the file read back.", {"type": "integer", "minimum": 0}),
                        "symlink_free": _about(
                            "True only if neither the file nor any parent directory is a symbolic link.",
                            {"type": "boolean"},
                        ),
                        "write": _about(
                            "`created` if no file was there before the write, `replaced` if one was.",
                            {"enum": ["created", "replaced"]},
                        ),
                    },
                    ["path", "sha256", "size", "symlink_free", "write"],
                ),
            ),
        },
        ["artifact_id", "path", "media_type", "content"],
    ),
)

INPUT_BINDING = _document(
    "input-binding",
    "A prior artifact a step reads, bound by digest",
    _closed(
        {
            "artifact_id": _about("The id of an earlier step's output this step reads.", _NAME),
            "sha256": _about("Hex SHA-256 of that output, as its artifact receipt records it.", _SHA256_HEX),
        },
        ["artifact_id", "sha256"],
    ),
)

FAILURE = _document(
    "failure",
    "A closed failure object: code from the documented list, message, optional location",
    _closed(
        {
            "code": {"type": "string", "pattern": "^[a-z][a-z0-9_]*$"},
            "message": {"type": "string"},
            "artifact_id": {"type": "string"},
            "path": {"type": "string"},
            "pointer": {"type": "string"},
            "details": {"type": "object"},
        },
        ["code", "message"],
    ),
)

FINDING = _document(
    "finding",
    "A semantic validator's finding",
    _closed(
        {
            "severity": _about("`error` fails the validator; `warning` is advice.", {"enum": ["error", "warning"]}),
            "artifact_id": _about("The artifact the finding is about.", _NAME),
            "message": _about(
                "The finding in the validator's words.", {"type": "string", "minLength": 1, "maxLength": 8192}
            ),
        },
        ["severity", "message"],
    ),
)

VALIDATOR_SUMMARY = _document(
    "validator-summary",
    "A semantic validator as bound in a validation bundle",
    _closed(
        {
            "validator_id": _about("The validator's id.", _NAME),
            "version": _about("The validator's version.", _VERSION),
            "instruction_digest": _about("`sha256:` digest of the validator's instruction file.", _DIGEST),
            "input_digest": _about("`sha256:` digest binding the artifact set the validator judges.", _DIGEST),
            "subagent": _about("The subagent that must run this validator in an isolated context.", _NAME),
            "report_required": _about(
                "False when an earlier pass on identical inputs is reused: send no report for it.",
                {"type": "boolean"},
            ),
        },
        ["validator_id", "version", "instruction_digest", "input_digest", "subagent", "report_required"],
    ),
)

_WORKFLOW_ID = _closed(
    {"id": _about("Workflow id.", _NAME), "version": _about("Workflow version.", _VERSION)}, ["id", "version"]
)
_RELEASE_ID = _closed(
    {
        "id": _about("Release id (`<catalogue>@<version>`).", _NAME),
        "manifest_digest": _about("`sha256:` digest of the release's signed manifest.", _DIGEST),
    },
    ["id", "manifest_digest"],
)

ARTIFACT_RECEIPTS = {
    "type": "object",
    "maxProperties": 256,
    "additionalProperties": _closed(
        {
            "sha256": _about("Hex SHA-256 of the artifact bytes.", _SHA256_HEX),
            "size": _about("Artifact size in bytes.", {"type": "integer", "minimum": 0}),
        },
        ["sha256", "size"],
    ),
}

VALIDATION_BUNDLE = _document(
    "validation-bundle",
    "What prepare_step_validation bound; submit_step_validation verifies it by its HMAC token",
    _closed(
        {
            "workflow": _about("Workflow identity, as prepare returned it.", _WORKFLOW_ID),
            "release": _about("Release identity, as prepare returned it.", _RELEASE_ID),
            "manifest_digest": _about("The release's manifest digest, as prepare returned it.", _DIGEST),
            "step_id": _about("The step that was prepared.", _NAME),
            "checkpoint_digest": _about("Digest of the checkpoint the bundle was prepared for.", _DIGEST),
            "artifacts": _about(
                "Artifact receipts by id (hex SHA-256 and size), as prepare returned them.", ARTIFACT_RECEIPTS
            ),
            "validators": _about(
                "The validators bound in this bundle, as prepare returned them.",
                {"type": "array", "items": _uses(VALIDATOR_SUMMARY), "maxItems": 64},
            ),
            "issued_at": _about("When the bundle was issued (Unix seconds).", {"type": "integer", "minimum": 0}),
            "key_id": _about("Id of the server key that signed the bundle.", _NAME),
            "validation_token": _about("The server's signed token over this bundle; send it back unchanged.", _TOKEN),
        },
        [
            "workflow",
            "release",
            "manifest_digest",
            "step_id",
            "checkpoint_digest",
            "artifacts",
            "validators",
            "issued_at",
            "key_id",
            "validation_token",
        ],
    ),
)

VALIDATOR_REPORT = _document(
    "validator-report",
    "A semantic validator's verdict, produced by the host's subagent",
    _closed(
        {
            "validator_id": _about("The validator's id, from the bundle.", _NAME),
            "version": _about("The validator's version, from the bundle.", _VERSION),
            "outcome": _about("The subagent's verdict, exactly as it returned it.", {"enum": ["pass", "fail"]}),
            "instruction_digest": _about("The validator's instruction_digest, from the bundle.", _DIGEST),
            "input_artifacts": _about(
                "Every artifact id the validator judged, with its hex SHA-256 from the bundle's artifact receipts.",
                {"type": "object", "maxProperties": 256, "additionalProperties": _SHA256_HEX},
            ),
            "findings": _about(
                "The subagent's findings, exactly as it returned them (empty for a clean pass).",
                {"type": "array", "items": _uses(FINDING), "maxItems": 256},
            ),
            "validated_by": _about(
                "The harness that ran the subagent; must match the run's host binding.",
                _closed(
                    {
                        "harness": _about("The harness name bound at start.", _NAME),
                        "adapter_version": _about("The host adapter version bound at start.", _VERSION),
                    },
                    ["harness", "adapter_version"],
                ),
            ),
        },
        ["validator_id", "version", "outcome", "instruction_digest", "input_artifacts", "findings", "validated_by"],
    ),
)

MIGRATION_REQUEST = _document(
    "migration-request",
    "Explicit request to move a run to the loaded migration-target release",
    _closed(
        {
            "target_release": _about(
                "The server's migration target: its release id (`<catalogue>@<version>`) or manifest digest.", _NAME
            ),
            "workflow_version": _about("Exact target workflow version; default: the newest in the target.", _VERSION),
            "confirmed_state": _about(
                "The whole state for the target workflow, every field freshly confirmed; a preview "
                "(confirm=false) lists what the target still needs.",
                _uses(CONFIRMED_STATE_PROJECTION),
            ),
            "host": _about("The host for the target release; default: the run's current binding.", _uses(HOST)),
            "confirm": _about(
                "False to preview the impact; true only after the user has agreed to the previewed migration.",
                {"type": "boolean"},
            ),
        },
        ["target_release", "confirmed_state", "confirm"],
    ),
)

_ASSET_REF = _closed(
    {
        "id": _NAME,
        "kind": {"enum": ["instruction", "prompt", "skill", "subagent", "adapter", "validator"]},
        "uri": {"type": "string"},
        "path": {"type": "string"},
        "sha256": _SHA256_HEX,
        "media_type": {"type": "string"},
        "install_path": {"type": "string"},
        "text": {"type": "string"},
    },
    ["id", "kind", "uri", "path", "sha256", "media_type"],
)

STEP_PAYLOAD = _document(
    "step-payload",
    "Everything a harness needs to perform one step",
    _closed(
        {
            "id": _NAME,
            "title": {"type": "string"},
            "gated": {"type": "boolean"},
            "terminal": {"type": "boolean"},
            "definition": {"type": "object"},
            "instruction": _ASSET_REF,
            "host_assets": {"type": "array", "items": _ASSET_REF},
            "host_adapter": {"type": "object"},
            "outputs": {"type": "array", "items": {"type": "object"}},
            "inputs": {"type": "array", "items": _uses(INPUT_BINDING)},
            "validators": {"type": "array", "items": {"type": "object"}},
            "resources": {"type": "array", "items": {"type": "string"}},
        },
        [
            "id",
            "title",
            "gated",
            "terminal",
            "definition",
            "instruction",
            "host_assets",
            "host_adapter",
            "outputs",
            "inputs",
            "validators",
            "resources",
        ],
    ),
)

QUESTION = _document(
    "question",
    "The one question the harness must ask the user before the run can advance",
    _closed(
        {"field": _NAME, "prompt": {"type": "string"}, "choices": {"type": "array"}},
        ["field", "prompt", "choices"],
    ),
)

MIGRATION_PREVIEW = _document(
    "migration-preview",
    "What a migration would do: from, to, and everything it invalidates",
    _closed(
        {
            "from": _closed({"release": _NAME, "manifest_digest": _DIGEST, "workflow": _NAME}),
            "to": _closed({"release": _NAME, "manifest_digest": _DIGEST, "workflow": _NAME}),
            "invalidated_artifacts": {"type": "array", "items": _NAME},
            "invalidated_validators": {"type": "array", "items": _NAME},
            "restart_step": _NAME,
            "confirmed": {"type": "boolean"},
            "target_needs": _closed(
                {
                    "workflow": _closed({"id": _NAME, "version": _VERSION}, ["id", "version"]),
                    "confirmed_state": {
                        "type": "array",
                        "items": _closed(
                            {
                                "field": _NAME,
                                "required": {"type": "boolean"},
                                "present": {"type": "boolean"},
                                "expects": {"type": "object"},
                            },
                            ["field", "required", "present", "expects"],
                        ),
                    },
                    "capabilities": _NAMES,
                    "validator_capabilities": _NAMES,
                    "host_adapters": _NAMES,
                },
                ["workflow", "confirmed_state", "capabilities", "validator_capabilities", "host_adapters"],
            ),
        },
        ["from", "to", "invalidated_artifacts", "invalidated_validators", "restart_step", "confirmed"],
    ),
)


CONTRACTS: dict[str, dict[str, Any]] = {
    doc["$id"].removeprefix(ID_BASE).removesuffix(".schema.json"): doc
    for doc in (
        CONFIRMED_STATE_PROJECTION,
        HOST,
        ARTIFACT,
        INPUT_BINDING,
        FAILURE,
        FINDING,
        VALIDATOR_SUMMARY,
        VALIDATION_BUNDLE,
        VALIDATOR_REPORT,
        MIGRATION_REQUEST,
        STEP_PAYLOAD,
        QUESTION,
        MIGRATION_PREVIEW,
    )
}
_BY_ID = {doc["$id"]: name for name, doc in CONTRACTS.items()}
_LOCAL = "#/$defs/"


def _ref(document: dict[str, Any]) -> dict[str, str]:
    """A tool schema's pointer to a contract it embeds under ``$defs``."""
    return {"$ref": _LOCAL + _BY_ID[document["$id"]]}


def _referenced(node: Any) -> set[str]:
    """Contract names a schema fragment points at, locally or by ``$id``."""
    if isinstance(node, list):
        return set().union(*(_referenced(v) for v in node)) if node else set()
    if not isinstance(node, dict):
        return set()
    found = set().union(*(_referenced(v) for v in node.values())) if node else set()
    ref = node.get("$ref")
    if isinstance(ref, str):
        found.add(ref.removeprefix(_LOCAL) if ref.startswith(_LOCAL) else _BY_ID[ref])
    return found


def _tool_schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """A closed tool schema plus ``$defs`` holding every contract it reaches, each exactly once."""
    schema = _closed(properties, required)
    needed: set[str] = set()
    frontier = _referenced(schema)
    while frontier - needed:
        name = sorted(frontier - needed)[0]
        needed.add(name)
        frontier |= _referenced(CONTRACTS[name])
    schema["$defs"] = {name: CONTRACTS[name] for name in sorted(needed)}
    return schema


def result_schema(statuses: list[str]) -> dict[str, Any]:
    """A tool's output: one envelope, the status set differs per tool."""
    return _tool_schema(
        {
            "status": {"enum": statuses},
            "workflow": {"oneOf": [{"type": "null"}, _closed({"id": _NAME, "version": _VERSION}, ["id", "version"])]},
            "release": {
                "oneOf": [
                    {"type": "null"},
                    _closed({"id": _NAME, "manifest_digest": _DIGEST}, ["id", "manifest_digest"]),
                ]
            },
            "checkpoint": {"oneOf": [{"type": "null"}, _TOKEN]},
            "checkpoint_digest": {"oneOf": [{"type": "null"}, _DIGEST]},
            "sequence": {"oneOf": [{"type": "null"}, {"type": "integer", "minimum": 1}]},
            "step": {"oneOf": [{"type": "null"}, _ref(STEP_PAYLOAD)]},
            "question": {"oneOf": [{"type": "null"}, _ref(QUESTION)]},
            "failures": {"type": "array", "items": _ref(FAILURE)},
            "findings": {
                "type": "array",
                "items": _closed({"validator": _NAME, **FINDING["properties"]}, ["validator", "severity", "message"]),
            },
            "validators": {"type": "array", "items": _ref(VALIDATOR_SUMMARY)},
            "validation_bundle": {"oneOf": [{"type": "null"}, _ref(VALIDATION_BUNDLE)]},
            "migration": {"oneOf": [{"type": "null"}, _ref(MIGRATION_PREVIEW)]},
            "message": {"type": "string"},
        },
        [
            "status",
            "workflow",
            "release",
            "checkpoint",
            "checkpoint_digest",
            "sequence",
            "step",
            "question",
            "failures",
            "findings",
            "validators",
            "validation_bundle",
            "migration",
            "message",
        ],
    )


START_STATUSES = ["active", "blocked", "input_required", "completed"]
CONTINUE_STATUSES = START_STATUSES
PREPARE_STATUSES = ["deterministic_validation_failed", "ready_for_semantic_validation"]
SUBMIT_STATUSES = ["validation_failed", "input_required", "advanced", "completed"]

_CHECKPOINT_IN = _about(
    "The latest checkpoint token this run returned, exactly as received (it carries the run's state).", _TOKEN
)
_STATE_IN = _about(
    "The run's confirmed state exactly as last confirmed (the state the checkpoint binds).",
    _ref(CONFIRMED_STATE_PROJECTION),
)
_HOST_IN = _about("The same host object the run was started with.", _ref(HOST))

START_INPUT = _tool_schema(
    {
        "workflow": _about("Workflow id or one of its entry aliases (e.g. `research-decision` or `research`).", _NAME),
        "workflow_version": _about("Exact workflow version; omitted: the newest version in the release.", _VERSION),
        "confirmed_state": _about(
            "The initial confirmed state: at least the fields the workflow's confirmed_state_schema requires, "
            "each confirmed by the user. A refusal lists every missing field with what it expects.",
            _ref(CONFIRMED_STATE_PROJECTION),
        ),
        "host": _about(
            "This harness: adapter, capabilities and repository policy (from the host adapter).", _ref(HOST)
        ),
    },
    ["workflow", "confirmed_state", "host"],
)

CONTINUE_INPUT = _tool_schema(
    {
        "checkpoint": _CHECKPOINT_IN,
        "confirmed_state": _STATE_IN,
        "next_confirmed_state": _about(
            "The state with changes (e.g. an answered question), each changed field freshly confirmed.",
            _ref(CONFIRMED_STATE_PROJECTION),
        ),
        "migration": _about(
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
        "artifacts": _about(
            "Every declared output of the active step, once each, with its exact bytes and readback attestation.",
            {"type": "array", "items": _ref(ARTIFACT), "maxItems": 64},
        ),
        "inputs": _about(
            "Earlier outputs the active step reads, bound by digest (as the step payload's `inputs` lists them).",
            {"type": "array", "items": _ref(INPUT_BINDING), "maxItems": 64},
        ),
    },
    ["checkpoint", "confirmed_state", "host", "artifacts"],
)

SUBMIT_INPUT = _tool_schema(
    {
        "checkpoint": _CHECKPOINT_IN,
        "confirmed_state": _STATE_IN,
        "validation_bundle": _about(
            "The validation bundle prepare_step_validation returned, unchanged.", _ref(VALIDATION_BUNDLE)
        ),
        "reports": _about(
            "One report per validator the bundle marks report_required, no more and no fewer.",
            {"type": "array", "items": _ref(VALIDATOR_REPORT), "maxItems": 64},
        ),
    },
    ["checkpoint", "confirmed_state", "validation_bundle", "reports"],
)
