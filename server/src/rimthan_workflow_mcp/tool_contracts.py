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
from . import tool_schemas as ts

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


# What each tool tells a client (title, description); schemas and markers are derived in ``_contract``.
_WORDS: dict[str, tuple[str, str]] = {
    START_WORKFLOW: (
        "Start a workflow",
        (
            "Call once to begin a run. Select a workflow by id or alias (newest version unless "
            "workflow_version is given), validate the confirmed initial state and the host's adapter and "
            "capabilities, and return the mandatory setup-workspace step with a fresh checkpoint. A refusal "
            "lists every missing or unconfirmed field (with what it expects) and, for an unknown name, the "
            "available workflows. Read-only: issues a token, stores nothing."
        ),
    ),
    CONTINUE_WORKFLOW: (
        "Continue a workflow",
        (
            "Call after an ungated step, to answer a question (next_confirmed_state), or to resume. Verify a "
            "checkpoint and the confirmed state, then return the current gated step again, ask one question, "
            "advance an ungated step, report completion, or (with `migration`, when the server has a "
            "migration target) preview what the target needs and perform an explicit, user-confirmed "
            "release migration."
        ),
    ),
    PREPARE_STEP_VALIDATION: (
        "Prepare step validation",
        (
            "Call once a gated step's outputs are written and read back. Deterministically check them "
            "(declared ids, sizes, media types, JSON Schemas, input bindings, workspace or output "
            "attestations, repository policy, capabilities) and list every failure at once. On success "
            "return a signed validation bundle and the semantic validators the host must run."
        ),
    ),
    SUBMIT_STEP_VALIDATION: (
        "Submit step validation",
        (
            "Call after every validator the bundle requires has run in its own subagent. Verify the bundle "
            "and the reports, then return the findings on the same step or advance to the next step, "
            "question or completion with a new checkpoint. Reports are not stored."
        ),
    ),
}
_SCHEMAS: dict[str, tuple[dict[str, Any], list[str], frozenset[str]]] = {
    START_WORKFLOW: (ts.START_INPUT, ts.START_STATUSES, ts.START_NEVER),
    CONTINUE_WORKFLOW: (ts.CONTINUE_INPUT, ts.CONTINUE_STATUSES, ts.CONTINUE_NEVER),
    PREPARE_STEP_VALIDATION: (ts.PREPARE_INPUT, ts.PREPARE_STATUSES, ts.PREPARE_NEVER),
    SUBMIT_STEP_VALIDATION: (ts.SUBMIT_INPUT, ts.SUBMIT_STATUSES, ts.SUBMIT_NEVER),
}


def _contract(name: str) -> ToolContract:
    """One tool: its method is its name without the ``rimthan.`` prefix; only start opens a run without a checkpoint.

    Every tool is read-only (a token is issued, nothing is stored); start is
    the one that is not idempotent (each call issues a fresh run).
    """
    title, description = _WORDS[name]
    input_schema, statuses, never = _SCHEMAS[name]
    resumes = name != START_WORKFLOW
    return ToolContract(
        name=name,
        method=name.removeprefix("rimthan."),
        title=title,
        description=description,
        input_schema=input_schema,
        output_schema=ts.result_schema(statuses, never),
        read_only=True,
        idempotent=resumes,
        checkpoint_bearing=resumes,
    )


def workflow_engine_tool_contracts() -> tuple[ToolContract, ...]:
    """Exactly the four workflow tools, in a fixed order."""
    return tuple(_contract(name) for name in TOOL_NAMES)


def contract_documents() -> dict[str, dict[str, Any]]:
    """Every embedded contract by name, as served at immutable resource URIs."""
    return dict(cs.CONTRACTS)
