"""What a catalogue declares fits the tool calls that carry it: one rule per tool-schema bound.

Every value a catalogue declares that reaches a tool call's arguments or
result (ids, versions, ``id@version`` keys, capability lists, pinned adapters,
confirmed-state field names, a step's outputs, validators, inputs and
declared sizes) is bounded by the tool input and output schemas, with the
bound taken from :mod:`rimthan_workflow_registry.limits`; so is every value it
asks a client to confirm (a question's choices, a branch's values, what the
confirmed-state schema's ``minProperties``, ``minLength`` and ``minItems``
demand), against the least confirmed state holding it. A catalogue past one
would build and sign, then fail every run at run time (an
``invalid_arguments`` the client cannot avoid, or a result the output schema
refuses), so these rules refuse it at build and at load (``catalogue_invalid``,
naming the file and the key). Each ``*_problem`` function says why, or
``None`` (each ``*_problems`` function, every why); the ``check_*`` functions
raise every problem found, each a failure of its own in the order the
catalogue lists what it is about, as the other catalogue rules do.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from rimthan_workflow_registry.canonical import canonical_bytes
from rimthan_workflow_registry.errors import CatalogueError, FailureCode, collected, quoted
from rimthan_workflow_registry.limits import (
    MAX_CONFIRMED_FIELDS,
    MAX_CONFIRMED_STATE_BYTES,
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
    Scalar,
    StepDefinition,
    WorkflowDefinition,
    required_capabilities,
    required_validator_capabilities,
)
from rimthan_workflow_registry.release.format import CATALOGUE_MANIFEST_NAME


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
            CATALOGUE_MANIFEST_NAME,
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
    _raise_each([(path, problem) for path, problem in checks if problem is not None])


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
    found: list[tuple[str, str]] = []
    for adapter in catalogue.host_adapters:
        for key, names in (
            ("capabilities", adapter.capabilities),
            ("validator_capabilities", adapter.validator_capabilities),
        ):
            found += [(adapter.source, p) for p in [listed_problem(key, names)] if p is not None]
    for workflow in catalogue.workflows:
        found += [(workflow.source, problem) for problem in _workflow_lists_problems(catalogue, workflow)]
    _raise_each(found)


def _workflow_lists_problems(catalogue: Catalogue, workflow: WorkflowDefinition) -> list[str]:
    """Each list of ``workflow`` past its bound; a union with a pinned adapter's list is said only when none of
    the lists it joins is past on its own (it would be past by that one: an echo of its failure)."""
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
        adapter_capabilities = adapter.capabilities if adapter else ()
        if not _any_past([workflow.required_capabilities, adapter_capabilities]):
            what = f"required_capabilities with host adapter {key}'s capabilities"
            lists.append((what, required_capabilities(workflow, adapter), "a host object carries"))
        validator_capabilities = adapter.validator_capabilities if adapter else ()
        if not _any_past([*(v.required_capabilities for v in workflow.validators), validator_capabilities]):
            what = f"the validators' required_capabilities with host adapter {key}'s validator_capabilities"
            lists.append((what, required_validator_capabilities(workflow, adapter), "a host object carries"))
    return [p for key, names, what in lists if (p := listed_problem(key, names, what)) is not None]


def _any_past(lists: Iterable[Iterable[str]]) -> bool:
    return any(listed_problem("", names) is not None for names in lists)


def _raise_each(found: list[tuple[str, str]]) -> None:
    """Each ``(file, problem)`` of ``found`` a failure of its own, in order (nothing raised when it is empty)."""
    if found:
        raise collected([_invalid(path, problem) for path, problem in found])


# --------------------------------------------------------------------------- the confirmed state


def state_fields_problems(schema: Any) -> Iterator[str]:
    """Each reason the top-level fields a confirmed-state schema names cannot all travel in a tool call.

    The fields are the schema's ``properties`` and ``required`` names: a state
    carries at most ``MAX_CONFIRMED_FIELDS`` of them (and as many
    confirmations), and each name is a ``NAME`` (a confirmation's key, a
    question's field, a migration preview's field).
    """
    if not isinstance(schema, Mapping):
        return
    names = set(_properties(schema)) | _required(schema)
    if len(names) > MAX_CONFIRMED_FIELDS:
        yield (
            f"properties and required name {len(names)} top-level fields, past the {MAX_CONFIRMED_FIELDS} a "
            "confirmed state carries (MAX_CONFIRMED_FIELDS)"
        )
    for name in sorted(names):
        if not 1 <= len(name) <= MAX_NAME_CHARS:
            yield (
                f"top-level field {quoted(name, 40)!r} is {len(name)} characters; a field name is 1 to "
                f"{MAX_NAME_CHARS} characters (MAX_NAME_CHARS)"
            )
    yield from _least_state_problems(schema)


def check_state_fields(workflow: WorkflowDefinition, schema: Any) -> None:
    """The workflow's confirmed-state schema names fields a tool call can carry, and asks for no state larger than
    one may be (each refusal names the schema file)."""
    _raise_each([(workflow.confirmed_state_schema, problem) for problem in state_fields_problems(schema)])


# --------------------------------------------------------------------------- what a client can confirm
# A confirmed state is at most MAX_CONFIRMED_STATE_BYTES as RFC 8785 canonical JSON (every transport refuses a larger
# one). The figures below are floors: the fewest bytes a value can take by the schema's plain number keywords alone
# (``minLength``, ``minItems``, ``minProperties``, ``required``, with one ``type``), never more than a valid value
# takes, so a floor past the bound is a state no client can send. JSON Schema satisfiability is not attempted.


def _least_number(schema: Mapping[str, Any], key: str) -> int:
    """``schema[key]`` when it is a plain non-negative number (a ``minLength``, say), else 0."""
    value = schema.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < float("inf"):
        return 0
    return int(value)


def _text_bytes(text: str) -> int:
    """The fewest bytes ``text`` takes as a JSON string: its UTF-8 bytes in quotes (an escape only adds)."""
    return len(text.encode("utf-8", "surrogatepass")) + 2


def least_value_bytes(schema: Any) -> int:
    """The fewest canonical JSON bytes of a value ``schema`` accepts, by its own plain number keywords.

    A string takes its quotes and ``minLength`` characters of a byte or more; an
    array ``minItems`` items of its ``items``' least each, with commas; an
    object its least (:func:`least_object_bytes`); ``true``, ``false`` and
    ``null`` four bytes or more; any other value (several types, none, a
    ``$ref``) one byte.
    """
    if not isinstance(schema, Mapping):
        return 1
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) and len(kind) == 1 else kind
    if kind == "string":
        return 2 + _least_number(schema, "minLength")
    if kind == "array":
        count = _least_number(schema, "minItems")
        item = 1 if "prefixItems" in schema else least_value_bytes(schema.get("items"))
        return 2 + count * (item + 1) - min(count, 1)
    if kind == "object":
        return least_object_bytes(schema)
    return 4 if kind in ("boolean", "null") else 1


def least_object_bytes(schema: Mapping[str, Any], holding: Mapping[str, int] | None = None) -> int:
    """The fewest canonical bytes of an object ``schema`` accepts that holds ``holding`` (member -> value bytes).

    Its ``required`` members at their least, ``holding``'s at theirs, and
    ``"":0`` (4 bytes) for each member ``minProperties`` asks for beyond them.
    """
    properties = _properties(schema)
    values = {n: least_value_bytes(properties.get(n)) for n in _required(schema) - set(holding or {})}
    values.update(holding or {})
    count = max(len(values), _least_number(schema, "minProperties"))
    members = sum(_text_bytes(n) + 1 + size for n, size in values.items()) + 4 * (count - len(values))
    return 2 + members + max(count - 1, 0)


def _properties(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    """An object schema's ``properties`` (none if it declares no mapping)."""
    properties = schema.get("properties")
    return properties if isinstance(properties, Mapping) else {}


