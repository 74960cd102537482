"""What the bridge tells the model about where its run is: the replies every move ends with.

A :class:`Reply` is a tool result in words, with the same facts as data.
:class:`StepReplies` describes a run's position after a move - the step's
instructions and files (with the copies of their JSON Schemas it keeps per
release), the question, the validators still waiting, a completed run - and
the one call to make next when a move does not fit where the run is. The
words themselves are :mod:`rimthan_host.words`; the moves are
:mod:`rimthan_host.bridge`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rimthan_workflow_registry.errors import FailureCode, quoted

from .audit_command import PROGRAM, audit_command
from .delivered import STORE_DIR, PutBack
from .outputs import refusal_words, unwritten
from .protocol import ResourceReader
from .result_parts import wires
from .results import RunResult, ValidationRound
from .schemas import OutputSchema, output_schema
from .session import HostSession
from .words import (
    confirmed_facts_words,
    findings_words,
    next_call,
    offer_summary,
    offer_words,
    question_words,
    scrub,
    step_words,
    validator_words,
)
from .write_targets import step_files_refusal


@dataclass(frozen=True)
class Reply:
    """A tool result for the model: words, the same facts as data, and whether the move failed."""

    text: str
    data: dict[str, Any] = field(default_factory=dict)
    is_error: bool = False


def reply(lines: list[str], data: dict[str, Any], error: bool) -> Reply:
    """The reply of ``lines`` (scrubbed of anything a model must not handle) and ``data``."""
    return Reply(scrub("\n".join(lines).strip()), data, error)


def failure_codes(failures: Sequence[Mapping[str, Any]]) -> list[str]:
    """The codes of a result's failures, for the reply's data."""
    return [str(f.get("code")) for f in failures]


def missing_fields(failures: Sequence[Mapping[str, Any]]) -> list[str]:
    """The fields a ``blocked`` result's failures say are missing (``confirmed_field_missing``), by name."""
    return [
        str(f["details"]["field"])
        for f in failures
        if f.get("code") == FailureCode.CONFIRMED_FIELD_MISSING.value
        and isinstance(f.get("details"), Mapping)
        and "field" in f["details"]
    ]


def run_id_of(session: HostSession) -> str:
    assert session.run_log is not None
    return session.run_log.run_id


def where(session: HostSession) -> str:
    """One line: the run, its workflow and version, and its step."""
    position = session.position
    step = position.step_wire
    return f"Run {run_id_of(session)} ({position.workflow_version}): step {step.get('id')} - {step.get('title')}."


MOVE_REFUSED = "move_refused"  # the status of a move that does not fit where the run is (:func:`misplaced`)


def misplaced(session: HostSession, what: str) -> Reply:
    """A move that does not fit where the run is: what was wrong and the one call to make next.

    Its status is the refusal's (:data:`MOVE_REFUSED`), never the last move's (``advanced`` beside an error)."""
    pending = session.prepared.pending if session.prepared is not None else []
    position = session.position
    missing = (
        unwritten(session.files, position.step_wire.get("outputs") or []) if position.step_wire.get("gated") else []
    )
    lines = [what, next_call(position, pending, missing), "(show_step repeats the step's instructions.)"]
    data = {"run": run_id_of(session), "status": MOVE_REFUSED, "step": {"id": position.step_id}}
    return Reply(scrub(" ".join(lines)), data, True)


def not_a_choice(session: HostSession, answer: str, shown: Sequence[str]) -> Reply:
    """An answer that is none of the waiting question's choices (``shown``, as the words show them): nothing sent;
    the code, and the choices to pick from."""
    position = session.position
    field = position.question.wire.get("field") if position.question else None
    code = FailureCode.BRANCH_NO_MATCH.value
    lines = [
        f"{code}: nothing was recorded: '{quoted(answer)}' is not one of the choices of {field}, and nothing was sent "
        f"to the verifier; the run waits at step {position.step_id}.",
        f"next: ask the user to choose one of {', '.join(shown)}, then call answer_question with field {field} and "
        "their choice exactly as written here.",
    ]
    data = {"run": run_id_of(session), "status": "input_required", "code": code, "choices": list(shown)}
    return reply(lines, {**data, "step": {"id": position.step_id}}, True)


