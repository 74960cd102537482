"""The four tool contracts: names, schemas and mutability markers.

``workflow_engine_tool_contracts`` is the whole tool surface of the
``workflow-engine`` profile. Definitions are plain dicts in MCP's wire shape;
the server adapter turns them into SDK types. Every schema is closed and
embeds the documents of :mod:`contract_schemas`, which are also served as
immutable resources.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from rimthan_workflow_registry.protocol_names import (
    CONTINUE_WORKFLOW,
    PREPARE_STEP_VALIDATION,
    START_WORKFLOW,
    SUBMIT_STEP_VALIDATION,
    TOOL_NAMES,
)

from . import contract_schemas as cs

if TYPE_CHECKING:
    from .results import ToolResult
    from .workflow_engine import WorkflowEngineQueryModule

__all__ = [
    "CONTINUE_WORKFLOW",
    "PREPARE_STEP_VALIDATION",
    "START_WORKFLOW",
    "SUBMIT_STEP_VALIDATION",
    "TOOL_NAMES",
    "ToolContract",
    "contract_documents",
    "workflow_engine_tool_contracts",
]


@dataclass(frozen=True)
class ToolContract:
    """One tool: its wire declaration and the ``WorkflowEngineQueryModule`` method that implements it."""

    name: str
    method: str
    title: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    read_only: bool
    idempotent: bool
    checkpoint_bearing: bool

    def bound(self, module: WorkflowEngineQueryModule) -> Callable[[Mapping[str, Any]], ToolResult]:
        """``module``'s implementing method (looked up by name, so a subclass's override is the one called)."""
        return cast("Callable[[Mapping[str, Any]], ToolResult]", getattr(module, self.method))

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
            method="start_workflow",
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
            method="continue_workflow",
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
            method="prepare_step_validation",
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
            method="submit_step_validation",
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