def _required(schema: Mapping[str, Any]) -> set[str]:
    """The member names an object schema's ``required`` lists (none if it lists none)."""
    required = schema.get("required")
    return {n for n in required if isinstance(n, str)} if isinstance(required, list) else set()


def _least_state_problems(schema: Mapping[str, Any]) -> Iterator[str]:
    """Each reason a confirmed-state schema asks for more fields, or a larger state, than a client can confirm.

    Required fields past the bound are said alone: every optional field would only add to them (an echo).
    """
    least = _least_number(schema, "minProperties")
    if least > MAX_CONFIRMED_FIELDS:
        yield (
            f"minProperties = {least} is past the {MAX_CONFIRMED_FIELDS} top-level fields a confirmed state carries "
            "(MAX_CONFIRMED_FIELDS)"
        )
    properties = _properties(schema)
    size = least_object_bytes(schema)
    if size > MAX_CONFIRMED_STATE_BYTES:
        yield (
            f"its required fields take at least {size} bytes {_PAST_STATE} (their minLength, minItems, minProperties)"
        )
        return
    for name in sorted(set(properties) - _required(schema)):
        size = least_object_bytes(schema, {name: least_value_bytes(properties[name])})
        if size > MAX_CONFIRMED_STATE_BYTES:
            yield (
                f"a state holding top-level field {quoted(name, 40)!r} takes at least {size} bytes {_PAST_STATE} "
                "(its minLength, minItems, minProperties, with the required fields)"
            )


