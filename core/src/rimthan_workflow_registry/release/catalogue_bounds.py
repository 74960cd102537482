"""What a catalogue declares fits the tool calls that carry it: one rule per tool-schema bound.

Every value a catalogue declares that reaches a tool call's arguments or
result (ids, versions, ``id@version`` keys, capability lists, pinned adapters,
confirmed-state field names, a step's outputs, validators, inputs and
declared sizes) is bounded by the tool input and output schemas, with the
bound taken from :mod:`rimthan_workflow_registry.limits`. A catalogue past one
would build and sign, then fail every run at run time (an
``invalid_arguments`` the client cannot avoid, or a result the output schema
refuses), so these rules refuse it at build and at load (``catalogue_invalid``,
naming the file and the key). Each ``*_problem`` function says why, or
``None``; the ``check_*`` functions raise the first problem found, as the other
catalogue rules do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rimthan_workflow_registry.errors import CatalogueError, FailureCode, quoted
from rimthan_workflow_registry.limits import (
    MAX_CONFIRMED_FIELDS,
    MAX_LISTED_NAMES,
    MAX_NAME_CHARS,
    MAX_STEP_ARTIFACT_BYTES,
    MAX_STEP_INPUTS,
    MAX_STEP_OUTPUTS,
    MAX_STEP_VALIDATORS,
    MAX_VERSION_CHARS,
)
from rimthan_workflow_registry.release.catalogue import (
    Catalogue,
    StepDefinition,
    WorkflowDefinition,
    required_capabilities,
    required_validator_capabilities,
)


def _invalid(path: str, message: str) -> CatalogueError:
    return CatalogueError(FailureCode.CATALOGUE_INVALID, message, path=path)


# --------------------------------------------------------------------------- identities


def identity_problem(key: str, version_key: str, version: str, joined: str) -> str | None:
    """Why a version (named ``version_key``) or the ``id@version`` (or release id) ``joined`` is too long, or ``None``.

    A version travels as a tool schema ``VERSION`` (``MAX_VERSION_CHARS``); the
    joined key as a ``NAME`` (``MAX_NAME_CHARS``): a release id in every
    result, a workflow or validator key in findings and migration previews, a
    host adapter key in a preview's ``host_adapters``.
    """
    if len(version) > MAX_VERSION_CHARS:
        return (
            f"{version_key} is {len(version)} characters, past the {MAX_VERSION_CHARS} a version may have in a "
            "tool call (MAX_VERSION_CHARS)"
        )
    if len(joined) > MAX_NAME_CHARS:
        return (
            f"{key} {joined!r} is {len(joined)} characters, past the {MAX_NAME_CHARS} a name may have in a tool "
            "call (MAX_NAME_CHARS): shorten its id or version"
        )
    return None


def check_identities(catalogue: Catalogue) -> None:
    """Every version, release id and ``id@version`` key fits the tool schemas' ``VERSION`` and ``NAME``."""
    checks: list[tuple[str, str | None]] = [
        (
            "catalogue.toml",
            identity_problem("release id", "[catalogue].version", catalogue.version, catalogue.release_id),
        )
    ]
    for workflow in catalogue.workflows:
        checks.append((workflow.source, identity_problem("workflow", "version", workflow.version, workflow.key)))
        checks += [
            (workflow.source, identity_problem(f"validators[{i}]", f"validators[{i}].version", v.version, v.key))
            for i, v in enumerate(workflow.validators)
        ]
    checks += [
        (a.source, identity_problem("host adapter", "version", a.version, a.key)) for a in catalogue.host_adapters
    ]
    for path, problem in checks:
        _raise_if(path, problem)


# --------------------------------------------------------------------------- what a host sends


def listed_problem(key: str, names: Iterable[str], what: str = "a host object carries") -> str | None:
    """Why ``names`` (the list ``key`` makes) are more than one ``NAMES`` list holds, or ``None``."""
    count = len(set(names))
    if count > MAX_LISTED_NAMES:
        return f"{key} makes {count} names, past the {MAX_LISTED_NAMES} {what} (MAX_LISTED_NAMES)"
    return None


def check_host_lists(catalogue: Catalogue) -> None:
    """Capabilities a host must send, and adapters a migration preview lists, fit one ``NAMES`` list each.

    A host sends every capability the workflow and its adapter require, and
    every validator capability the workflow's validators and the adapter
    require, in one list each (``host.capabilities``,
    ``host.validator_capabilities``); a migration preview lists the pinned
    adapters in one.
    """
    for adapter in catalogue.host_adapters:
        for key, names in (
            ("capabilities", adapter.capabilities),
            ("validator_capabilities", adapter.validator_capabilities),
        ):
            _raise_if(adapter.source, listed_problem(key, names))
    for workflow in catalogue.workflows:
        _raise_if(workflow.source, _workflow_lists_problem(catalogue, workflow))


