"""What a scripted harness is driven by: the :class:`Scenario` protocol, what it is given, how it is called.

A scenario plays the user and the model (answers, authored files, reviews).
``initial_state`` and ``migration_state`` take the run's workflow id as the
keyword ``workflow``; :class:`ScenarioCalls` still drives a scenario written
before they did (:class:`ScenarioBeforeWorkflow`), reading each signature
once and warning once per scenario class.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from .project_files import WrittenFile
from .result_parts import Finding, Question, StepOutput


@dataclass(frozen=True)
class AuthorContext:
    """What ``author`` is given: the ``output`` to write, the run's ``values``, which ``attempt`` this is, and the
    ``findings`` of the validators that failed the attempt before it (none on the first)."""

    workflow_version: str
    step_id: str
    output: StepOutput
    values: Mapping[str, Any]
    attempt: int
    findings: tuple[Finding, ...]
    written: Mapping[str, WrittenFile]
    workflow: str = ""  # the run's workflow id


@dataclass(frozen=True)
class ReviewContext:
    workflow_version: str
    step_id: str
    validator_id: str
    validator_version: str
    instruction: str
    artifacts: Mapping[str, WrittenFile]
    values: Mapping[str, Any]
    project_dir: Path


@dataclass(frozen=True)
class ReviewFinding:
    """One finding of a scripted review: its ``message``, ``severity`` (``error`` or ``warning``) and the
    ``artifact_id`` it is about, if one; ``wire``: as a verdict sends it."""

    message: str
    severity: str = "error"
    artifact_id: str | None = None

    @property
    def wire(self) -> dict[str, Any]:
        said: dict[str, Any] = {"severity": self.severity, "message": self.message}
        return said if self.artifact_id is None else {**said, "artifact_id": self.artifact_id}


@dataclass(frozen=True)
class Review:
    """A scripted review's verdict: ``outcome`` (``pass`` or ``fail``) and its ``findings``."""

    outcome: str  # "pass" | "fail"
    findings: tuple[ReviewFinding, ...] = ()


class Scenario(Protocol):
    """The user's answers and the scripted authoring and reviews a model would otherwise do.

    ``initial_state`` and ``migration_state`` are given the run's workflow id
    as the keyword ``workflow`` (``initial_state``: the name the run is started
    by, which may be an alias; the run has no id before its start). A scenario written before they took it (no
    ``workflow`` parameter, no ``**kwargs``) still works: the harness calls
    that method without it, and warns once per scenario class
    (``DeprecationWarning``) naming the keyword to add. ``answer`` is given
    ``workflow`` too where it accepts it (optional: no warning without).
    """

    def initial_state(self, workflow_version: str, *, workflow: str = "") -> dict[str, Any]: ...

    def updates(self, step_id: str, workflow_version: str, values: Mapping[str, Any]) -> dict[str, Any]: ...

    def answer(self, question: Question, workflow_version: str) -> Any: ...

    def migration_state(
        self, values: Mapping[str, Any], target_version: str, *, workflow: str = ""
    ) -> dict[str, Any]: ...

    def author(self, ctx: AuthorContext) -> str: ...

    def review(self, ctx: ReviewContext) -> Review: ...


class ScenarioBeforeWorkflow(Protocol):
    """A :class:`Scenario` as written before ``initial_state`` and ``migration_state`` took ``workflow``
    (deprecated: still driven, with one ``DeprecationWarning``)."""

    def initial_state(self, workflow_version: str) -> dict[str, Any]: ...

    def updates(self, step_id: str, workflow_version: str, values: Mapping[str, Any]) -> dict[str, Any]: ...

    def answer(self, question: Question, workflow_version: str) -> Any: ...

    def migration_state(self, values: Mapping[str, Any], target_version: str) -> dict[str, Any]: ...

    def author(self, ctx: AuthorContext) -> str: ...

    def review(self, ctx: ReviewContext) -> Review: ...


_WITH_WORKFLOW = ("initial_state", "answer", "migration_state")
_DEPRECATED = ("initial_state", "migration_state")  # (the ones the protocol gives ``workflow``: answer may take it)
_warned: set[type] = set()  # the scenario classes already warned of their older signatures


def _takes_workflow(method: Callable[..., Any]) -> bool:
    """Whether ``method`` accepts the keyword ``workflow`` (by name, or through ``**kwargs``)."""
    try:
        parameters = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):  # (no signature to read: call it as the protocol says)
        return True
    return any(p.name == "workflow" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


class ScenarioCalls:
    """A scenario's ``workflow``-taking methods, called with the keyword where the scenario's signature has it.

    Each signature is read once, here; a scenario class whose ``initial_state``
    or ``migration_state`` has the older signature is warned of once
    (``DeprecationWarning``).
    """

    def __init__(self, scenario: Scenario | ScenarioBeforeWorkflow) -> None:
        self.scenario = scenario
        self.older = tuple(name for name in _WITH_WORKFLOW if not _takes_workflow(getattr(scenario, name)))
        deprecated = [name for name in self.older if name in _DEPRECATED]
        if deprecated and type(scenario) not in _warned:
            _warned.add(type(scenario))
            warnings.warn(
                f"{type(scenario).__name__}: {' and '.join(deprecated)} take no keyword 'workflow' (the run's workflow "
                "id, given since the Scenario protocol took it): add workflow: str = '' to each; they are called "
                "without it meanwhile",
                DeprecationWarning,
                stacklevel=3,
            )

    def _call(self, name: str, *args: Any, workflow: str) -> Any:
        method = getattr(self.scenario, name)
        return method(*args) if name in self.older else method(*args, workflow=workflow)

    def initial_state(self, workflow_version: str, *, workflow: str) -> dict[str, Any]:
        return dict(self._call("initial_state", workflow_version, workflow=workflow))

    def answer(self, question: Question, workflow_version: str, *, workflow: str) -> Any:
        return self._call("answer", question, workflow_version, workflow=workflow)

    def migration_state(self, values: Mapping[str, Any], target_version: str, *, workflow: str) -> dict[str, Any]:
        return dict(self._call("migration_state", values, target_version, workflow=workflow))
