"""The bridge's results in words: what the step is, what it needs, and what the model does next.

Only plain facts go out - step ids, titles, instructions, file paths,
questions, validator names and their instruction text. Checkpoints,
validation tokens, digests and attestations stay inside the bridge;
:func:`scrub` is the last guard on every outgoing text.
"""

from __future__ import annotations

import errno
import json
import re
import stat
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rimthan_workflow_registry.errors import map_strings, quoted
from rimthan_workflow_registry.release import DELIVERY_KINDS
from rimthan_workflow_registry.remediation import FULL_OR_READ_ONLY

from .files import ProjectPath, file_status
from .own_files import HardLinked, hard_link_words
from .protocol import MoveNotRecorded, NotAProtocolResult
from .result_parts import NeededFact, wires
from .results import RunResult, WalkedStep
from .runlog import RunSummary
from .schemas import OutputSchema

# A server token: a base64url JSON header ("eyJ" is '{"'), then the claims' compact JSON as it is (it holds no
# period), then the base64url signature. The header alone is enough to tell one.
TOKEN_PATTERN = r"eyJ[A-Za-z0-9_-]{10,}\.(?:[^.\s]*\.[A-Za-z0-9_-]+)?"
_OPAQUE = re.compile(rf"(sha256:)?[0-9a-fA-F]{{64}}|{TOKEN_PATTERN}")
_KINDS = {"application/json": "JSON", "text/markdown": "Markdown"}
KEPT_FOR_AUDIT = "a damaged run's log is kept as it is, for rimthan-mcp audit"


# The field of a result's structured content that holds the reply's words (its text content), first: a host that
# hands its model only the structured content (Claude Code on a 2026-07-28 connection) hands it the words too.
TEXT_FIELD = "text"


def scrub(text: str) -> str:
    """Replace anything that looks like a digest or a token (never meant for the model)."""
    return _OPAQUE.sub("[omitted]", text)


def scrub_value(value: Any) -> Any:
    """``value`` (a reply's structured data) with :func:`scrub` applied to every string in it, keys too: the
    data repeats what the verifier said (a step's title, a question's prompt), which the words scrub."""
    return map_strings(value, scrub)


def structured(text: str, data: Mapping[str, Any]) -> dict[str, Any]:
    """A reply's structured content: its words under :data:`TEXT_FIELD` first, then its data, all scrubbed."""
    return {TEXT_FIELD: scrub(text), **scrub_value(dict(data))}


# How a fact the model passes is confirmed when the client of the call can ask the user (elicitation): the bridge
# asks, so the model neither reads values back for a yes nor says it confirmed them.
ASKED_IN_CLIENT = "the bridge asks the user to confirm each in their own client"


def bridge_note(elicits: bool) -> str:
    """The note under a step's instructions: the bridge's tools stand for the verifier calls the text names, and
    (``elicits``: the client of the call can ask the user) who confirms the facts the model passes."""
    facts = (
        f"each field the user gave here ({ASKED_IN_CLIENT}: that is the read-back and the yes the text asks for)"
        if elicits
        else "each field the user confirmed here"
    )
    return (
        "(The bridge makes the rimthan.* verifier calls and keeps the checkpoint and digests: where the text says to "
        f"call one, call step_done instead - with facts, {facts} - or answer_question for a question, record_verdict "
        "for a validator. Where it says to hash files, attest them or compare or keep digests, do not: the bridge "
        "does, and step_done refuses a file validated earlier in the run that changed since.)"
    )


BRIDGE_NOTE = bridge_note(False)  # (the note a client that cannot ask the user gets)

# A step's text that says to stop the run (research-decision 1.2.0 and 1.3.0's confirm-contract, as released): no
# tool of the bridge or the verifier stops one, so the note under it says what stopping is.
_SAYS_STOP = re.compile(r"\bstop\s+the\s+run\b", re.IGNORECASE)
STOP_NOTE = (
    "(No tool stops a run: where the text says to stop the run, make no further call for it and tell the user so. "
    "The run stays unfinished at this step: if they change their mind, call step_done to go on (resume_run after "
    "a restart); start_run with new_run true starts another run.)"
)


def stop_note(instruction: str) -> list[str]:
    """:data:`STOP_NOTE` (after a blank line) when ``instruction`` says to stop the run, else nothing."""
    return ["", STOP_NOTE] if _SAYS_STOP.search(instruction) else []


def then_asked(elicits: bool) -> str:
    """What follows a call that passes facts: with elicitation, who confirms them; else nothing."""
    return f": {ASKED_IN_CLIENT}" if elicits else ""


