"""Catalogue authoring rules, applied identically at build time and load time.

Each rule is a named function that raises a ``CatalogueError`` with a precise
code and the file it is about, and each problem it finds a failure of its own
(:func:`errors.collected`). ``ReleaseLoader._validate_workflow_catalogue``
runs them in order; a catalogue that passes builds, and one that builds loads.
The bounds on what a catalogue declares that a tool call carries (sizes,
counts, versions, names) are in :mod:`catalogue_bounds`; the host adapters and
what a workflow's steps name, in :mod:`catalogue_references`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from rimthan_workflow_registry.errors import CatalogueError, FailureCode, RegistryError, closest_name, collected
from rimthan_workflow_registry.limits import MAX_CATALOGUE_FILE_BYTES, first_not_utf8, save_as_utf8_step
from rimthan_workflow_registry.protocol_names import SETUP_STEP_ID
from rimthan_workflow_registry.release.catalogue import (
    WORKSPACE_MANIFEST_ARTIFACT,
    Catalogue,
    StepDefinition,
    WorkflowDefinition,
)
from rimthan_workflow_registry.release.catalogue_bounds import declared_count_problems, declared_size_problems
from rimthan_workflow_registry.release.catalogue_routes import reached_from
from rimthan_workflow_registry.release.paths import path_problem


def unresolved(
    path: str, message: str, written: str | None = None, known: Iterable[str] = (), *, fix: str
) -> CatalogueError:
    """A reference that resolves to nothing; when ``written`` looks like a misspelling of one of ``known``,
    the next step names the change, else it is ``fix``: what to add or correct for this reference."""
    meant = None if written is None else closest_name(written, [k for k in known if k != written])
    return CatalogueError(
        FailureCode.REFERENCE_UNRESOLVED,
        message + (f" (did you mean {meant!r}?)" if meant else ""),
        path=path,
        next_step=f"in {path}, change {written!r} to {meant!r}" if meant else fix,
    )


def one_of(known: Iterable[str]) -> str:
    """The names a reference may take, for a next step: ``'a', 'b'`` (at most five), or ``none yet``."""
    names = sorted(set(known))
    shown = ", ".join(repr(n) for n in names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return shown or "none yet"


MAX_SEGMENT_BYTES = 255
"""A file or directory name in the user's project, in UTF-8 bytes: NAME_MAX on Linux and macOS file systems."""


def project_path_problem(path: str) -> str | None:
    """Why ``path`` may not name a file the host writes in the user's project, or ``None`` if it may.

    A release file's rules (:func:`paths.path_problem`: relative POSIX, no
    ``.``/``..``, no control character, NFC, not overlong), no drive letter,
    and no name longer than a file system holds: a path the host cannot
    create would build, then fail the step that writes it.
    """
    problem = path_problem(path)
    if problem is not None:
        return problem
    segments = path.split("/")
    if ":" in segments[0]:
        return "drive-like first segment"
    if any(len(segment.encode("utf-8")) > MAX_SEGMENT_BYTES for segment in segments):
        return f"a name longer than {MAX_SEGMENT_BYTES} bytes"
    return None


def check_files_exist(catalogue: Catalogue, paths: frozenset[str]) -> None:
    """Every file a workflow or adapter names is part of the catalogue (each missing file a failure of its own,
    once per workflow or adapter naming it)."""
    failures: list[RegistryError] = []
    for workflow in catalogue.workflows:
        referenced = [workflow.confirmed_state_schema]
        referenced += [a.file for a in workflow.assets]
        referenced += [v.instruction for v in workflow.validators]
        for step in workflow.steps:
            referenced.append(step.instruction)
            referenced += [o.schema for o in step.outputs if o.schema is not None]
        failures += [
            unresolved(
                workflow.source,
                f"workflow {workflow.key} references missing file {ref!r}",
                ref,
                paths,
                fix=_add_file_or_correct(ref, workflow.source),
            )
            for ref in dict.fromkeys(referenced)
            if ref not in paths
        ]
    failures += [
        unresolved(
            adapter.source,
            f"adapter {adapter.key} references missing file {adapter.instruction!r}",
            adapter.instruction,
            paths,
            fix=_add_file_or_correct(adapter.instruction, adapter.source),
        )
        for adapter in catalogue.host_adapters
        if adapter.instruction not in paths
    ]
    if failures:
        raise collected(failures)


