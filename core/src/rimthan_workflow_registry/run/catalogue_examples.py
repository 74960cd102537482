"""A catalogue's worked examples (``examples/``), checked at build as a harness submitting them would be.

Where a workflow's examples are and what each is called is ``example_layout``'s.
Every example present is checked with the run's own checks - the
confirmed-state schema and its size bound, and ``prepare_step_validation``'s
artifact checks (size, each step's total, strict JSON, the output's schema) -
so an example that would be refused at prepare is refused at build, with the
code prepare would give; a file of the examples folder no workflow takes, or
an output whose example name is the worked example's own, is refused too.

Build only: no workflow references an example, the loader never reads one, so
a release signed before this check keeps loading and serving. The verdict
depends only on the examples' bytes, the schemas and the declared bounds, so
a pass is remembered in ``SCHEMA_CHECKS`` under their digest, as the schema
checks are: a rebuild of a catalogue already checked imports neither
jsonschema nor the run's checks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from rimthan_workflow_registry.canonical import sha256_hex
from rimthan_workflow_registry.errors import CatalogueError, FailureCode, RegistryError, closest_name
from rimthan_workflow_registry.json_encoders import compact_encoder
from rimthan_workflow_registry.limits import first_not_utf8, save_as_utf8_step
from rimthan_workflow_registry.release.catalogue import WORKSPACE_MANIFEST_ARTIFACT, OutputDeclaration, StepDefinition
from rimthan_workflow_registry.release.schema_checks import SCHEMA_CHECKS, validator_version
from rimthan_workflow_registry.run.example_layout import (
    ANSWERS_EXAMPLE,
    CONFIRMED_STATE_EXAMPLE,
    EXAMPLES_DIR,
    RESERVED_EXAMPLES,
    WorkflowExamples,
    answers_problem,
    example_name,
    example_names,
    example_stem,
    examples_folder,
    is_readme,
    questions,
    recorded_answers,
    reserved_example,
)

if TYPE_CHECKING:
    from rimthan_workflow_registry.failures import Failure
    from rimthan_workflow_registry.release.catalogue import Catalogue
    from rimthan_workflow_registry.release.catalogue_schema import CatalogueSchema
    from rimthan_workflow_registry.run.stray_example import StrayExample

CHECKER_SUFFIX = ":examples"  # the checks' memory: a new rule, a new suffix (old passes void)
_KEY_TEXT = compact_encoder(sort_keys=True, ensure_ascii=True)


class Schemas(Protocol):
    """A catalogue's schemas: parsed documents by path, and their validators (compiled on first use)."""

    @property
    def documents(self) -> Mapping[str, Any]: ...

    @property
    def validators(self) -> Mapping[str, CatalogueSchema]: ...


def refuse_reserved_outputs(examples: WorkflowExamples) -> None:
    """Refuse a workflow with worked examples whose output's example name is the confirmed state's or the answers'.

    ``examples/answers.json`` could not say whether it is the owner's answers or output ``answers``'s example
    (nor ``confirmed-state.json`` which): a harness would submit the one as the other.
    """
    if not examples.files():
        return
    for step in examples.workflow.steps:
        for output in step.outputs:
            taken = reserved_example(output.id, output.media_type)
            if taken is not None:
                raise _refused(
                    FailureCode.CATALOGUE_INVALID,
                    examples.workflow.source,
                    f"output {output.id!r} of step {step.id} (workflow {examples.workflow.key}) would have its "
                    f"worked example in {examples.folder}/{taken}, the file of the worked example's "
                    f"{RESERVED_EXAMPLES[taken]}: one file cannot be both",
                    f"rename output {output.id!r} in {examples.workflow.source} to an id other than "
                    f"{' or '.join(example_stem(n) for n in RESERVED_EXAMPLES)} (such as {output.id}-record), and its "
                    "example file with it",
                )


