"""The contracts the tools answer with: a step to perform, a question, a failure, a migration preview, a refusal.

Kept apart from :mod:`contract_schemas` (what a harness sends, some of it answers carry too) by
direction; it holds them in its ``CONTRACTS`` with the others.
Every field says what it holds and what the harness does with it, as every
input field does: a harness written in another language learns the answers
from ``tools/list`` too, not from the server's code. Plain data, no MCP imports.
"""

from __future__ import annotations

from rimthan_workflow_registry.errors import FailureCode
from rimthan_workflow_registry.release import WRITE_POLICIES

from .schema_parts import DIGEST, NAME, NAMES, SHA256_HEX, VERSION, about, closed, document, every_field_required, uses

FAILURE_CODE = {"enum": sorted(code.value for code in FailureCode)}
"""The closed list of failure codes (``FailureCode``) as a schema: a failure's and a refusal's ``code``."""

INPUT_BINDING = document(
    "input-binding",
    "A prior artifact a step reads, bound by digest",
    closed(
        {
            "artifact_id": about("The id of an earlier step's output this step reads.", NAME),
            "sha256": about("Hex SHA-256 of that output, as its artifact receipt records it.", SHA256_HEX),
        },
        ["artifact_id", "sha256"],
    ),
)

FAILURE = document(
    "failure",
    "A closed failure object: code from the documented list, message, optional location",
    closed(
        {
            "code": about(
                "The failure code, one of the closed list in docs/failure-codes.md (what went wrong and what to do).",
                FAILURE_CODE,
            ),
            "message": about("What is wrong, in words, naming the value or file concerned.", {"type": "string"}),
            "artifact_id": about("The artifact the failure is about, when it is about one.", {"type": "string"}),
            "path": about(
                "The project or release path the failure is about, when it is about one.", {"type": "string"}
            ),
            "pointer": about(
                "JSON Pointer into the value at fault (a confirmed-state field `/<field>`, a schema error's location).",
                {"type": "string"},
            ),
            "details": about(
                "Machine-readable particulars of this code (e.g. `field` and `expects` for a missing field, "
                "`available` for an unknown workflow).",
                {"type": "object"},
            ),
        },
        ["code", "message"],
    ),
)

_ASSET_REF = closed(
    {
        "id": about("The asset's id (a host asset's, the step's for its instruction, a validator's).", NAME),
        "kind": about(
            "What the asset is; prompts, skills, subagents and the adapter are delivered at setup-workspace.",
            {"enum": ["instruction", "prompt", "skill", "subagent", "adapter", "validator"]},
        ),
        "uri": about(
            "The release file's resource URI (`rimthan://releases/<manifest-hex>/<path>`).", {"type": "string"}
        ),
        "path": about("The file's path inside the release's catalogue.", {"type": "string"}),
        "sha256": about(
            "Hex SHA-256 of the file's bytes (the UTF-8 bytes of `text`); check it before using `text`.", SHA256_HEX
        ),
        "media_type": about("The file's media type (`text/markdown`).", {"type": "string"}),
        "install_path": about(
            "Where a host asset is written, relative to the project root, resolved for the run's adapter.",
            {"type": "string"},
        ),
        "text": about("The file's exact text; write it byte for byte (UTF-8) when delivering it.", {"type": "string"}),
    },
    ["id", "kind", "uri", "path", "sha256", "media_type"],
)

_OUTPUT = closed(
    {
        "id": about("The output's id: the `artifact_id` its artifact is sent with.", NAME),
        "path": about(
            "Where to write it, relative to the project root (the artifact's and attestation's `path`).",
            {"type": "string"},
        ),
        "media_type": about(
            "Its media type (`application/json` or `text/markdown`), sent as the artifact's.", {"type": "string"}
        ),
        "max_bytes": about("The most bytes the file may hold.", {"type": "integer", "minimum": 1}),
        "write_policy": about(
            "Which attestation `write` fits: `create` (no file there before), `replace` (one there), or either.",
            {"enum": list(WRITE_POLICIES)},
        ),
        "schema": about("The release file of the JSON Schema a JSON output must satisfy.", {"type": "string"}),
        "schema_uri": about("That schema's resource URI.", {"type": "string"}),
    },
    ["id", "path", "media_type", "max_bytes", "write_policy"],
)

_STEP_VALIDATOR = every_field_required(
    {
        "id": about("The validator's id (a bundle's `validator_id`).", NAME),
        "version": about("The validator's version.", VERSION),
        "key": about("`<id>@<version>`, as receipts and migration previews name it.", NAME),
        "subagent": about("The delivered subagent that runs it, in a context of its own.", NAME),
        "required_capabilities": about("Validator capabilities the host must have to run it.", NAMES),
        "instruction": about(
            "The instruction to give the subagent; its SHA-256 is the bundle's `instruction_digest`.", _ASSET_REF
        ),
    }
)