def _text_files(catalogue: Catalogue) -> list[str]:
    """Files handed to harnesses as text: step and validator instructions, assets, adapter instructions."""
    paths: list[str] = []
    for workflow in catalogue.workflows:
        paths += [a.file for a in workflow.assets]
        paths += [v.instruction for v in workflow.validators]
        paths += [s.instruction for s in workflow.steps]
    paths += [a.instruction for a in catalogue.host_adapters]
    return sorted(set(paths))


def _add_file_or_correct(ref: str, source: str) -> str:
    return f"create {ref} (a path from the folder of catalogue.toml), or correct the path {ref!r} in {source}"


def check_text_files(catalogue: Catalogue, read: Callable[[str], bytes]) -> None:
    """Every text file a step payload carries is UTF-8, so a release that loads can always be served (each file
    that is not is a failure of its own)."""
    failures: list[RegistryError] = []
    for path in _text_files(catalogue):
        data = read(path)
        bad = first_not_utf8(data)
        if bad is not None:
            failures.append(
                CatalogueError(
                    FailureCode.CATALOGUE_INVALID,
                    f"is not UTF-8 text: {bad}; instructions and assets are delivered to harnesses as text",
                    path=path,
                    next_step=save_as_utf8_step(path, bad),
                )
            )
    if failures:
        raise collected(failures)


def check_text_sizes(catalogue: Catalogue, read: Callable[[str], bytes]) -> None:
    """Build only (a signed release keeps loading; the server quotes a large file from disk): every text file a
    step payload carries is at most a catalogue file's size, since a harness (the host kit) takes no asset or
    instruction past that bound from a verifier, and says something: an empty or blank one (a file created and
    never written) would be signed and delivered as nothing (each file is a failure of its own)."""
    failures = [problem for path in _text_files(catalogue) if (problem := _text_size_problem(path, read(path)))]
    if failures:
        raise collected(failures)


def _text_size_problem(path: str, data: bytes) -> CatalogueError | None:
    if not data.strip():
        what = "is empty" if not data else "holds only whitespace"
        return CatalogueError(
            FailureCode.CATALOGUE_INVALID,
            f"{what}; an instruction or asset is delivered to harnesses to be read, and this one says nothing",
            path=path,
            next_step="write what the harness should read into the file, or remove the reference to it",
        )
    if len(data) > MAX_CATALOGUE_FILE_BYTES:
        return CatalogueError(
            FailureCode.CATALOGUE_INVALID,
            f"is {len(data)} bytes; an instruction or asset delivered to harnesses holds at most "
            f"{MAX_CATALOGUE_FILE_BYTES} (a catalogue file's bound)",
            path=path,
            next_step=f"shorten the file, or split it into assets or steps of at most {MAX_CATALOGUE_FILE_BYTES} "
            "bytes each",
        )
    return None


def check_schemas(schemas: Mapping[str, Any]) -> None:
    """Every JSON Schema the catalogue uses is valid Draft 2020-12, refers only to itself, uses checked formats, and
    has no pattern whose matching can backtrack exponentially.

    jsonschema is imported only when there is a schema to check: a rebuild whose
    schemas all passed before (``schema_checks``) never loads it.
    """
    if not schemas:
        return
    from rimthan_workflow_registry.jsonschema_formats import Draft202012Validator
    from rimthan_workflow_registry.release.schema_patterns import backtracking_pattern
    from rimthan_workflow_registry.release.schema_refs import unresolved_reference

    checkable = set(Draft202012Validator.FORMAT_CHECKER.checkers)
    failures: list[RegistryError] = []
    for path, schema in schemas.items():
        try:
            Draft202012Validator.check_schema(schema)
        except Exception as exc:  # jsonschema.SchemaError, or a bad $ref
            problem: str | None = f"not a valid Draft 2020-12 schema: {_schema_problem(exc)}"
        else:
            problem = (
                unresolved_reference(schema) or _unchecked_formats(schema, checkable) or backtracking_pattern(schema)
            )
        if problem is not None:  # each schema that fails is a failure of its own
            failures.append(CatalogueError(FailureCode.SCHEMA_INVALID, problem, path=path))
    if failures:
        raise collected(failures)


