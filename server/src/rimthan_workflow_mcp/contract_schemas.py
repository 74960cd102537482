"""The JSON Schema contracts of the four tools (Draft 2020-12, all closed).

Each contract is a standalone document with a stable ``$id``; one contract
that uses another holds the other's body inline, without its ``$id``
(:func:`schema_parts.uses`), so a document never refers outside itself. Every
tool input schema embeds each contract it needs exactly once, verbatim, under
``$defs`` and points at it with ``#/$defs/<name>``; every output schema holds
them inline the same way (no ``$ref`` for a client to follow per result). A
client needs nothing else, resolves no URI, and no ``$id`` ever appears twice
in one schema (JSON Schema validators such as Ajv, which the TypeScript MCP SDK
uses, refuse a duplicated ``$id`` as ambiguous). The server serves the very same
documents as immutable resources. Plain data, no MCP imports.
"""

from __future__ import annotations

from typing import Any

from rimthan_workflow_registry.limits import (
    MAX_CONFIRMED_FIELDS,
    MAX_FINDING_CHARS,
    MAX_REPORT_FINDINGS,
    MAX_STEP_OUTPUTS,
    MAX_STEP_VALIDATORS,
)
from rimthan_workflow_registry.protocol_names import BUNDLE_FIELDS

from .result_contracts import FAILURE, INPUT_BINDING, MIGRATION_PREVIEW, QUESTION, REFUSAL, STEP_PAYLOAD
from .schema_parts import (
    COUNT,
    DIGEST,
    GLOBS,
    ID_BASE,
    MAX_TEXT,
    NAME,
    NAME_KEYS,
    NAMES,
    SHA256_HEX,
    SHORT_TEXT,
    TOKEN,
    VERSION,
    about,
    closed,
    document,
    uses,
)