def step_words(
    step: Mapping[str, Any],
    run_id: str,
    version: str,
    schemas: Mapping[str, OutputSchema] | None = None,
    project: Path | None = None,
    *,
    asking: bool = False,
    elicits: bool = False,
) -> list[str]:
    """The current step: title, its instruction, and what it needs (with each JSON output's schema). ``asking``:
    the step waits for the user's answer to its question, which the caller says next (the one call to make);
    ``elicits``: the client of the call can ask the user, so the bridge confirms the facts (:func:`bridge_note`)."""
    instruction = str((step.get("instruction") or {}).get("text") or "").strip()
    lines = [
        f"Run {run_id} ({version}): step {step['id']} - {step.get('title') or step['id']}.",
        "",
        "Instructions for this step:",
        instruction,
        "",
        bridge_note(elicits),
        *stop_note(instruction),
        "",
    ]
    outputs = step.get("outputs") or []
    if step.get("gated") and outputs:
        where = f"in the project directory {project} (each path is relative to it)" if project else "in the project"
        lines.append(f"Write these files {where} with your own tools:")
        for o in outputs:
            lines.append(f"- {o['path']} ({_KINDS.get(o['media_type'], o['media_type'])})")
            if (schemas or {}).get(o["path"]) is not None:
                lines.append((schemas or {})[o["path"]].words())
        lines.append("Then call step_done: the bridge reads them from disk and has them checked.")
    elif asking:
        lines.append("This step writes no files; it waits for the user's answer to the question below.")
    else:
        lines.append(f"This step writes no files. When its work is done, call step_done with step {step.get('id')}.")
    return lines


def choice_texts(choices: Sequence[Any]) -> tuple[str, ...]:
    """How each of a question's choices is shown, and the text ``answer_question`` takes for it (exactly): a text as
    it is, a number or a boolean as JSON (``5``, ``true``); every choice as JSON if that would show two alike (a
    text ``"5"`` beside the number ``5``), so each text names one choice."""
    plain = tuple(c if isinstance(c, str) else json.dumps(c) for c in choices)
    return plain if len(set(plain)) == len(plain) else tuple(json.dumps(c, ensure_ascii=False) for c in choices)


def answer_text(answer: object) -> str | None:
    """An answer as the text :func:`choice_texts` shows: a number or a boolean sent as JSON (``5``, ``true``) is
    its JSON text, so it names the choice shown that way; a text as it is; None for no answer."""
    if answer is None or isinstance(answer, str):
        return answer
    return json.dumps(answer)


def question_words(question: Mapping[str, Any], *, elicits: bool) -> list[str]:
    choices = ", ".join(choice_texts(question.get("choices") or []))
    field = question.get("field")
    who = (
        f"Call answer_question with field {field}; the user is asked directly in their client."
        if elicits
        else f"Ask the user this question, then call answer_question with their answer and field {field}."
    )
    return [f"The workflow asks the user: {question['prompt']}", f"Choices: {choices}.", who]


def validator_words(
    step: Mapping[str, Any],
    pending: Sequence[Mapping[str, Any]],
    files: Sequence[tuple[str, str]],
    state: Mapping[str, Any],
) -> list[str]:
    """What to run and what to hand each validator's subagent: the files (artifact id, path) and the state."""
    listed = ", ".join(f"{artifact} ({path})" for artifact, path in files)
    lines = [
        "The files passed the verifier's deterministic checks. Now run each validator below in its own subagent",
        "(an isolated context): give it the instruction text, the validator's id and version, the files and the",
        "confirmed state below, then call record_verdict with its verdict (pass or fail, and each finding as one",
        "sentence).",
        f"The files (artifact id and path; the subagent reads them itself): {listed}.",
        "Their SHA-256 digests stay with the bridge, which checked the files on disk (the subagent may hash them,",
        "but has no digest to compare: tell it so).",
        f"The confirmed state: {state_json(state)}",
    ]
    by_id = {(v["id"], v["version"]): v for v in step.get("validators") or []}
    for summary in pending:
        payload = by_id.get((summary["validator_id"], summary["version"])) or {}
        lines += [
            "",
            f"Validator {summary['validator_id']} (subagent {summary['subagent']}), version {summary['version']}. "
            "Instruction:",
            str((payload.get("instruction") or {}).get("text") or "").strip(),
        ]
    return lines


def state_json(values: Mapping[str, Any]) -> str:
    """The confirmed state's values as one line of JSON (keys sorted), as a validator's brief and a resume say them."""
    return json.dumps(dict(values), ensure_ascii=False, sort_keys=True)