def fix_files(step: object) -> str:
    """The ``next:`` line of a step whose files were refused or missing: the call to make once they are fixed."""
    return f"next: fix each file as said above, then call step_done again; the run waits at step {step}."


def files_refused(
    session: HostSession, refused: ValidationRound, lines: list[str], todo: str, schemas: Mapping[str, str]
) -> Reply:
    """A round the verifier refused (``deterministic_validation_failed``): its refusals grouped by file (with the
    copy of each file's JSON Schema in ``schemas``, by path), then ``todo``, the ``next:`` line naming the call to
    make; the refusals' codes and the step as data."""
    step = session.position.step_wire
    said = refusal_words(wires(refused.failures), step.get("outputs") or [], schemas)
    lines = [*lines, "The verifier refused the files:", *said, todo]
    data = {"run": run_id_of(session), "status": refused.status, "failures": failure_codes(wires(refused.failures))}
    return reply(lines, {**data, "step": {"id": step.get("id")}}, True)


def step_files_refused(session: HostSession, step: Mapping[str, Any], lines: list[str]) -> Reply | None:
    """The step's files named where the bridge neither reads nor writes (:func:`step_files_refusal`), after
    ``lines``: the model is not told to write them and nothing is read; None if every path is the bridge's to use."""
    refused = step_files_refusal(session.host, step)
    if refused is None:
        return None
    run = run_id_of(session)
    then = f"next: tell the user what was refused; run {run} waits at this step, and once that is fixed, call "
    then += f"resume_run {run}."
    code = FailureCode.REPOSITORY_POLICY_CONFLICT.value
    data = {"run": run, "status": "files_refused", "step": {"id": step.get("id")}, "failures": [code]}
    return reply([*lines, refused, then], data, True)


def validators_waiting(session: HostSession, lines: list[str], *, error: bool = False) -> Reply:
    """The validators still waiting: in full, or after a mistake by name (show_step repeats the rest)."""
    assert session.prepared is not None
    pending = session.prepared.pending
    files = [(a.artifact_id, a.path) for a in session.prepared.artifacts]
    named = [{"name": s["validator_id"], "subagent": s["subagent"]} for s in pending]
    if error:
        waiting = ", ".join(f"{v['name']} (subagent {v['subagent']})" for v in named)
        lines += [f"Waiting for a verdict: {waiting}. show_step repeats their instructions."]
    else:
        lines += validator_words(session.position.step_wire, pending, files, session.state.values)
    data = {"run": run_id_of(session), "status": "validators_pending", "validators": named}
    return reply(lines, {**data, "files": [path for _, path in files]}, error)


def validators_edited(
    session: HostSession, put: Sequence[PutBack], again: Sequence[Mapping[str, Any]], written: Sequence[str] = ()
) -> Reply:
    """Nothing recorded: the subagent files of ``again`` (validators) changed (or were removed) after the bridge named
    them, and are ``put`` back as the release delivers them, or hold its bytes again though ``written`` since
    (edited, then changed back: paths); their verdicts recorded already are discarded, they run again."""
    assert session.prepared is not None
    names = ", ".join(s["validator_id"] for s in again)
    kept = [f"what was at {p.path} is kept in {STORE_DIR} (named by its SHA-256)" for p in put if p.kept]
    code = FailureCode.REPORT_STALE.value
    paths = ", ".join([*(p.path for p in put), *written])
    removed = [p for p in put if not p.kept]  # (nothing was at its path to keep)
    how = "was removed" if removed and len(removed) == len(put) and not written else "changed"
    how = "changed or was removed" if removed and how == "changed" else how
    lines = [
        f"{code}: nothing was recorded: the subagent file of {names} ({paths}) {how} after the bridge named the "
        f"validators, so its verdict {'may' if written else 'would'} come from instructions this run's release "
        f"does not give; any verdict of {names} recorded already is discarded."
    ]
    if put:
        lines[0] = f"{lines[0][:-1]}. The bridge put the release's file back{'; ' if kept else ''}{'; '.join(kept)}."
    if written:
        lines.append(
            f"{', '.join(written)} holds this run's release's text again, but was written after the validators were "
            "named: the subagent may have run while it held another text."
        )
    waiting = ", ".join(s["validator_id"] for s in session.prepared.pending)
    lines.append(
        f"next: run the subagent of {names} again on the step's files (show_step repeats its instruction), then "
        f"call record_verdict for each validator waiting: {waiting}."
    )
    data = validators_waiting(session, [], error=True).data
    return reply(lines, {**data, "refused": code}, True)