_PAST_STATE = (
    f"as canonical JSON, past the {MAX_CONFIRMED_STATE_BYTES} bytes a client can confirm (MAX_CONFIRMED_STATE_BYTES)"
)


def confirmable_problem(key: str, value: Scalar, least_without: int) -> str | None:
    """Why no client can confirm ``value`` (named ``key``) into a state whose least, holding the field at 0 bytes,
    is ``least_without`` bytes, or ``None``."""
    size = least_without + len(canonical_bytes(value))
    if size <= MAX_CONFIRMED_STATE_BYTES:
        return None
    return f"{key} {quoted(value, 40)!r} makes a state of at least {size} bytes {_PAST_STATE}"


def check_confirmable_values(workflow: WorkflowDefinition, schema: Any) -> None:
    """Every choice a question offers and every value a branch tests fits a state a client can confirm.

    The host confirms the answer into the state it sends on every later call;
    a value past the bound would build and sign, then no run could pass the
    question (the refusal names the workflow file and the key). A value's
    bytes only add to the least state holding its field, so that is computed
    once per field. Each value past it is said.
    """
    if not isinstance(schema, Mapping):
        return
    least: dict[str, int] = {}
    found: list[tuple[str, str]] = []
    for step, key, field, value in asked_values(workflow):
        if field not in least:
            least[field] = least_object_bytes(schema, {field: 0})
        problem = confirmable_problem(key, value, least[field])
        if problem is not None:
            found.append((workflow.source, f"step {step.id}: {problem}"))
    _raise_each(found)


def asked_values(workflow: WorkflowDefinition) -> Iterator[tuple[StepDefinition, str, str, Scalar]]:
    """``(step, key, field, value)`` for every question choice and branch value of ``workflow``: every value a
    client may be asked to confirm into the state (``key`` names it in the workflow's TOML, for a refusal)."""
    for step in workflow.steps:
        if step.question is not None:
            for i, choice in enumerate(step.question.choices):
                yield step, f"question.choices[{i}]", step.question.field, choice
        for j, branch in enumerate(step.branches):
            for value in branch.when.values:
                yield step, f"branches[{j}].when.{branch.when.operator}", branch.when.field, value


# --------------------------------------------------------------------------- one step's call


def declared_count_problems(step: StepDefinition) -> Iterator[str]:
    """Each reason ``step`` declares more outputs, validators or inputs than one call carries, in that order.

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
            yield f"it declares {count} {what}, past the {bound} one tool call carries"


def declared_size_problems(step: StepDefinition) -> Iterator[str]:
    """Each reason the artifact sizes ``step`` declares are past :data:`MAX_STEP_ARTIFACT_BYTES`.

    Each output's ``max_bytes`` (in the order the step lists them), then the
    step's ``max_total_bytes``, or without it the sum of its outputs'
    ``max_bytes``: what one prepare call may then carry must fit the request
    every transport takes (``limits.MAX_REQUEST_BODY_BYTES``). The sum is said
    only when no output is past on its own (it would be past by that one: an
    echo of its failure).
    """
    bound = MAX_STEP_ARTIFACT_BYTES
    past = f"past the {bound} bytes a step's artifacts may total (MAX_STEP_ARTIFACT_BYTES)"
    outputs_past = [o for o in step.outputs if o.max_bytes > bound]
    for output in outputs_past:
        yield f"output {output.id} max_bytes = {output.max_bytes} is {past}"
    if step.max_total_bytes is not None:
        if step.max_total_bytes > bound:
            yield f"max_total_bytes = {step.max_total_bytes} is {past}"
        return
    total = sum(o.max_bytes for o in step.outputs)
    if total > bound and not outputs_past:
        yield f"its outputs' max_bytes sum to {total}, {past}; declare max_total_bytes = {bound} or less"