def confirmed_facts_words(values: Mapping[str, Any]) -> list[str]:
    """The run's confirmed facts for a model picking the run up (``resume_run``, ``show_step``): one in a new
    session has no memory of them, and the steps are written against them ("filled from the confirmed state")."""
    if not values:
        return []
    return [
        f"The facts confirmed in this run so far: {state_json(values)}",
        "(Where the step's instructions use the confirmed state or a confirmed field, use these values as they"
        " are: the user confirmed them already; do not ask for them again.)",
    ]


def next_call(position: RunResult, pending: Sequence[Mapping[str, Any]], unwritten: Sequence[str]) -> str:
    """The one call to make next where the run is, in one sentence (after a move that did not fit); ``unwritten``:
    the step's files not there to be read yet (:func:`~rimthan_host.outputs.unwritten`)."""
    question, step = position.question.wire if position.question else None, position.step_wire
    files = ", ".join(str(o["path"]) for o in step.get("outputs") or [])
    if position.status == "input_required" and question:
        choices = ", ".join(choice_texts(question.get("choices") or []))
        return (
            f"The run waits for the user's answer to: {question['prompt']} ({choices}); call answer_question with "
            f"field {question.get('field')}."
        )
    if pending:
        names = ", ".join(f"{s['validator_id']} (subagent {s['subagent']})" for s in pending)
        return f"Waiting for a verdict: {names}; call record_verdict for each."
    if step.get("gated") and position.status == "validation_failed":
        return f"Fix this step's files ({files}) as the findings said, then call step_done."
    if step.get("gated") and not unwritten:  # (written, e.g. before a reconnect: only the check is left to do)
        return f"This step's files are written ({files}) but not checked yet: call step_done to have them checked."
    if step.get("gated"):
        return f"This step's files have not been checked yet: write {', '.join(unwritten)}, then call step_done."
    return f"When this step's work is done, call step_done with step {step.get('id')}."


def failed_words(tool: str, exc: Exception, project: Path, run: str | None) -> str:
    """An unexpected failure in one sentence: the system's reason and file for an OSError, else its kind.

    For a move the verifier made but the run files could not record
    (:class:`MoveNotRecorded`), the reason is the write's, and the words say the move does not count.
    """
    unrecorded = ""
    if isinstance(exc, MoveNotRecorded):
        exc, unrecorded = exc.cause, " The verifier made the move, but it was not recorded, so it does not count."
    if isinstance(exc, HardLinked):
        again = f"call resume_run {run} again" if run else f"call {tool} again"
        return f"The bridge failed on {tool}: {hard_link_words(str(_file_name(exc, project)), again)}.{unrecorded}"
    cause = f"an unexpected {type(exc).__name__}"
    if isinstance(exc, NotAProtocolResult):
        cause = str(exc)
    elif isinstance(exc, OSError) and exc.strerror:
        name = _file_name(exc, project)
        cause = f"{exc.strerror}: {quoted(name)}" if name is not None else exc.strerror
        in_the_way = _file_in_the_way(project, name) if exc.errno == errno.ENOTDIR and name is not None else None
        cause = f"{in_the_way} is not a directory, where the bridge keeps one: move it away" if in_the_way else cause
    then = f"call resume_run {run} to go on from the run log" if run else "call the tool again"
    if isinstance(exc, OSError) and exc.errno in FULL_OR_READ_ONLY:
        fix = "the disk holding the project is full or read-only: ask the user to free space on it or make it writable"
        return f"The bridge failed on {tool} ({cause}); {fix}, then {then}.{unrecorded}"
    return f"The bridge failed on {tool} ({cause}); once that is fixed, {then}.{unrecorded}"


def _file_name(exc: OSError, project: Path) -> Path | None:
    """The file an OSError names, relative to ``project`` if it is in it."""
    name = Path(str(exc.filename)) if exc.filename else None
    return name.relative_to(project) if name is not None and name.is_relative_to(project) else name


def _file_in_the_way(project: Path, name: Path) -> Path | None:
    """The first part of ``name`` (in ``project``), or ``name`` itself, that is there but no directory: what
    ENOTDIR was about."""
    if name.is_absolute():
        return None
    for part in (*reversed(name.parents[:-1]), name):  # .rimthan, then .rimthan/runs, ...
        try:
            found = file_status(ProjectPath(project, part))  # (through the walk: never through a link)
        except OSError:
            return None
        if found is None:
            return None
        if not stat.S_ISDIR(found.st_mode):
            return part
    return None