class StepReplies:
    """Replies describing a run's position, with the output schemas copied into the project once per release."""

    def __init__(
        self, read_resource: ResourceReader | None, verifier_args: Sequence[str] | None = (), program: str = PROGRAM
    ) -> None:
        self.read_resource = read_resource
        self.verifier_args = verifier_args  # how the child verifier was started (None: a verifier by URL)
        self.program = program  # its command as a shell calls it (audit_program)
        self._schemas: dict[str, OutputSchema] = {}  # copied, by schema URI (it names the release's digest)

    async def output_schemas(
        self, session: HostSession, step: Mapping[str, Any], release_id: str
    ) -> dict[str, OutputSchema]:
        """Each JSON output's schema, fetched and copied into the project once per release (tried again if not)."""
        found: dict[str, OutputSchema] = {}
        if self.read_resource is None or not step.get("gated"):
            return found
        for output in step.get("outputs") or []:
            uri = str(output.get("schema_uri") or "")
            schema = self._schemas.get(uri)
            if uri and schema is None:
                schema = await output_schema(self.read_resource, session.files, release_id, output)
                if schema is not None and schema.path is not None:
                    self._schemas[uri] = schema
            if schema is not None:
                found[output["path"]] = schema
        return found

    async def describe(
        self,
        session: HostSession,
        result: RunResult,
        lines: list[str],
        *,
        elicits: bool,
        error: bool = False,
        facts: bool = False,
    ) -> Reply:
        """Where the run is after ``result``: complete, its findings, or its step (question, offer, files);
        ``facts``: the step's words are followed by the run's confirmed facts (``resume_run``, ``show_step``: a
        model picking the run up has no memory of them, and the steps are written against them)."""
        run = run_id_of(session)
        data: dict[str, Any] = {"run": run, "status": result.status}
        if result.status == "completed":
            files = sorted(w.path for w in session.record.written.values())
            log = f".rimthan/runs/{run}.log"
            told = audit_command(log, self.verifier_args, self.program)
            lines += [f"Run {run} is complete.", f"Run log: {log} ({told})."]
            return reply(lines, {**data, "files": files}, error)
        step = result.step_wire
        data["step"] = {"id": step.get("id"), "title": step.get("title"), "gated": step.get("gated")}
        refused = step_files_refused(session, step, lines)
        if refused is not None:
            return refused
        if result.status == "validation_failed":
            files = [o["path"] for o in step.get("outputs") or []]
            lines += findings_words(wires(result.findings), str(step.get("id")))
            lines += ["The step's files:", *(f"- {path}" for path in files)]
            lines += confirmed_facts_words(session.state.values) if facts else []
            return reply(lines, {**data, "files": files}, error)
        release_id = result.release or session.release_id or "release"
        schemas = await self.output_schemas(session, step, release_id)
        question = result.question.wire if result.question and result.status == "input_required" else None
        lines += step_words(
            step, run, result.workflow_version, schemas, session.project_dir, asking=bool(question), elicits=elicits
        )
        lines += confirmed_facts_words(session.state.values) if facts else []
        if session.migration_offer is not None:
            lines += offer_words(session.migration_offer, elicits)
            data["migration"] = offer_summary(session.migration_offer)
        if question:
            lines += ["", *question_words(question, elicits=elicits)]
            data["question"] = {
                "field": question["field"],
                "prompt": question["prompt"],
                "choices": question["choices"],
            }
        data["files"] = [o["path"] for o in step.get("outputs") or []] if step.get("gated") else []
        return reply(lines, data, error)
