"""The scripted harness: a :class:`~rimthan_host.session.HostSession` driven by a :class:`Scenario`.

What a model does around the four tools - answer questions, author each
gated step's files, review them as each validator instructs - a scenario
does by script; everything else (confirmations, asset delivery, attestation,
reports, the run log) is the host session's, shared with the MCP bridge.
The demo, the end-to-end and engine tests and the load/benchmark tools all
drive runs through it.
"""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from rimthan_workflow_registry.errors import RegistryError
from rimthan_workflow_registry.release import CATALOGUE_MANIFEST_NAME
from rimthan_workflow_registry.run import (
    ANSWERS_EXAMPLE,
    CONFIRMED_STATE_EXAMPLE,
    example_name,
    has_own_examples,
    recorded_answers,
    reserved_example,
    workflow_named,
)

from .confirmations import ConfirmedStateBook
from .example_files import example_paths, holds, read_example, read_example_text
from .migration_values import learn_offer
from .outputs import changed_files
from .project_files import ProjectFiles, WrittenFile
from .protocol import (
    CONTINUE,
    PREPARE,
    SETUP_STEP,
    START,
    SUBMIT,
    HarnessError,
    HostProfile,
    ToolCaller,
    ToolRefused,
    client_caller,
    failure_lines,
)
from .reports import validator_payload
from .result_parts import Finding, Question, Step, Validator
from .results import RunResult, ValidationRound
from .runlog import RunLog
from .scenario import (
    AuthorContext,
    Review,
    ReviewContext,
    ReviewFinding,
    Scenario,
    ScenarioBeforeWorkflow,
    ScenarioCalls,
)
from .session import EventSink, HarnessEvent, HostSession, RunRecord

__all__ = [
    "CONTINUE",
    "PREPARE",
    "SETUP_STEP",
    "START",
    "SUBMIT",
    "AuthorContext",
    "CatalogueExamples",
    "ConfirmedStateBook",
    "HarnessError",
    "HarnessEvent",
    "HostProfile",
    "Review",
    "ReviewContext",
    "ReviewFinding",
    "RunRecord",
    "RunResult",
    "Scenario",
    "ScenarioBeforeWorkflow",
    "ToolCaller",
    "ToolRefused",
    "ValidationRound",
    "WorkflowHarness",
    "WrittenFile",
    "client_caller",
]


RESEARCH_ROUTE = "research_route"
ROUTE_DEPRECATED = (
    "CatalogueExamples(route=...) is deprecated: give the answer by its question's field, "
    'answers={"research_route": ...} (route answers only that one question)'
)