def check_examples(
    catalogue: Catalogue,
    schemas: Schemas,
    paths: frozenset[str],
    read: Callable[[str], bytes],
) -> int:
    """Refuse the first example a run would refuse (its file, the JSON pointer, the code); how many were checked."""
    refuse_stray_examples(catalogue, paths)
    checked = 0
    for workflow in catalogue.workflows:
        examples = WorkflowExamples(workflow, examples_folder(workflow.id, paths), paths)
        refuse_reserved_outputs(examples)
        found = {path: read(path) for path in examples.files()}
        checked += len(found)
        if not found:
            continue
        key = _KEY_TEXT(_memory_key(examples, schemas.documents, found)).encode()
        checker = validator_version() + CHECKER_SUFFIX
        if not SCHEMA_CHECKS.passed(key, checker):
            _check_workflow(examples, schemas.validators, found)
            SCHEMA_CHECKS.remember([key], checker)  # reached only when every example passed
    return checked


def stray_examples(catalogue: Catalogue, paths: frozenset[str]) -> tuple[StrayExample, ...]:
    """The files under ``examples/`` that are no workflow's example: a name no output has, or a folder none reads.

    A README there is documentation, never a stray (``is_readme``).
    """
    expected: dict[str, set[str]] = {}  # each folder a workflow reads, and the names it takes there
    for workflow in catalogue.workflows:
        expected.setdefault(examples_folder(workflow.id, paths), set()).update(example_names(workflow))
    strays = [
        path
        for path in sorted(paths)
        if path.startswith(f"{EXAMPLES_DIR}/") and not is_readme(path)
        if path.rpartition("/")[2] not in expected.get(path.rpartition("/")[0], ())
    ]
    every = [f"{folder}/{name}" for folder, names in expected.items() for name in names]
    return tuple(_stray(path, expected, every) for path in strays)


def _stray(path: str, expected: Mapping[str, set[str]], every: list[str]) -> StrayExample:
    """``path`` with its closest example name: in its own folder when a workflow reads it, else anywhere."""
    from rimthan_workflow_registry.run.stray_example import StrayExample  # defined only when a file is stray

    folder, _, name = path.rpartition("/")
    if folder not in expected:
        return StrayExample(path, closest_name(path, every))
    stems = {example_stem(known): known for known in sorted(expected[folder])}  # a wrong extension is a near miss too
    meant = closest_name(example_stem(name), stems)
    return StrayExample(path, f"{folder}/{stems[meant]}" if meant else None)


def refuse_stray_examples(catalogue: Catalogue, paths: frozenset[str]) -> None:
    """Refuse a file in the examples folder no workflow takes: it would ship, signed, and never be checked.

    Most often a misspelt output id (``examples/findngs.md``), the wrong extension for the output's media
    type, or a folder named after no workflow; a harness reading the examples would not find it either.
    One failure per file, each with its closest example name and its own next step (the first raised, the
    others in ``also``).
    """
    found = stray_examples(catalogue, paths)
    if found:
        raise _stray_refusal(found[0], [_stray_refusal(s) for s in found[1:]])


def _stray_refusal(stray: StrayExample, also: list[CatalogueError] | None = None) -> CatalogueError:
    close = f" (closest example name: {stray.closest})" if stray.closest else ""
    rename = f"if it was meant as {stray.closest}, rename it to that; otherwise " if stray.closest else ""
    return CatalogueError(
        FailureCode.CATALOGUE_INVALID,
        f"no workflow takes this file as a worked example{close}, so it would ship, signed, and never be checked",
        path=stray.path,
        details={"example": stray.path, "closest_example": stray.closest},
        next_step=f"{rename}delete it (an example is confirmed-state.json, answers.json or <output-id>.json|.md, "
        f"in examples/<workflow-id>/ or, for a workflow without a folder of its own, examples/)",
        also=also or (),
    )


def _memory_key(examples: WorkflowExamples, documents: Mapping[str, Any], found: Mapping[str, bytes]) -> Any:
    """Everything the verdict on a workflow's examples depends on: each file's digest, schema and bounds."""
    workflow = examples.workflow
    return {
        "state": [documents[workflow.confirmed_state_schema], _digests(found)],
        "questions": [q.to_json() for q in questions(workflow).values()],
        "requires_confirmed": [list(step.requires_confirmed) for step in workflow.steps],
        "steps": [
            [
                step.max_total_bytes,
                [
                    [o.id, o.path, o.media_type, o.max_bytes, documents[o.schema] if o.schema else None, path]
                    for o, path in _artifact_examples(examples, step)
                ],
            ]
            for step in workflow.steps
        ],
    }


