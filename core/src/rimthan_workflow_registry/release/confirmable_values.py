"""Every value a workflow asks a user to confirm can be confirmed, and leads somewhere.

A question's choices and a branch's values end up in the confirmed state the
host sends on every later call. Two authoring mistakes build and sign, then
strand every run that meets them:

- a choice no branch takes: the user picks it, confirms it, and the step
  refuses every later call with ``branch_no_match`` (:func:`check_choices_lead_somewhere`);
- a choice or branch value the field's own schema refuses (an ``enum`` that
  lacks it, a ``pattern`` or ``maxLength`` it breaks): no state holding it
  validates, so the question can never be passed that way, or the branch is
  dead (:func:`check_values_accepted`).

Both are ``branch_predicate_invalid``, naming the workflow file, the step and
the key; each value refused is a failure of its own, in step order. The
schema check asks jsonschema about the value against the field's subschema
(``properties.<field>``, its ``$ref`` resolved in the schema it belongs to):
only what every state holding the value would refuse. Its answer depends only
on the schema and the values, so a pass is remembered in
:data:`~rimthan_workflow_registry.release.schema_checks.SCHEMA_CHECKS` under
their digest, as the metaschema check is: a rebuild of a catalogue already
checked never imports jsonschema.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import CatalogueError, FailureCode, RegistryError, collected, quoted
from ..json_encoders import compact_encoder
from .catalogue import Scalar, StepDefinition, WorkflowDefinition
from .catalogue_bounds import asked_values
from .catalogue_rules import unresolved
from .schema_checks import SCHEMA_CHECKS, validator_version

CHECKER_SUFFIX = ":confirmable-values"  # the checks' memory: a new rule, a new suffix (old passes void)
_KEY_TEXT = compact_encoder(
    sort_keys=True, ensure_ascii=True
)  # any parsed schema, one text (NaN-free: parsed strictly)


def check_choices_lead_somewhere(workflow: WorkflowDefinition) -> None:
    """Every choice a question offers matches one of its step's branches (each that does not is said)."""
    failures: list[RegistryError] = []
    for step in workflow.steps:
        if step.question is None or not step.branches:
            continue
        failures += [
            _refusal(
                workflow,
                step,
                f"question.choices[{i}] {quoted(choice, 40)!r} matches no branch; a user who picks it "
                f"could not go on (add a branch for it or drop the choice)",
            )
            for i, choice in enumerate(step.question.choices)
            if not any(branch.when.matches(choice) for branch in step.branches)
        ]
    _raise_each(failures)


def check_required_confirmed(workflow: WorkflowDefinition, state_schema: Any) -> None:
    """A step's ``requires_confirmed`` names fields the confirmed-state schema declares, on a step ``continue``
    moves on (no outputs, no validators): what its instruction has the user confirm before the run goes on
    (each problem said, in step order)."""
    properties = state_schema.get("properties") if isinstance(state_schema, Mapping) else None
    declared = list(properties) if isinstance(properties, Mapping) else []
    failures: list[RegistryError] = []
    for step in workflow.steps:
        if step.requires_confirmed and step.gated:
            failures.append(
                CatalogueError(
                    FailureCode.CATALOGUE_INVALID,
                    f"step {step.id}: requires_confirmed is for a step without outputs or validators (a gated step "
                    "moves on by validation, which checks its files, not the confirmed state)",
                    path=workflow.source,
                )
            )
        failures += [
            unresolved(
                workflow.source,
                f"step {step.id} requires confirmed field {name!r}, which the confirmed-state schema "
                f"{workflow.confirmed_state_schema} does not declare",
                name,
                declared,
                fix=f"declare {name!r} in the properties of {workflow.confirmed_state_schema}, or drop it from step "
                f"{step.id}'s requires_confirmed in {workflow.source}",
            )
            for name in step.requires_confirmed
            if name not in declared
        ]
    _raise_each(failures)


def check_values_accepted(workflow: WorkflowDefinition, state_schema: Any) -> None:
    """Every question choice and branch value is accepted by its field's schema in ``state_schema``."""
    properties = state_schema.get("properties") if isinstance(state_schema, Mapping) else None
    if not isinstance(properties, Mapping):
        return
    values = [(step, key, field, value) for step, key, field, value in asked_values(workflow) if field in properties]
    if not values:
        return
    checked = _KEY_TEXT({"schema": state_schema, "values": [[f, v] for _, _, f, v in values]}).encode()
    checker = validator_version() + CHECKER_SUFFIX
    if SCHEMA_CHECKS.passed(checked, checker):
        return
    _refuse_values(workflow, state_schema, properties, values)
    SCHEMA_CHECKS.remember([checked], checker)  # reached only when every value passed


def _refuse_values(
    workflow: WorkflowDefinition,
    state_schema: Any,
    properties: Mapping[str, Any],
    values: list[tuple[StepDefinition, str, str, Scalar]],
) -> None:
    from ..jsonschema_formats import FORMAT_CHECKER, Draft202012Validator, best_match
    from .schema_refs import NO_REMOTE_REFERENCES

    root = Draft202012Validator(state_schema, format_checker=FORMAT_CHECKER, registry=NO_REMOTE_REFERENCES)
    fields: dict[str, Any] = {}
    failures: list[RegistryError] = []
    for step, key, field, value in values:
        if field not in fields:
            fields[field] = root.evolve(schema=properties[field])
        error = best_match(fields[field].iter_errors(value))
        if error is not None:
            failures.append(
                _refusal(
                    workflow,
                    step,
                    f"{key} {quoted(value, 40)!r} is refused by the confirmed-state schema's {field!r} "
                    f"({error.validator}: {quoted(error.message, 120)}); no run could confirm it "
                    f"(make the value fit the schema, or the schema accept it)",
                )
            )
    _raise_each(failures)


def _refusal(workflow: WorkflowDefinition, step: StepDefinition, problem: str) -> CatalogueError:
    return CatalogueError(FailureCode.BRANCH_PREDICATE_INVALID, f"step {step.id}: {problem}", path=workflow.source)


def _raise_each(failures: list[RegistryError]) -> None:
    if failures:
        raise collected(failures)