def busy_words(unfinished: Sequence[RunSummary], active: str | None) -> str:
    """Why start_run started nothing: the project's unfinished runs, and how to go on."""
    listed = ", ".join(r.words() for r in unfinished)
    head = f"Nothing was started: this project has unfinished runs: {listed}. "
    if active is not None and any(r.run_id == active for r in unfinished):
        head += f"Run {active} is the active one: show_step says what it needs."
    elif any(not r.damaged for r in unfinished):
        head += "Continue one with resume_run (run id)."
    else:
        return head + f"None of them can be resumed ({KEPT_FOR_AUDIT}): call start_run again with new_run true."
    tail = " Only if the user wants a separate run, call start_run again with new_run true"
    return head + tail + "; the unfinished runs stay resumable."


def refusal_reason(error: Mapping[str, Any]) -> str:
    """A verifier's refusal in a few words: its code and message, or, for a long message, where and which rule."""
    message = str(error.get("message") or "")
    if len(message) <= 300:
        return f"{error.get('code')}: {message}"
    rule = str((error.get("details") or {}).get("schema_path") or "").rsplit("/", 1)[-1]
    return f"{error.get('code')} at {error.get('path')}" + (f": it breaks the schema's {rule} rule" if rule else "")


def failure_words(failures: Sequence[Mapping[str, Any]]) -> list[str]:
    return [f"- {f.get('code')}: {f.get('message')}" for f in failures]


def findings_words(findings: Sequence[Mapping[str, Any]], step: str) -> list[str]:
    """A failed round: each finding, and the repair (the step named, for step_done's ``step``)."""
    lines = ["A validator failed the step:"]
    lines += [f"- {str(f.get('validator') or '').split('@')[0]}: {f.get('message')}" for f in findings]
    lines.append(
        f"next: fix the files as the findings say, then call step_done again; the run waits at step {step}. A pass "
        "holds only for the files as that validator judged them: once you change a file, every validator of the "
        "step runs again (with the files unchanged, only the ones that failed)."
    )
    return lines


def preview_words(result: RunResult) -> list[str]:
    """A migration preview in words: what it invalidates, the steps it walks again, what blocks it."""
    preview, failures = result.migration.wire if result.migration else {}, wires(result.failures)
    lines = [
        f"Migration from {(preview.get('from') or {}).get('release')} to {(preview.get('to') or {}).get('release')}:",
        f"the run restarts at {preview.get('restart_step')}; these results are invalidated and redone:",
        f"artifacts {', '.join(preview.get('invalidated_artifacts') or []) or 'none'};",
        f"validators {', '.join(preview.get('invalidated_validators') or []) or 'none'}.",
        walked_words(result.walked_again),
        *kept_words(result.migration.target_needs if result.migration else ()),
    ]
    blocking = [f for f in failures if f.get("code") != "migration_confirmation_required"]
    if blocking:
        lines.append("Before it can happen:")
        lines += failure_words(blocking)
    return lines


def walked_words(walked: Sequence[WalkedStep]) -> str:
    """The steps a migration walks again, in order, each with the files it produces again."""
    steps = [w.step + (f" (redoes {', '.join(w.outputs)})" if w.outputs else "") for w in walked]
    return f"Steps walked again: {', '.join(steps)}." if steps else "No step is walked again."


def kept_words(needs: Sequence[NeededFact]) -> list[str]:
    """The run's confirmed facts a migration carries to its target: the user is not asked for them again."""
    kept = [n.field for n in needs if n.present]
    if not kept:
        return []
    return [f"The facts confirmed so far carry over, not asked for again at the steps walked again: {', '.join(kept)}."]


def offer_summary(offer: Mapping[str, Any]) -> dict[str, Any]:
    """The verifier's migration preview as the model may see it: target ids and the facts it still needs."""
    needs = (offer.get("target_needs") or {}).get("confirmed_state") or []
    return {
        "to_release": (offer.get("to") or {}).get("release"),
        "to_workflow": (offer.get("to") or {}).get("workflow"),
        "needs": [n["field"] for n in needs if n.get("required") and not n.get("present")],
    }


def offer_words(offer: Mapping[str, Any], elicits: bool = False) -> list[str]:
    """A newer release the verifier offers for this run, and what moving to it takes (``elicits``: the client
    of the call can ask the user, so the bridge confirms the facts)."""
    summary = offer_summary(offer)
    lines = [
        "",
        f"A newer release is offered for this run: {_release_and_workflow(summary)}.",
        "If the user wants it, call migrate_run (no id needed): it previews first, nothing moves until confirmed.",
    ]
    expects = {
        n["field"]: n.get("expects") or {} for n in (offer.get("target_needs") or {}).get("confirmed_state") or []
    }
    if summary["needs"]:
        pass_them = "ask the user and pass them as facts" + (f" ({ASKED_IN_CLIENT})" if elicits else "")
        lines.append(f"It needs facts this run does not have; {pass_them}:")
        lines += [f"- {name}: {expects[name].get('description') or 'see the preview'}" for name in summary["needs"]]
    return lines