def _unchecked_formats(schema: Any, checkable: set[str]) -> str | None:
    unchecked = sorted(schema_formats(schema) - checkable)
    if not unchecked:
        return None
    return (
        f"uses format(s) {', '.join(unchecked)} that this server cannot check; a format must never "
        f"pass unchecked (checked: {', '.join(sorted(checkable))})"
    )


def _schema_problem(exc: Exception) -> str:
    """The metaschema's complaint and where in the schema it is (an RFC 6901 JSON pointer).

    An author with a 300-line schema needs the spot, not only the rule: the
    pointer is the path inside the schema document, ``""`` being its root.
    """
    from jsonpointer import JsonPointer

    from rimthan_workflow_registry.jsonschema_formats import SchemaError

    if not isinstance(exc, SchemaError):
        return str(exc)
    pointer = JsonPointer.from_parts([str(part) for part in exc.absolute_path]).path
    where = f"at JSON pointer {pointer!r} inside the schema" if pointer else "at the schema root (JSON pointer '')"
    return f"{where}: {exc.message}"


def schema_formats(schema: Any) -> set[str]:
    """Every ``format`` keyword value in a schema document (walked iteratively).

    A string under a ``format`` key is taken as the keyword wherever it sits,
    so a data value that merely looks like one (inside ``default``, say) is
    refused too: fail closed rather than let a format pass unchecked.
    """
    found: set[str] = set()
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("format"), str):
                found.add(node["format"])
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found


def check_aliases(workflows: Iterable[WorkflowDefinition]) -> None:
    """Ids and entry aliases name exactly one workflow within an owner (each collision a failure of its own).

    Versions of one workflow share their names; a name that points at two
    different workflow ids of the same owner is a collision, as is one
    workflow id claimed by two owners or the same id@version twice.
    """
    owners: dict[str, str] = {}
    seen_keys: set[str] = set()
    names: dict[tuple[str, str], str] = {}
    failures: list[RegistryError] = []
    for workflow in workflows:
        if workflow.key in seen_keys:
            failures.append(_collision(workflow, f"workflow {workflow.key} is defined twice"))
        seen_keys.add(workflow.key)
        if owners.setdefault(workflow.id, workflow.owner) != workflow.owner:
            message = f"workflow {workflow.id} is claimed by owners {owners[workflow.id]} and {workflow.owner}"
            failures.append(_collision(workflow, message))
        for name in workflow.names:
            holder = names.setdefault((workflow.owner, name), workflow.id)
            if holder != workflow.id:
                message = f"name {name!r} of workflow {workflow.id} already names workflow {holder} "
                failures.append(_collision(workflow, message + f"for owner {workflow.owner}"))
    if failures:
        raise collected(failures)


def _collision(workflow: WorkflowDefinition, message: str) -> CatalogueError:
    return CatalogueError(FailureCode.ALIAS_COLLISION, message, path=workflow.source)


def check_first_step(workflow: WorkflowDefinition) -> None:
    """Every run starts by setting up the workspace and attesting it.

    Setup delivers every subagent a validator runs as (the host adapter is
    always part of the delivery), so no later gate depends on an asset the
    workspace manifest never attested. A first step that is not setup is the
    one failure said (what setup declares is then about no setup step); else
    its outputs and its delivery are each said.
    """
    if not workflow.steps or workflow.steps[0].id != SETUP_STEP_ID:
        raise _not_setup(workflow, f"the first step must be {SETUP_STEP_ID!r}")
    setup = workflow.steps[0]
    failures: list[RegistryError] = []
    if [o.id for o in setup.outputs] != [WORKSPACE_MANIFEST_ARTIFACT] or setup.outputs[0].schema is None:
        outputs = f"setup-workspace must declare exactly one JSON output {WORKSPACE_MANIFEST_ARTIFACT!r}"
        failures.append(_not_setup(workflow, outputs))
    undelivered = sorted({v.subagent for v in workflow.validators} - set(setup.host_assets))
    if undelivered:
        unknown = sorted(set(setup.host_assets) - {a.id for a in workflow.assets})
        named = f" (it names {', '.join(map(repr, unknown))}, which no asset is: a misspelling?)" if unknown else ""
        failures.append(
            _not_setup(
                workflow,
                "setup-workspace must deliver every subagent a validator runs as; "
                f"add {', '.join(undelivered)} to its host_assets{named}",
                next_step=f"in {workflow.source}, list {', '.join(map(repr, undelivered))} in the host_assets of step "
                f"{SETUP_STEP_ID}",
            )
        )
    if failures:
        raise collected(failures)