def _workflow_lists_problem(catalogue: Catalogue, workflow: WorkflowDefinition) -> str | None:
    lists: list[tuple[str, Iterable[str], str]] = [
        ("required_capabilities", workflow.required_capabilities, "a host object carries"),
        ("host_adapters", workflow.host_adapters, "a migration preview lists"),
    ]
    lists += [
        (f"validators[{i}].required_capabilities", v.required_capabilities, "a host object carries")
        for i, v in enumerate(workflow.validators)
    ]
    for key in workflow.host_adapters:
        adapter = catalogue.adapter(key)
        lists += [
            (
                f"required_capabilities with host adapter {key}'s capabilities",
                required_capabilities(workflow, adapter),
                "a host object carries",
            ),
            (
                f"the validators' required_capabilities with host adapter {key}'s validator_capabilities",
                required_validator_capabilities(workflow, adapter),
                "a host object carries",
            ),
        ]
    return next((p for key, names, what in lists if (p := listed_problem(key, names, what)) is not None), None)


def _raise_if(path: str, problem: str | None) -> None:
    if problem is not None:
        raise _invalid(path, problem)


# --------------------------------------------------------------------------- the confirmed state


def state_fields_problem(schema: Any) -> str | None:
    """Why the top-level fields a confirmed-state schema names cannot all travel in a tool call, or ``None``.

    The fields are the schema's ``properties`` and ``required`` names: a state
    carries at most ``MAX_CONFIRMED_FIELDS`` of them (and as many
    confirmations), and each name is a ``NAME`` (a confirmation's key, a
    question's field, a migration preview's field).
    """
    if not isinstance(schema, Mapping):
        return None
    properties = schema.get("properties")
    required = schema.get("required")
    names = set(properties if isinstance(properties, Mapping) else ())
    names |= {n for n in required if isinstance(n, str)} if isinstance(required, list) else set()
    if len(names) > MAX_CONFIRMED_FIELDS:
        return (
            f"properties and required name {len(names)} top-level fields, past the {MAX_CONFIRMED_FIELDS} a "
            "confirmed state carries (MAX_CONFIRMED_FIELDS)"
        )
    for name in sorted(names):
        if not 1 <= len(name) <= MAX_NAME_CHARS:
            return (
                f"top-level field {quoted(name, 40)!r} is {len(name)} characters; a field name is 1 to "
                f"{MAX_NAME_CHARS} characters (MAX_NAME_CHARS)"
            )
    return None


def check_state_fields(workflow: WorkflowDefinition, schema: Any) -> None:
    """The workflow's confirmed-state schema names fields a tool call can carry (refusal names the schema file)."""
    _raise_if(workflow.confirmed_state_schema, state_fields_problem(schema))


# --------------------------------------------------------------------------- one step's call


def declared_count_problem(step: StepDefinition) -> str | None:
    """Why ``step`` declares more outputs, validators or inputs than one call carries, or ``None``.

    Its artifacts travel in one prepare, its receipts in one bundle, its input
    bindings in one prepare and its reports in one submit: the tool schemas
    bound each list (``limits.MAX_STEP_OUTPUTS``, ``limits.MAX_STEP_VALIDATORS``,
    ``limits.MAX_STEP_INPUTS``).
    """
    for what, count, bound in (
        ("outputs", len(step.outputs), MAX_STEP_OUTPUTS),
        ("validators", len(step.validators), MAX_STEP_VALIDATORS),
        ("inputs", len(step.inputs), MAX_STEP_INPUTS),
    ):
        if count > bound:
            return f"it declares {count} {what}, past the {bound} one tool call carries"
    return None


def declared_size_problem(step: StepDefinition) -> str | None:
    """Why the artifact sizes ``step`` declares are past :data:`MAX_STEP_ARTIFACT_BYTES`, or ``None``.

    An output's ``max_bytes``, the step's ``max_total_bytes``, or without it the
    sum of its outputs' ``max_bytes``: what one prepare call may then carry must
    fit the request every transport takes (``limits.MAX_REQUEST_BODY_BYTES``).
    """
    bound = MAX_STEP_ARTIFACT_BYTES
    past = f"past the {bound} bytes a step's artifacts may total (MAX_STEP_ARTIFACT_BYTES)"
    for output in step.outputs:
        if output.max_bytes > bound:
            return f"output {output.id} max_bytes = {output.max_bytes} is {past}"
    if step.max_total_bytes is not None:
        return f"max_total_bytes = {step.max_total_bytes} is {past}" if step.max_total_bytes > bound else None
    total = sum(o.max_bytes for o in step.outputs)
    if total > bound:
        return f"its outputs' max_bytes sum to {total}, {past}; declare max_total_bytes = {bound} or less"
    return None