class CatalogueExamples:
    """A :class:`Scenario` built from the example files a catalogue ships under ``examples/``.

    ``examples`` maps each workflow version to its catalogue's examples
    folder. A workflow's examples are those of ``<folder>/<workflow-id>/``
    when that holds a file, else of the folder itself (the packager's rule,
    ``has_own_examples``): ``confirmed-state.json`` holds the values the
    example decision owner confirms; ``answers.json`` the answer the owner gives
    to each question, unless the caller's ``answers`` give it, by question field
    (``route``, deprecated, is ``answers={"research_route": route}``);
    ``<artifact-id>.json|md`` the artifact text. A
    migration's target state is the target version's ``confirmed-state.json``
    and every value of the run it does not set (the answers given). The
    scripted validators re-hash every artifact on disk (a changed file fails
    them) and the ones named in ``fail_once`` (id or ``id@version``) fail
    once, to exercise the repair loop. Every file is read through real folders
    (:mod:`~rimthan_host.example_files`): a symbolic link is refused, never followed.
    """

    def __init__(
        self,
        examples: Mapping[str, Path],
        route: str | None = None,
        fail_once: Collection[str] = (),
        *,
        answers: Mapping[str, Any] | None = None,
    ) -> None:
        self.examples = {version: Path(path) for version, path in examples.items()}
        self.answers = dict(answers or {})  # the caller's answers, by question field: before the examples' own
        if route is not None:
            warnings.warn(ROUTE_DEPRECATED, DeprecationWarning, stacklevel=2)
            self.answers.setdefault(RESEARCH_ROUTE, route)
        self.fail_once = set(fail_once)
        self._folders: dict[tuple[str, str], Path] = {}

    def _dir(self, version: str, workflow: str) -> Path:
        """The folder of ``workflow``'s examples at ``version``: its own, when it holds a file, else the shared one."""
        if version not in self.examples:
            raise HarnessError(
                f"no examples for workflow {workflow} at version {version!r}: the scenario maps workflow versions "
                f"(the version in workflows/{workflow}.toml, which a release's own version need not equal) to "
                f"examples folders, and it names {', '.join(map(repr, sorted(self.examples))) or 'none'}"
            )
        if (version, workflow) not in self._folders:
            root = self.examples[version]
            named = _workflow_id(root, workflow)
            own = bool(named) and has_own_examples(named, example_paths(root))
            self._folders[version, workflow] = root / named if own else root
        return self._folders[version, workflow]

    def initial_state(self, workflow_version: str, *, workflow: str = "") -> dict[str, Any]:
        value = json.loads(read_example_text(self._dir(workflow_version, workflow), CONFIRMED_STATE_EXAMPLE))
        return dict(value.get("state", value)) if "state" in value and "confirmations" in value else dict(value)

    def updates(self, step_id: str, workflow_version: str, values: Mapping[str, Any]) -> dict[str, Any]:
        return {}

    def answer(self, question: Question, workflow_version: str, *, workflow: str = "") -> Any:
        """The caller's answer (``answers``), else the worked example's."""
        field = question.field
        if field in self.answers:
            return self.answers[field]
        folder = self._dir(workflow_version, workflow)
        recorded = self._answers(folder)
        if field not in recorded:
            raise HarnessError(
                f"no scripted answer for {field!r}: the worked examples in {folder} record none "
                f"(add it to {ANSWERS_EXAMPLE} there, or give it in the scenario's answers)"
            )
        return recorded[field]

    def _answers(self, folder: Path) -> dict[str, Any]:
        """The answers a worked example records (``answers.json``; none without one)."""
        if not holds(folder, ANSWERS_EXAMPLE):
            return {}
        try:
            return recorded_answers(json.loads(read_example_text(folder, ANSWERS_EXAMPLE)))
        except ValueError as exc:
            raise HarnessError(f"{folder / ANSWERS_EXAMPLE} holds no answers: {exc}") from None

    def migration_state(self, values: Mapping[str, Any], target_version: str, *, workflow: str = "") -> dict[str, Any]:
        """The target version's worked-example facts (``confirmed-state.json``: new fields included), and every value
        of the run they do not set: the answers given on the way (``research_route``, ``audience``...), kept."""
        state = self.initial_state(target_version, workflow=workflow)
        return {**state, **{field: value for field, value in values.items() if field not in state}}

    def author(self, ctx: AuthorContext) -> str:
        """The output's worked example, ``<artifact-id>.json|md``; refused for one named as the example's own files."""
        output, media_type = ctx.output.id, ctx.output.media_type
        folder = self._dir(ctx.workflow_version, ctx.workflow)
        taken = reserved_example(output, media_type)
        if taken is not None:
            raise HarnessError(
                f"output {output!r} has no worked example in {folder}: its example name is {taken}, the worked "
                f"example's own {taken} (a release built before the build refused that); author it in a scenario of "
                "your own, or rename the output in the catalogue"
            )
        return read_example_text(folder, example_name(output, media_type))

    def review(self, ctx: ReviewContext) -> Review:
        """Fail each file whose bytes on disk are not the ones submitted, read as the bridge reads them
        (:func:`~rimthan_host.outputs.changed_files`: symlink-free, a link put there is changed, never followed)."""
        artifacts = list(ctx.artifacts.values())
        unlike = set(changed_files(ProjectFiles(ctx.project_dir), artifacts))
        changed = [
            ReviewFinding(f"{a.path} on disk no longer has the SHA-256 that was submitted", artifact_id=a.artifact_id)
            for a in artifacts
            if a.path in unlike
        ]
        if changed:
            return Review("fail", tuple(changed))
        key = f"{ctx.validator_id}@{ctx.validator_version}"
        drill = {ctx.validator_id, key} & self.fail_once
        if drill:
            self.fail_once -= drill
            target = sorted(ctx.artifacts)[-1]
            drilled = ReviewFinding(f"scripted repair drill: {key} asks for one repair of {target}", artifact_id=target)
            return Review("fail", (drilled,))
        return Review("pass")


