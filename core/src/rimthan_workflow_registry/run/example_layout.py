"""Where a catalogue's worked examples are and what each is called: the layout the build checks and a harness reads.

A workflow's examples are the files of its folder, ``examples/<workflow-id>/``,
when the source has one, else of ``examples/`` itself (the layout of a
catalogue with one workflow, which every packaged catalogue keeps):
``confirmed-state.json`` (the values a decision owner confirms) and one
``<artifact-id>.json`` or ``<artifact-id>.md`` per output of a gated step
(not ``workspace-manifest``, which the harness generates), and, for a
workflow that asks questions, ``answers.json`` (the answer the owner gives to
each question, by its field: what a scripted harness answers). A README there
is documentation, no example.

Names and paths only, no check: ``catalogue_examples`` checks the examples at
build, the host kit's harness reads them from disk by these same rules.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rimthan_workflow_registry.errors import CatalogueError, FailureCode
from rimthan_workflow_registry.release.catalogue import WORKSPACE_MANIFEST_ARTIFACT, Question, WorkflowDefinition
from rimthan_workflow_registry.release.catalogue_parse import parse_catalogue_manifest, parse_workflow
from rimthan_workflow_registry.release.format import CATALOGUE_MANIFEST_NAME
from rimthan_workflow_registry.release.paths import path_problem

EXAMPLES_DIR = "examples"
CONFIRMED_STATE_EXAMPLE = "confirmed-state.json"
README_NAMES = frozenset({"readme", "readme.md", "readme.txt"})
"""A file of the examples folder with one of these names (any case) is documentation, no example: it ships,
signed, as a README anywhere in a source does, and is neither checked nor refused as a stray example."""
ANSWERS_EXAMPLE = "answers.json"  # {question field: the answer the example's owner gives}
RESERVED_EXAMPLES = {CONFIRMED_STATE_EXAMPLE: "confirmed state", ANSWERS_EXAMPLE: "answers"}
"""The worked example's own files, and what each holds: no output's example may have one of these names (a JSON
output ``confirmed-state`` or ``answers`` would), or a file of that name could be either."""
_EXTENSIONS = {"application/json": "json", "text/markdown": "md"}


@dataclass(frozen=True, eq=False, repr=False)  # never compared, hashed or shown (test_build_dataclasses)
class WorkflowExamples:
    """The example files of one workflow: its folder and, of the names it could hold, those the source has."""

    workflow: WorkflowDefinition
    folder: str
    paths: frozenset[str]

    def files(self) -> list[str]:
        """The example files the workflow has: its confirmed state's and each gated output's, where present."""
        return [path for path in (self.path(name) for name in example_names(self.workflow)) if path is not None]

    def path(self, name: str) -> str | None:
        """``<folder>/<name>`` when the source has it, else ``None``."""
        path = f"{self.folder}/{name}"
        return path if path in self.paths else None


def examples_folder(workflow_id: str, paths: Iterable[str]) -> str:
    """``examples/<workflow_id>`` when the source holds a file there, else ``examples``."""
    inside = (p.removeprefix(f"{EXAMPLES_DIR}/") for p in paths if p.startswith(f"{EXAMPLES_DIR}/"))
    return f"{EXAMPLES_DIR}/{workflow_id}" if has_own_examples(workflow_id, inside) else EXAMPLES_DIR


def has_own_examples(workflow_id: str, example_paths: Iterable[str]) -> bool:
    """Whether a workflow's examples are those of ``<workflow_id>/``: a file of the examples folder lies in it.

    ``example_paths``: the files under the examples folder, relative to it (``<workflow_id>/findings.md``).
    The one rule of where a workflow's examples are, for the build and for a harness reading them from disk.
    """
    own = f"{workflow_id}/"
    return any(p.startswith(own) and not is_readme(p) for p in example_paths)


def workflow_named(name: str, read: Callable[[str], bytes]) -> str:
    """The id of the workflow ``name`` (its id or one of its entry aliases) names in a catalogue, whose files
    ``read`` returns by path (``catalogue.toml`` and the workflow files it lists): the workflow whose examples a
    start by that name is scripted from. ``name`` itself when no workflow has it (the verifier refuses that start).

    Parsed with the catalogue's own parsers: CatalogueError for a file that does not parse or an unsafe path.
    """
    info, _ = parse_catalogue_manifest(read(CATALOGUE_MANIFEST_NAME))
    for path in info["workflows"]:
        problem = path_problem(path)
        if problem is not None:
            raise CatalogueError(FailureCode.CATALOGUE_INVALID, f"catalogue.toml lists {path!r}: {problem}", path=path)
        workflow = parse_workflow(read(path), path)
        if name in workflow.names:
            return workflow.id
    return name


def is_readme(path: str) -> bool:
    """Whether ``path`` names a README (``README``, ``README.md``, ``README.txt``, any case): documentation."""
    return path.rpartition("/")[2].lower() in README_NAMES


def example_names(workflow: WorkflowDefinition) -> list[str]:
    """The names a workflow's examples may have: its confirmed state's, its answers' (if it asks) and each output's."""
    answers = [ANSWERS_EXAMPLE] if questions(workflow) else []
    return [CONFIRMED_STATE_EXAMPLE, *answers] + [
        example_name(o.id, o.media_type)
        for s in workflow.steps
        for o in s.outputs
        if o.id != WORKSPACE_MANIFEST_ARTIFACT
    ]


def questions(workflow: WorkflowDefinition) -> dict[str, Question]:
    """The questions a workflow asks, by the field each sets."""
    return {s.question.field: s.question for s in workflow.steps if s.question is not None}


def recorded_answers(document: Any) -> dict[str, Any]:
    """The answers an ``answers.json`` document records, by question field; ValueError unless it is an object."""
    if not isinstance(document, dict):
        raise ValueError("it is not a JSON object of answers by question field")
    return dict(document)


def answers_problem(workflow: WorkflowDefinition, answers: Mapping[str, Any]) -> str | None:
    """Why recorded answers would not answer ``workflow``'s questions (a field it never asks, a value no choice is),
    or None."""
    asked = questions(workflow)
    for field, value in answers.items():
        question = asked.get(field)
        if question is None:
            return f"{field!r} is no question of workflow {workflow.key} (its questions: {', '.join(sorted(asked))})"
        if not any(type(c) is type(value) and c == value for c in question.choices):
            return f"{value!r} is not one of the choices of {field!r} ({', '.join(map(str, question.choices))})"
    return None


def example_name(artifact_id: str, media_type: str) -> str:
    """The file name of an artifact's example: ``<artifact-id>.json`` or ``<artifact-id>.md``."""
    return f"{artifact_id}.{_EXTENSIONS.get(media_type, 'md')}"


def reserved_example(artifact_id: str, media_type: str) -> str | None:
    """The worked example's own file an artifact's example name would collide with (``RESERVED_EXAMPLES``), or None."""
    name = example_name(artifact_id, media_type)
    return name if name in RESERVED_EXAMPLES else None


def example_stem(name: str) -> str:
    """An example's file name without its extension (``findings`` for ``findings.md``)."""
    return name.rpartition(".")[0] or name
