"""What a workflow needs from a run, said up front rather than one refusal at a time.

A harness (or the model behind it) should learn every confirmed-state field a
workflow requires, what each field expects, and the capabilities and adapters
it needs before it calls, and a refusal should name *all* of them at once:
``start_workflow`` lists every missing field, ``workflow_not_found`` lists the
workflows the release has, and a migration preview lists what the target
workflow needs before the user confirms it. Plain data from the verified
catalogue and the workflow's ``confirmed_state_schema``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rimthan_workflow_registry.errors import FailureCode
from rimthan_workflow_registry.failures import Failure
from rimthan_workflow_registry.release.catalogue import (
    HostAdapter,
    WorkflowDefinition,
    required_capabilities,
    required_validator_capabilities,
    semver_key,
)


def field_expectation(schema: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The ``confirmed_state_schema`` property of field ``name`` (its description, type, enum...)."""
    properties = schema.get("properties")
    found = properties.get(name) if isinstance(properties, Mapping) else None
    return dict(found) if isinstance(found, Mapping) else {}


def required_fields(schema: Mapping[str, Any]) -> list[str]:
    required = schema.get("required")
    return [str(name) for name in required] if isinstance(required, list) else []


def missing_fields(
    values: Mapping[str, Any], schema: Mapping[str, Any], required: Iterable[str] | None = None
) -> list[Failure]:
    """One ``confirmed_field_missing`` failure per required field absent from ``values``: the fields the schema
    requires, or ``required`` (a step's ``requires_confirmed``)."""
    return [
        Failure(
            FailureCode.CONFIRMED_FIELD_MISSING,
            _missing_message(name, field_expectation(schema, name)),
            pointer=f"/{name}",
            details={"field": name, "expects": field_expectation(schema, name)},
        )
        for name in (required_fields(schema) if required is None else required)
        if name not in values
    ]


def _missing_message(name: str, expects: Mapping[str, Any]) -> str:
    description = expects.get("description")
    what = f": {description}" if isinstance(description, str) and description else ""
    choices = expects.get("enum")
    one_of = f" (one of {', '.join(map(str, choices))})" if isinstance(choices, list) else ""
    return f"required field {name!r} is missing; ask the user and confirm it{what}{one_of}"


def state_fields(schema: Mapping[str, Any], values: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every field the schema declares: required or not, present now or not, and what it expects."""
    properties = schema.get("properties")
    names = list(properties) if isinstance(properties, Mapping) else []
    required = set(required_fields(schema))
    return [
        {
            "field": name,
            "required": name in required,
            "present": name in values,
            "expects": field_expectation(schema, name),
        }
        for name in names
    ]


def workflow_needs(
    workflow: WorkflowDefinition,
    schema: Mapping[str, Any],
    values: Mapping[str, Any],
    adapter: HostAdapter | None,
) -> dict[str, Any]:
    """What running ``workflow`` on a host bound to ``adapter`` takes: its confirmed-state fields, the capabilities
    and validator capabilities that host must have (the workflow's and the adapter's, as ``host_blockers`` checks
    them), the adapter (``host_adapter``, absent when the host's harness has none pinned) and every pinned one."""
    needs: dict[str, Any] = {
        "workflow": {"id": workflow.id, "version": workflow.version},
        "confirmed_state": state_fields(schema, values),
        "capabilities": sorted(required_capabilities(workflow, adapter)),
        "validator_capabilities": sorted(required_validator_capabilities(workflow, adapter)),
        "host_adapters": sorted(workflow.host_adapters),
    }
    if adapter is not None:
        needs["host_adapter"] = adapter.key
    return needs


def available_workflows(workflows: Iterable[WorkflowDefinition]) -> list[dict[str, Any]]:
    """The workflows a release carries: id, owner, title (its newest version's), aliases and versions (oldest
    first)."""
    grouped: dict[tuple[str, str], list[WorkflowDefinition]] = {}
    for workflow in workflows:
        grouped.setdefault((workflow.owner, workflow.id), []).append(workflow)
    return [
        {
            "id": wf_id,
            "owner": owner,
            "title": max(found, key=lambda w: semver_key(w.version)).title,
            "aliases": sorted({a for w in found for a in w.entry_aliases}),
            "versions": sorted((w.version for w in found), key=semver_key),
        }
        for (owner, wf_id), found in sorted(grouped.items())
    ]


def available_suffix(available: list[dict[str, Any]]) -> str:
    """How a ``workflow_not_found`` message ends: the workflows a release carries (:func:`describe_available`). The
    same list is the refusal's ``details.available``, which a client naming the workflows in its own words reads
    (the host bridge's, ``rimthan_host.unserved``): the message is the verifier's, never edited."""
    return f"; available: {describe_available(available)}"


def describe_available(available: list[dict[str, Any]]) -> str:
    """``id (aliases: a, b; versions: 1.0.0, 1.1.0)`` for each workflow, for a one-line refusal."""
    parts = []
    for entry in available:
        aliases = ", ".join(entry["aliases"]) or "none"
        parts.append(f"{entry['id']} (aliases: {aliases}; versions: {', '.join(entry['versions'])})")
    return "; ".join(parts) or "none"
