"""The four tool contracts: names, schemas and mutability markers.

``workflow_engine_tool_contracts`` is the whole tool surface of the
``workflow-engine`` profile. Definitions are plain dicts in MCP's wire shape;
the server adapter turns them into SDK types. Every schema is closed and
embeds the documents of :mod:`contract_schemas`, which are also served as
immutable resources.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rimthan_workflow_registry.canonical import canonical_bytes, sha256_hex

from . import contract_schemas as cs

START_WORKFLOW = "rimthan.start_workflow"
CONTINUE_WORKFLOW = "rimthan.continue_workflow"
PREPARE_STEP_VALIDATION = "rimthan.prepare_step_validation"
SUBMIT_STEP_VALIDATION = "rimthan.submit_step_validation"


@dataclass(frozen=True)
class ToolContract:
    name: str
    title: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    read_only: bool
    idempotent: bool
    checkpoint_bearing: bool

    def definition(self) -> dict[str, Any]:
        """The ``tools/list`` entry for this tool (MCP wire field names)."""
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "inputSchema": self.input_schema,
            "outputSchema": self.output_schema,
            "annotations": {
                "title": self.title,
                "readOnlyHint": self.read_only,
                "destructiveHint": False,
                "idempotentHint": self.idempotent,
                "openWorldHint": False,
            },
        }


def workflow_engine_tool_contracts() -> tuple[ToolContract, ...]:
    """Exactly the four workflow tools, in a fixed order."""
    return (
        ToolContract(
            name=START_WORKFLOW,
            title="Start a workflow",
            description=(
                "Call once to begin a run. Select a workflow by id or alias (newest version unless "
                "workflow_version is given), validate the confirmed initial state and the host's adapter and "
                "capabilities, and return the mandatory setup-workspace step with a fresh checkpoint. A refusal "
                "lists every missing or unconfirmed field (with what it expects) and, for an unknown name, the "
                "available workflows. Read-only: issues a token, stores nothing."
            ),
            input_schema=cs.START_INPUT,
            output_schema=cs.result_schema(cs.START_STATUSES),
            read_only=True,
            idempotent=False,
            checkpoint_bearing=False,
        ),
        ToolContract(
            name=CONTINUE_WORKFLOW,
            title="Continue a workflow",
            description=(
                "Call after an ungated step, to answer a question (next_confirmed_state), or to resume. Verify a "
                "checkpoint and the confirmed state, then return the current gated step again, ask one question, "
                "advance an ungated step, report completion, or (with `migration`, when the server has a "
                "migration target) preview what the target needs and perform an explicit, user-confirmed "
                "release migration."
            ),
            input_schema=cs.CONTINUE_INPUT,
            output_schema=cs.result_schema(cs.CONTINUE_STATUSES),
            read_only=True,
            idempotent=True,
            checkpoint_bearing=True,
        ),
        ToolContract(
            name=PREPARE_STEP_VALIDATION,
            title="Prepare step validation",
            description=(
                "Call once a gated step's outputs are written and read back. Deterministically check them "
                "(declared ids, sizes, media types, JSON Schemas, input bindings, workspace or output "
                "attestations, repository policy, capabilities) and list every failure at once. On success "
                "return a signed validation bundle and the semantic validators the host must run."
            ),
            input_schema=cs.PREPARE_INPUT,
            output_schema=cs.result_schema(cs.PREPARE_STATUSES),
            read_only=True,
            idempotent=True,
            checkpoint_bearing=True,
        ),
        ToolContract(
            name=SUBMIT_STEP_VALIDATION,
            title="Submit step validation",
            description=(
                "Call after every validator the bundle requires has run in its own subagent. Verify the bundle "
                "and the reports, then return the findings on the same step or advance to the next step, "
                "question or completion with a new checkpoint. Reports are not stored."
            ),
            input_schema=cs.SUBMIT_INPUT,
            output_schema=cs.result_schema(cs.SUBMIT_STATUSES),
            read_only=True,
            idempotent=True,
            checkpoint_bearing=True,
        ),
    )


def contract_documents() -> dict[str, dict[str, Any]]:
    """Every embedded contract by name, as served at immutable resource URIs."""
    return dict(cs.CONTRACTS)


def contract_digest(document: dict[str, Any]) -> str:
    """Hex SHA-256 of a contract's canonical bytes (part of its resource URI)."""
    return sha256_hex(canonical_bytes(document))