def _digests(found: Mapping[str, bytes]) -> dict[str, str]:
    return {path: sha256_hex(data) for path, data in found.items()}


def _check_workflow(
    examples: WorkflowExamples, validators: Mapping[str, CatalogueSchema], found: Mapping[str, bytes]
) -> None:
    state = examples.path(CONFIRMED_STATE_EXAMPLE)
    if state is not None:
        _check_state(examples, state, found[state], validators[examples.workflow.confirmed_state_schema])
    answers = examples.path(ANSWERS_EXAMPLE)
    if answers is not None:
        _check_answers(examples, answers, found[answers])
    for step in examples.workflow.steps:
        _check_step(examples, step, validators, found)


def _check_state(examples: WorkflowExamples, path: str, data: bytes, validator: CatalogueSchema) -> None:
    """The example confirmed state: JSON, an object (or a projection's ``state``), within its bound and schema."""
    from rimthan_workflow_registry.run.artifact_checks import parse_json_artifact
    from rimthan_workflow_registry.run.confirmed_state import ConfirmedState, validate_against_schema

    schema = examples.workflow.confirmed_state_schema
    try:
        values = _state_values(parse_json_artifact(data))
        validate_against_schema(ConfirmedState.from_json({"state": values}), validator, label="the example")
    except (UnicodeDecodeError, ValueError) as exc:
        raise _not_json(path, data, exc) from None
    except RegistryError as exc:
        pointer = exc.details.get("pointer") if exc.details else None
        said = exc.message.replace(f" at {pointer}: ", f" at JSON pointer {pointer!r}: ", 1) if pointer else exc.message
        raise _refused(
            exc.code,
            path,
            f"{said} ({schema}, workflow {examples.workflow.key})",
            f"fix {path} so that it validates against {schema} (a harness confirming it would be refused "
            f"{exc.code.value}), or fix the schema if the example is right",
        ) from None
    _check_required(examples, path, values)


def _check_required(examples: WorkflowExamples, path: str, values: Mapping[str, Any]) -> None:
    """The example state holds every field a step's ``requires_confirmed`` names (but a question's, which
    ``answers.json`` answers): a harness confirming it would otherwise be ``blocked`` at that step for ever."""
    workflow = examples.workflow
    asked = questions(workflow)
    for step in workflow.steps:
        missing = [name for name in step.requires_confirmed if name not in values and name not in asked]
        if missing:
            fields = ", ".join(missing)
            raise _refused(
                FailureCode.CONFIRMED_FIELD_MISSING,
                path,
                f"lacks {fields}, which step {step.id} requires confirmed (workflow {workflow.key}): a harness "
                f"confirming it would be blocked at {step.id}",
                f"add {fields} to {path} (as {workflow.confirmed_state_schema} declares), or drop "
                f"{'them' if len(missing) > 1 else 'it'} from the step's requires_confirmed in {workflow.source}",
            )


def _check_answers(examples: WorkflowExamples, path: str, data: bytes) -> None:
    """The example answers: strict JSON, an object, each a question of the workflow answered by one of its choices."""
    from rimthan_workflow_registry.run.artifact_checks import parse_json_artifact

    try:
        problem = answers_problem(examples.workflow, recorded_answers(parse_json_artifact(data)))
    except (UnicodeDecodeError, ValueError) as exc:
        raise _not_json(path, data, exc) from None
    if problem is not None:
        raise _refused(
            FailureCode.CATALOGUE_INVALID,
            path,
            f"{problem}: a harness answering it would be refused",
            f"give {path} one answer per question of workflow {examples.workflow.key}, by its field, each one of "
            "the question's choices",
        )