def _not_setup(workflow: WorkflowDefinition, problem: str, next_step: str | None = None) -> CatalogueError:
    message = f"workflow {workflow.key}: {problem}"
    return CatalogueError(FailureCode.FIRST_STEP_NOT_SETUP, message, path=workflow.source, next_step=next_step)


def check_branches(workflow: WorkflowDefinition, state_schema: Mapping[str, Any]) -> None:
    """Closed predicates on one declared field with pairwise-disjoint values.

    Disjointness is what makes "never matches two targets" decidable at
    authoring time: every branch of a step tests the same field, so a value
    can satisfy at most one predicate. Each problem is said, step by step; a
    step whose branches test several fields says that alone (its field, its
    values and its question are about one field).
    """
    properties = state_schema.get("properties", {}) if isinstance(state_schema, Mapping) else {}
    failures: list[RegistryError] = []
    for step in workflow.steps:
        if step.branches:
            problems = _branch_problems(step, properties)
            failures += [CatalogueError(code, message, path=workflow.source) for code, message in problems]
    if failures:
        raise collected(failures)


def _branch_problems(step: StepDefinition, properties: Mapping[str, Any]) -> Iterator[tuple[FailureCode, str]]:
    fields = {b.when.field for b in step.branches}
    if len(fields) != 1:
        message = f"step {step.id}: branches test several fields {sorted(fields)}; two could match"
        yield FailureCode.BRANCH_AMBIGUOUS, message
        return
    (field_name,) = fields
    if field_name not in properties:
        yield (
            FailureCode.BRANCH_PREDICATE_INVALID,
            f"step {step.id}: branch field {field_name!r} is not in the confirmed-state schema",
        )
    seen: dict[Any, str] = {}
    for branch in step.branches:
        for value in branch.when.values:
            marker = (type(value).__name__, value)
            if marker in seen:
                message = f"step {step.id}: value {value!r} matches both {seen[marker]} and {branch.target}"
                yield FailureCode.BRANCH_AMBIGUOUS, message
            seen.setdefault(marker, branch.target)
    if step.question is None or step.question.field != field_name:
        yield (
            FailureCode.BRANCH_PREDICATE_INVALID,
            f"step {step.id}: branching on {field_name!r} needs a question about that field",
        )


def check_reachability(workflow: WorkflowDefinition) -> None:
    """Every step is reachable from the start and can reach a terminal step (each walk that leaves a step out is
    said)."""
    forward: dict[str, tuple[str, ...]] = {s.id: s.targets for s in workflow.steps}
    backward: dict[str, list[str]] = defaultdict(list)
    for source, targets in forward.items():
        for target in targets:
            backward[target].append(source)
    ends = [s.id for s in workflow.steps if s.terminal]
    walks = (
        ([workflow.steps[0].id], forward, "step(s) {} can never be reached"),
        (ends, backward, "no terminal step is reachable from {}"),
    )
    failures: list[RegistryError] = []
    for starts, graph, message in walks:
        reached = reached_from(starts, graph)
        left = [s.id for s in workflow.steps if s.id not in reached]
        if left:
            failures.append(
                CatalogueError(
                    FailureCode.TERMINAL_UNREACHABLE,
                    f"workflow {workflow.key}: " + message.format(", ".join(left)),
                    path=workflow.source,
                )
            )
    if failures:
        raise collected(failures)


def check_step_shapes(workflow: WorkflowDefinition) -> None:
    """Only gated steps may carry size caps, within what one call carries; validators need outputs to judge (each
    problem of each step said, in step order)."""
    failures = [
        CatalogueError(FailureCode.CATALOGUE_INVALID, message, path=workflow.source)
        for step in workflow.steps
        for message in _shape_problems(step)
    ]
    if failures:
        raise collected(failures)


def _shape_problems(step: StepDefinition) -> Iterator[str]:
    if step.validators and not step.outputs:
        yield f"step {step.id} has validators but no outputs to validate"
    if step.max_total_bytes is not None and not step.outputs:
        yield f"step {step.id} caps total bytes but declares no outputs"
    for problem in (*declared_count_problems(step), *declared_size_problems(step)):
        yield f"step {step.id}: {problem}"