def _workflow_id(examples: Path, workflow: str) -> str:
    """The id of the workflow ``workflow`` (an id or an alias) names in the catalogue whose ``examples`` folder this
    is (its parent, the catalogue source or a release's ``catalogue/``); ``workflow`` itself beside no
    ``catalogue.toml``."""
    catalogue = examples.parent
    if not workflow or not holds(catalogue, CATALOGUE_MANIFEST_NAME):
        return workflow
    try:
        return workflow_named(workflow, lambda path: read_example(catalogue, path))
    except (HarnessError, RegistryError) as exc:
        raise HarnessError(f"cannot tell which workflow {workflow!r} names in {catalogue}: {exc}") from None


class WorkflowHarness:
    """Drives one run through the four tools in one project directory, by script."""

    def __init__(
        self,
        call: ToolCaller,
        scenario: Scenario | ScenarioBeforeWorkflow,
        *,
        project_dir: Path,
        host: HostProfile | None = None,
        on_event: EventSink | None = None,
        clock: Callable[[], float] = time.time,
        max_repairs: int = 3,
        run_log: RunLog | None = None,
    ) -> None:
        self.session = HostSession(
            call, project_dir=project_dir, host=host, clock=clock, run_log=run_log, on_event=on_event
        )
        self.scenario = scenario
        self._calls = ScenarioCalls(scenario)
        self.max_repairs = max_repairs
        self._emit: EventSink = on_event or (lambda event: None)

    @property
    def record(self) -> RunRecord:
        return self.session.record

    def close(self) -> None:
        """Let go of the run's lock (:meth:`HostSession.close`): another session may resume the run."""
        self.session.close()

    def __enter__(self) -> WorkflowHarness:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def state(self) -> ConfirmedStateBook:
        return self.session.state

    @property
    def host(self) -> HostProfile:
        return self.session.host

    @property
    def project_dir(self) -> Path:
        return self.session.project_dir

    async def start(
        self, workflow: str, workflow_version: str | None = None, *, initial_version: str | None = None
    ) -> RunResult:
        """Confirm the scenario's initial state and start ``workflow`` (its id or an alias).

        ``workflow_version``: start that version. Without it the verifier
        starts the newest version it holds (the protocol's rule, as the bridge's
        ``start_run``). The scenario is asked for the facts of ``workflow`` as
        given (:class:`CatalogueExamples` resolves an alias from its catalogue's
        workflow files) at ``initial_version`` or ``workflow_version``; with
        neither, at the version the verifier starts, which a start with no facts
        asks first (:meth:`HostSession.newest_version`: ``blocked``, or
        ``active`` for a workflow that requires no facts; its checkpoint is
        never used or logged), and the start then names that version: a release
        installed between the two calls never starts a run on facts read for
        another. With a version, the start is the only call.
        """
        version, named = await self._start_versions(workflow, workflow_version, initial_version)
        values = self._calls.initial_state(version, workflow=workflow)
        return _expect(await self.session.start(workflow, values, workflow_version=named), {"active"})

    async def _start_versions(
        self, workflow: str, workflow_version: str | None, initial_version: str | None
    ) -> tuple[str, str | None]:
        """The version whose facts :meth:`start` reads, and the version its start names (None: the verifier's pick).
        With neither given, both are the version the verifier starts (:meth:`HostSession.newest_version`)."""
        if initial_version:
            return initial_version, workflow_version
        if workflow_version:
            return workflow_version, workflow_version
        newest = await self.session.newest_version(workflow)
        return newest, newest

    async def run(self, result: RunResult, *, until_step: str | None = None, max_calls: int = 200) -> RunResult:
        """Follow results until ``completed`` (or until ``until_step`` is the current step)."""
        for _ in range(max_calls):
            if result.status == "completed":
                return result
            if until_step is not None and result.step_id == until_step:
                return result
            if result.status == "input_required":
                result = await self._answer(result)
            elif result.status in ("active", "advanced", "validation_failed") and result.step:
                step = result.step
                result = await (self._gated(result, step) if step.gated else self._ungated(result))
            else:
                raise HarnessError(f"cannot go on from status {result.status!r}: {_lines(result)}")
        raise HarnessError(f"the run did not complete within {max_calls} tool calls")

    async def _ungated(self, result: RunResult) -> RunResult:
        updates = self.scenario.updates(str(result.step_id), result.workflow_version, self.state.values)
        return _expect(await self.session.advance(updates), {"active", "input_required", "completed"})

    async def _answer(self, result: RunResult) -> RunResult:
        question = result.question
        if question is None:
            raise HarnessError(f"the verifier asks no question: {_lines(result)}")
        value = self._calls.answer(question, result.workflow_version, workflow=result.workflow)
        self._emit(
            HarnessEvent(
                "answer",
                f"asked: {question.prompt}\n    user confirmed {question.field} = {value!r}",
                {"question": question.wire},
            )
        )
        answered = await self.session.advance({question.field: value})
        return _expect(answered, {"active", "input_required", "completed"})

    async def _gated(self, result: RunResult, step: Step) -> RunResult:
        """Write, attest, prepare, review, submit - repairing until the step advances."""
        findings: tuple[Finding, ...] = ()
        for attempt in range(self.max_repairs + 1):
            if attempt:
                self._emit(HarnessEvent("repair", f"repairing {step.id} after {len(findings)} finding(s)"))
            artifacts = self._produce(step, result, attempt, findings)
            prepared = await self.session.prepare(artifacts)
            if prepared.status == "deterministic_validation_failed":
                raise HarnessError(f"step {step.id}: deterministic validation failed: {_lines(prepared)}")
            _expect(prepared, {"ready_for_semantic_validation"})
            for validator in prepared.validators:
                self._review(step, validator, result.workflow_version, artifacts)
            submitted = await self.session.submit()
            if submitted.status != "validation_failed":
                return _expect(submitted, {"advanced", "input_required", "completed"})
            findings = submitted.findings
        raise HarnessError(f"step {step.id} still fails validation after {self.max_repairs} repairs")

    async def migrate(self, result: RunResult, target_release: str, target_version: str, *, confirm: bool) -> RunResult:
        """Ask for a migration preview (``confirm=False``) or perform it (``confirm=True``).

        The target state comes from the scenario and every field is confirmed
        afresh: the user re-confirms the whole state for the target release.
        Only the fields the target's state has are sent (:meth:`HostSession.migrate`), as the verifier's offer of
        ``target_release`` names them, asked for first if none is known
        (:func:`~rimthan_host.migration_values.learn_offer`): a run value of a field the target dropped stays behind.
        """
        values = self._calls.migration_state(self.state.values, target_version, workflow=result.workflow)
        await learn_offer(self.session, target_release)
        return await self.session.migrate(target_release, values, confirm=confirm)

    def _produce(self, step: Step, result: RunResult, attempt: int, findings: tuple[Finding, ...]) -> list[WrittenFile]:
        if step.id == SETUP_STEP:
            return [self.session.set_up_workspace()]
        out = []
        for output in step.outputs:
            values, written = dict(self.state.values), dict(self.record.written)
            ctx = AuthorContext(
                result.workflow_version, step.id, output, values, attempt, findings, written, result.workflow
            )
            out.append(self.session.write_output(output, self.scenario.author(ctx)))
        return out

    def _review(self, step: Step, validator: Validator, version: str, artifacts: Sequence[WrittenFile]) -> None:
        """Run one validator (scripted) exactly as the bundle binds it, and record its verdict."""
        payload = validator_payload(step.wire, validator.wire)
        review = self.scenario.review(
            ReviewContext(
                version,
                step.id,
                validator.validator_id,
                validator.version,
                payload["instruction"]["text"],
                {a.artifact_id: a for a in artifacts},
                dict(self.state.values),
                self.project_dir,
            )
        )
        findings = [f.wire for f in review.findings]
        self.session.verdict(validator.key, review.outcome, findings)
        self._emit(
            HarnessEvent(
                "review",
                f"validator {validator.key} (subagent {validator.subagent}): {review.outcome}"
                + "".join(f"\n    - {f.message}" for f in review.findings),
                {"findings": findings},
            )
        )


_Result = TypeVar("_Result", RunResult, ValidationRound)


def _expect(result: _Result, statuses: set[str]) -> _Result:
    if result.status not in statuses:
        raise HarnessError(f"expected {sorted(statuses)}, got {result.status}: {_lines(result)}")
    return result


def _lines(result: RunResult | ValidationRound) -> str:
    return failure_lines(result.failures, result.message)