CONFIRMED_STATE_PROJECTION = document(
    "confirmed-state-projection",
    "Confirmed state: every value plus a confirmation per top-level field",
    closed(
        {
            "state": about(
                "Every confirmed value, one top-level field per entry, exactly as the workflow's "
                "confirmed_state_schema describes them; send the whole object on every call.",
                {"type": "object", "maxProperties": MAX_CONFIRMED_FIELDS},
            ),
            "confirmations": about(
                "One confirmation per top-level field of `state`, keyed by the field name.",
                {
                    "type": "object",
                    "maxProperties": MAX_CONFIRMED_FIELDS,
                    "propertyNames": NAME_KEYS,
                    "additionalProperties": closed(
                        {
                            "value_digest": about(
                                "`sha256:` + hex SHA-256 of the field value's RFC 8785 canonical JSON bytes.",
                                DIGEST,
                            ),
                            "confirmed_at": about(
                                "When the user confirmed this value, in Unix seconds; a changed field needs a "
                                "time at or after the current checkpoint's.",
                                {"type": "integer", "minimum": 0, "maximum": 253402300799},
                            ),
                            "confirmed_by": about(
                                "Who confirmed, and how (e.g. the user through the client's elicitation form).",
                                SHORT_TEXT,
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

HOST = document(
    "host",
    "The calling harness: adapter, capabilities and repository policy",
    closed(
        {
            "harness": about("The harness driving the run, as the host adapter names it (e.g. `claude-code`).", NAME),
            "adapter": about(
                "The release's host adapter this harness follows; must be one the workflow pins.",
                closed(
                    {
                        "id": about("Host adapter id (e.g. `claude-code`).", NAME),
                        "version": about("Host adapter version (e.g. `1.0.0`).", VERSION),
                    },
                    ["id", "version"],
                ),
            ),
            "capabilities": about(
                "Host capabilities the harness really has (e.g. `workspace.write`, `subagents`, `skills`).", NAMES
            ),
            "validator_capabilities": about(
                "Capabilities for running semantic validators (e.g. `subagent.isolated-context`).", NAMES
            ),
            "repository_policy": about(
                "What the user or the repository allows the harness to write; never claim more.",
                closed(
                    {
                        "writable_paths": about("Glob patterns of project paths the harness may write.", GLOBS),
                        "protected_paths": about("Glob patterns of project paths it must never write.", GLOBS),
                    },
                    ["writable_paths", "protected_paths"],
                ),
            ),
        },
        ["harness", "adapter", "capabilities", "validator_capabilities", "repository_policy"],
    ),
)

ARTIFACT = document(
    "artifact",
    "One declared output: exact bytes (UTF-8 text) plus the host's readback attestation",
    closed(
        {
            "artifact_id": about("The declared output id of the active step.", NAME),
            "path": about(
                "The output's declared path, relative to the project root.",
                {"type": "string", "minLength": 1, "maxLength": 1024},
            ),
            "media_type": about(
                "The declared media type (`application/json` or `text/markdown`).",
                {"type": "string", "maxLength": 128},
            ),
            "content": about(
                "The exact file bytes as UTF-8 text, as read back from disk: line endings, a BOM and every "
                "character kept, never normalised (the server hashes this text's UTF-8 bytes against the attestation).",
                {"type": "string", "maxLength": MAX_TEXT},
            ),
            "attestation": about(
                "The host's readback of the written file (required for every step after setup-workspace).",
                closed(
                    {
                        "path": about(
                            "The path the harness wrote and read back, relative to the project root.",
                            {"type": "string", "minLength": 1, "maxLength": 1024},
                        ),
                        "sha256": about("Hex SHA-256 of the bytes read back from disk.", SHA256_HEX),
                        "size": about("Size in bytes of the file read back.", COUNT),
                        "symlink_free": about(
                            "True only if neither the file nor any parent directory is a symbolic link.",
                            {"type": "boolean"},
                        ),
                        "write": about(
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

FINDING = document(
    "finding",
    "A semantic validator's finding",
    closed(
        {
            "severity": about("`error` fails the validator; `warning` is advice.", {"enum": ["error", "warning"]}),
            "artifact_id": about("The artifact the finding is about.", NAME),
            "message": about(
                "The finding in the validator's words.",
                {"type": "string", "minLength": 1, "maxLength": MAX_FINDING_CHARS},
            ),
        },
        ["severity", "message"],
    ),
)

VALIDATOR_SUMMARY = document(
    "validator-summary",
    "A semantic validator as bound in a validation bundle",
    closed(
        {
            "validator_id": about("The validator's id.", NAME),
            "version": about("The validator's version.", VERSION),
            "instruction_digest": about("`sha256:` digest of the validator's instruction file.", DIGEST),
            "input_digest": about("`sha256:` digest binding the artifact set the validator judges.", DIGEST),
            "subagent": about("The subagent that must run this validator in an isolated context.", NAME),
            "report_required": about(
                "False when an earlier pass on identical inputs is reused: send no report for it.",
                {"type": "boolean"},
            ),
        },
        ["validator_id", "version", "instruction_digest", "input_digest", "subagent", "report_required"],
    ),
)

WORKFLOW_ID = closed(
    {"id": about("Workflow id.", NAME), "version": about("Workflow version.", VERSION)}, ["id", "version"]
)
RELEASE_ID = closed(
    {
        "id": about("Release id (`<catalogue>@<version>`).", NAME),
        "manifest_digest": about("`sha256:` digest of the release's signed manifest.", DIGEST),
    },
    ["id", "manifest_digest"],
)

ARTIFACT_RECEIPTS = {
    "type": "object",
    "maxProperties": MAX_STEP_OUTPUTS,
    "propertyNames": NAME_KEYS,
    "additionalProperties": closed(
        {
            "sha256": about("Hex SHA-256 of the artifact bytes.", SHA256_HEX),
            "size": about("Artifact size in bytes.", COUNT),
        },
        ["sha256", "size"],
    ),
}

VALIDATION_BUNDLE = document(
    "validation-bundle",
    "What prepare_step_validation bound; submit_step_validation verifies it by its HMAC token",
    closed(
        {
            "workflow": about("Workflow identity, as prepare returned it.", WORKFLOW_ID),
            "release": about("Release identity, as prepare returned it.", RELEASE_ID),
            "manifest_digest": about("The release's manifest digest, as prepare returned it.", DIGEST),
            "step_id": about("The step that was prepared.", NAME),
            "checkpoint_digest": about("Digest of the checkpoint the bundle was prepared for.", DIGEST),
            "artifacts": about(
                "Artifact receipts by id (hex SHA-256 and size), as prepare returned them.", ARTIFACT_RECEIPTS
            ),
            "validators": about(
                "The validators bound in this bundle, as prepare returned them.",
                {"type": "array", "items": uses(VALIDATOR_SUMMARY), "maxItems": MAX_STEP_VALIDATORS},
            ),
            "issued_at": about("When the bundle was issued (Unix seconds).", COUNT),
            "key_id": about("Id of the server key that signed the bundle.", NAME),
            "validation_token": about("The server's signed token over this bundle; send it back unchanged.", TOKEN),
        },
        [*BUNDLE_FIELDS, "validation_token"],
    ),
)

VALIDATOR_REPORT = document(
    "validator-report",
    "A semantic validator's verdict, produced by the host's subagent",
    closed(
        {
            "validator_id": about("The validator's id, from the bundle.", NAME),
            "version": about("The validator's version, from the bundle.", VERSION),
            "outcome": about("The subagent's verdict, exactly as it returned it.", {"enum": ["pass", "fail"]}),
            "instruction_digest": about("The validator's instruction_digest, from the bundle.", DIGEST),
            "input_artifacts": about(
                "Every artifact of the bundle's `artifacts` (all of them, even those the validator did not read), "
                "each with its hex SHA-256 from there; any other set is `report_stale`.",
                {
                    "type": "object",
                    "maxProperties": MAX_STEP_OUTPUTS,
                    "propertyNames": NAME_KEYS,
                    "additionalProperties": SHA256_HEX,
                },
            ),
            "findings": about(
                "The subagent's findings, exactly as it returned them (empty for a clean pass).",
                {"type": "array", "items": uses(FINDING), "maxItems": MAX_REPORT_FINDINGS},
            ),
            "validated_by": about(
                "The harness that ran the subagent; must match the run's host binding.",
                closed(
                    {
                        "harness": about("The harness name bound at start.", NAME),
                        "adapter_version": about("The host adapter version bound at start.", VERSION),
                    },
                    ["harness", "adapter_version"],
                ),
            ),
        },
        ["validator_id", "version", "outcome", "instruction_digest", "input_artifacts", "findings", "validated_by"],
    ),
)

MIGRATION_REQUEST = document(
    "migration-request",
    "Explicit request to move a run to the loaded migration-target release",
    closed(
        {
            "target_release": about(
                "The server's migration target: its release id (`<catalogue>@<version>`) or manifest digest.", NAME
            ),
            "workflow_version": about("Exact target workflow version; default: the newest in the target.", VERSION),
            "confirmed_state": about(
                "The whole state for the target workflow, every field freshly confirmed; a preview "
                "(confirm=false) lists what the target still needs.",
                uses(CONFIRMED_STATE_PROJECTION),
            ),
            "host": about("The host for the target release; default: the run's current binding.", uses(HOST)),
            "confirm": about(
                "False to preview the impact; true only after the user has agreed to the previewed migration.",
                {"type": "boolean"},
            ),
        },
        ["target_release", "confirmed_state", "confirm"],
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
        REFUSAL,
    )
}