def _state_values(document: Any) -> Mapping[str, Any]:
    """The values an example confirmed state holds: the object, or its ``state`` when it is a whole projection."""
    if isinstance(document, dict) and "state" in document and "confirmations" in document:
        document = document["state"]
    if not isinstance(document, dict):
        raise RegistryError(FailureCode.CONFIRMED_STATE_INVALID, "the example is not a JSON object of field values")
    return document


def _check_step(
    examples: WorkflowExamples,
    step: StepDefinition,
    validators: Mapping[str, CatalogueSchema],
    found: Mapping[str, bytes],
) -> None:
    """Refuse the step's first example prepare would refuse."""
    from rimthan_workflow_registry.run.artifact_checks import SubmittedArtifact, check_artifact_contents

    paths = {output.id: path for output, path in _artifact_examples(examples, step)}
    artifacts = [
        SubmittedArtifact(output.id, output.path, output.media_type, _text(path, found[path]), None)
        for output, path in _artifact_examples(examples, step)
    ]
    failures = check_artifact_contents(step, artifacts, validators)
    if failures:
        raise _artifact_refusal(examples, step, failures[0], paths, len(failures))


def _artifact_examples(examples: WorkflowExamples, step: StepDefinition) -> Iterator[tuple[OutputDeclaration, str]]:
    """Each output of ``step`` with an example in the workflow's folder, and that example's path."""
    for output in step.outputs:
        if output.id != WORKSPACE_MANIFEST_ARTIFACT:
            path = examples.path(example_name(output.id, output.media_type))
            if path is not None:
                yield output, path


def _text(path: str, data: bytes) -> bytes:
    """The example's bytes, refused unless UTF-8: a harness sends an artifact's content as text."""
    bad = first_not_utf8(data)
    if bad is not None:
        raise _refused(
            FailureCode.CATALOGUE_INVALID,
            path,
            f"is not UTF-8 text: {bad}; a harness sends an artifact's content as text",
            save_as_utf8_step(path, bad),
        )
    return data


def _artifact_refusal(
    examples: WorkflowExamples, step: StepDefinition, failure: Failure, found: Mapping[str, str], count: int
) -> CatalogueError:
    """The first failure as a refusal naming the example file (and the JSON pointer inside it)."""
    aid = failure.artifact_id
    path = found[aid] if aid is not None else examples.folder
    said = failure.message.removeprefix(f"artifact {aid!r}: ").removeprefix(f"artifact {aid!r} ")
    at = f" at JSON pointer {failure.pointer!r}" if failure.pointer is not None else ""
    more = f" ({count - 1} more problem(s) after it)" if count > 1 else ""
    output = step.output(aid) if aid is not None else None
    schema = output.schema if output is not None and failure.code is FailureCode.JSON_SCHEMA_FAILED else None
    against = f" against {schema}" if schema is not None else ""
    return _refused(
        failure.code,
        path,
        f"the example of step {step.id} (workflow {examples.workflow.key}) would be refused at prepare"
        f"{against}{at}: {said}{more}",
        _fix_json(path)
        if failure.code is FailureCode.JSON_PARSE_FAILED
        else f"fix {path}{at} so that a harness submitting it passes prepare{against}, or fix the workflow "
        "if the example is right",
    )


def _not_json(path: str, data: bytes, exc: ValueError) -> CatalogueError:
    """An example that is not strict JSON: where its first byte that is not UTF-8 is, if that is why."""
    bad = first_not_utf8(data)
    if bad is not None:
        return _refused(
            FailureCode.JSON_PARSE_FAILED, path, f"is not valid JSON: {bad} is not UTF-8", save_as_utf8_step(path, bad)
        )
    return _refused(FailureCode.JSON_PARSE_FAILED, path, f"is not valid JSON: {exc}", _fix_json(path))


def _fix_json(path: str) -> str:
    return f"make {path} strict JSON (UTF-8, no repeated key, no NaN or Infinity)"


def _refused(code: FailureCode, path: str, message: str, next_step: str) -> CatalogueError:
    return CatalogueError(code, message, path=path, next_step=next_step)