STEP_PAYLOAD = document(
    "step-payload",
    "Everything a harness needs to perform one step",
    every_field_required(
        {
            "id": about("The step's id.", NAME),
            "title": about("The step's title, for people.", {"type": "string"}),
            "gated": about(
                "True when the step declares outputs or validators: only prepare and submit move it on.",
                {"type": "boolean"},
            ),
            "terminal": about("True for a step that ends the run.", {"type": "boolean"}),
            "definition": about("The step as the catalogue defines it (its TOML table, as JSON).", {"type": "object"}),
            "instruction": about("The step's instruction: what the harness does in this step.", _ASSET_REF),
            "host_assets": about(
                "setup-workspace only: every asset to deliver (the adapter last), each with `install_path` and `text`.",
                {"type": "array", "items": _ASSET_REF},
            ),
            "host_adapter": about(
                "The run's host adapter as the release pins it: id, version, harness, capabilities, install paths.",
                {"type": "object"},
            ),
            "outputs": about(
                "Every file the step declares: write each, read it back, send it to prepare as an artifact.",
                {"type": "array", "items": _OUTPUT},
            ),
            "inputs": about(
                "Earlier outputs the step reads, by digest: send them to prepare unchanged.",
                {"type": "array", "items": uses(INPUT_BINDING)},
            ),
            "validators": about(
                "The step's semantic validators, with the instruction each subagent is given.",
                {"type": "array", "items": _STEP_VALIDATOR},
            ),
            "resources": about(
                "Resource URIs of every release file the step refers to (read them with resources/read).",
                {"type": "array", "items": {"type": "string"}},
            ),
        }
    ),
)

QUESTION = document(
    "question",
    "The one question the harness must ask the user before the run can advance",
    every_field_required(
        {
            "field": about("The confirmed-state field the confirmed answer goes into (`next_confirmed_state`).", NAME),
            "prompt": about("The question, to ask word for word.", {"type": "string"}),
            "choices": about(
                "The answers to offer; the confirmed value is one of them, as it is here.", {"type": "array"}
            ),
        }
    ),
)

_MIGRATION_END = closed(
    {
        "release": about("Release id (`<catalogue>@<version>`); for `to`, the value for `target_release`.", NAME),
        "manifest_digest": about("`sha256:` digest of that release's signed manifest.", DIGEST),
        "workflow": about("The run's workflow on that release, as `<id>@<version>`.", NAME),
    }
)

_TARGET_FIELD = every_field_required(
    {
        "field": about("A confirmed-state field of the target workflow.", NAME),
        "required": about("Whether the target requires it.", {"type": "boolean"}),
        "present": about("Whether the run's current state has it.", {"type": "boolean"}),
        "expects": about("The field's schema in the target (description, type, enum...).", {"type": "object"}),
    }
)

_WALKED_STEP = every_field_required(
    {
        "step": about("The step's id on the run's current workflow (`from`).", NAME),
        "outputs": about(
            "The artifacts this step produced that the migration drops and the step produces again (none for a step "
            "without files, such as a question or a confirmation).",
            {"type": "array", "items": NAME},
        ),
    }
)

MIGRATION_PREVIEW = document(
    "migration-preview",
    "What a migration would do: from, to, and everything it invalidates",
    closed(
        {
            "from": about("The release and workflow the run is on.", _MIGRATION_END),
            "to": about("The release and workflow it would move to.", _MIGRATION_END),
            "invalidated_artifacts": about(
                "The run's artifact receipts the migration drops (their steps are done again).",
                {"type": "array", "items": NAME},
            ),
            "invalidated_validators": about(
                "The run's validator receipts (`<id>@<version>`) the migration drops.", {"type": "array", "items": NAME}
            ),
            "restart_step": about("The step the migrated run starts again at.", NAME),
            "walked_again": about(
                "The steps the run has walked, in order from `restart_step` to the step it is on (excluded), that "
                "the migrated run walks again; empty when the run is at `restart_step`, or when its state routes no "
                "path there.",
                {"type": "array", "items": _WALKED_STEP},
            ),
            "confirmed": about("False for a preview; true once the migration was performed.", {"type": "boolean"}),
            "target_needs": about(
                "What the target needs of this run and host: exactly what the migration checks.",
                closed(
                    {
                        "workflow": about(
                            "The target workflow.",
                            closed(
                                {"id": about("Workflow id.", NAME), "version": about("Workflow version.", VERSION)},
                                ["id", "version"],
                            ),
                        ),
                        "confirmed_state": about(
                            "Every confirmed-state field of the target workflow.",
                            {"type": "array", "items": _TARGET_FIELD},
                        ),
                        "capabilities": about("Host capabilities the migrating host must have.", NAMES),
                        "validator_capabilities": about("Validator capabilities the migrating host must have.", NAMES),
                        "host_adapter": about(
                            "The adapter the target pins for the host's harness (absent when it pins none).", NAME
                        ),
                        "host_adapters": about("Every adapter the target workflow pins.", NAMES),
                    },
                    ["workflow", "confirmed_state", "capabilities", "validator_capabilities", "host_adapters"],
                ),
            ),
        },
        ["from", "to", "invalidated_artifacts", "invalidated_validators", "restart_step", "walked_again", "confirmed"],
    ),
)

REFUSAL = document(
    "refusal",
    "A refused call: the structuredContent of a tool result with isError true (never in an outputSchema)",
    closed(
        {
            "error": about(
                "Why the call was refused. A refusal issues no checkpoint: the run is where the last one put it.",
                closed(
                    {
                        "code": about(
                            "The failure code, one of the closed list in docs/failure-codes.md, which says what "
                            "went wrong and what to do.",
                            FAILURE_CODE,
                        ),
                        "message": about(
                            "What is wrong, in words, naming the value or file concerned.", {"type": "string"}
                        ),
                        "next": about(
                            "What to do about it, in words: the refusal's own step, else the code's line in "
                            'docs/failure-codes.md (its "what to do" column).',
                            {"type": "string", "minLength": 1},
                        ),
                        "path": about(
                            "The file or JSON Pointer the refusal is about, when it is about one.", {"type": "string"}
                        ),
                        "details": about(
                            "Machine-readable particulars of this code (e.g. `pointer` and `problem` for an "
                            "argument the schema refused, `available` for an unknown workflow).",
                            {"type": "object"},
                        ),
                    },
                    ["code", "message", "next"],
                ),
            ),
        },
        ["error"],
    ),
)