def _release_and_workflow(summary: Mapping[str, Any]) -> str:
    """``release (workflow)``, or the one name when the release and the workflow are named alike."""
    release, workflow = summary["to_release"], summary["to_workflow"]
    return str(release) if release == workflow else f"{release} ({workflow})"


def installed_words(delivered: Sequence[Mapping[str, Any]]) -> str:
    """What setup installed, as the workspace manifest lists it: each kind, then each file's id and path."""
    by_kind: dict[str, list[str]] = {}
    for entry in delivered:
        by_kind.setdefault(str(entry["kind"]), []).append(f"{entry['asset']} ({entry['path']})")
    order = sorted(by_kind, key=lambda k: (DELIVERY_KINDS.index(k) if k in DELIVERY_KINDS else len(DELIVERY_KINDS), k))
    parts = [f"the {kind}{'s' if len(by_kind[kind]) > 1 else ''} {', '.join(by_kind[kind])}" for kind in order]
    said = "The workspace is set up: installed " + ("; ".join(parts) or "nothing (the release delivers no files)") + "."
    return said + (f" {HARNESS_ASSETS}" if {"prompt", "adapter"} & set(by_kind) else "")


HARNESS_ASSETS = (
    "The prompt and the adapter are written for a host calling the verifier's rimthan.* tools itself: with this "
    "bridge, use its tools instead (start_run, resume_run, ...), and never ask the user for a checkpoint token or "
    "the confirmed state: the bridge keeps them."
)


def fact_message(name: str, value: Any) -> str:
    """What the user is asked to confirm for one fact: two values the bridge would record apart read apart
    (:func:`shown_exactly`; a list one item a line)."""
    shown = "\n".join(f"- {shown_exactly(v)}" for v in value) if isinstance(value, list) else shown_exactly(value)
    return f"Confirm {name} for this run:\n{shown}"


def shown_exactly(value: Any) -> str:
    """``value`` as the person reads it: plain text as it is, unless it could read as another value (a line
    break, a control, format or separator character such as a right-to-left override or a zero-width space, a
    space other than U+0020, space at either end, an opening quote, nothing at all); then in double quotes with
    each such character escaped (``\\n``, ``\\u202e``). Other values as JSON."""
    if not isinstance(value, str):
        return json.dumps(value, sort_keys=True)
    if value and value == value.strip(" ") and not value.startswith('"') and not any(map(_unseen, value)):
        return value
    return '"' + "".join(_escaped(c) for c in value) + '"'


def _unseen(char: str) -> bool:
    """A character that does not show as itself: C* (controls, format, private use, unassigned) and Z* but a space."""
    return char != " " and unicodedata.category(char)[0] in "CZ"


def _escaped(char: str) -> str:
    if char in '"\\':
        return "\\" + char
    if char == "\n":
        return "\\n"
    if not _unseen(char):
        return char
    return f"\\u{ord(char):04x}" if ord(char) <= 0xFFFF else f"\\U{ord(char):08x}"


def no_run_words(runs: Iterable[RunSummary]) -> str:
    """No run is active: call start_run, or resume_run with a run it can pick up (never a damaged one)."""
    unfinished = [r for r in runs if not r.completed]
    resumable = ", ".join(r.run_id for r in unfinished if not r.damaged)
    damaged = ", ".join(r.run_id for r in unfinished if r.damaged)
    text = "No run is active. Call start_run" + (f" or resume_run with one of the unfinished runs here: {resumable}"
                                                 if resumable else "") + "."  # fmt: skip
    if damaged:
        text += f" Run files damaged, so these cannot be resumed: {damaged} ({KEPT_FOR_AUDIT}); "
        text += "for a new run, call start_run with new_run true."
    return text


def known_runs(runs: Iterable[RunSummary]) -> str:
    """The project's runs, each complete, unfinished at its step, or damaged."""
    runs = list(runs)
    if not runs:
        return "This project has no runs yet."
    resumable = any(not r.completed and not r.damaged for r in runs)
    resume = " resume_run (run id) continues an unfinished one." if resumable else ""
    return f"Runs in this project: {', '.join(r.words() for r in runs)}.{resume}"
