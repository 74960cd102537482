"""The bridge's moves: a host session driven by a model's tool calls.

Each method is one tool the model calls, in its own vocabulary; each returns
a :class:`Reply` that says in words what happened and what to do next. The
bridge does everything that needs exact bytes itself: it delivers the setup
assets, reads the model's files back from disk and attests them, keeps the
checkpoint and the validation bundle, builds validator reports from verdicts,
and logs every checkpoint to ``.rimthan/runs/<run>.log``. Confirmations come
from the person through :class:`~rimthan_host.asking.Asker` when the client
can elicit; otherwise from the model, after it asked the user, recorded as such.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .asking import Ask, Asker
from .confirmations import BY_ELICITATION, BY_MODEL
from .protocol import (
    SETUP_STEP,
    HarnessError,
    HostProfile,
    ResourceReader,
    ToolCaller,
    ToolRefused,
    workflow_version,
)
from .runlog import RunLog, list_runs, new_run_id
from .schemas import OutputSchema, output_schema
from .session import HostSession
from .words import (
    failure_words,
    findings_words,
    offer_summary,
    offer_words,
    preview_words,
    question_words,
    scrub,
    step_words,
    validator_words,
)


@dataclass(frozen=True)
class Reply:
    """A tool result for the model: words, the same facts as data, and whether the move failed."""

    text: str
    data: dict[str, Any] = field(default_factory=dict)
    is_error: bool = False


class Bridge:
    """One project, one verifier connection, at most one active run at a time."""

    def __init__(
        self,
        call: ToolCaller,
        *,
        project_dir: Path,
        host: HostProfile | None = None,
        clock: Callable[[], float] = time.time,
        read_resource: ResourceReader | None = None,
    ) -> None:
        self.call = call
        self.read_resource = read_resource
        self._schemas: dict[str, OutputSchema | None] = {}  # by schema URI (it names the release's digest)
        self.project_dir = Path(project_dir)
        self.host = host or HostProfile()
        self.clock = clock
        self.session: HostSession | None = None
        self.elicits = False  # whether the client of the current call can ask the person directly

    def _new_session(self, run_id: str) -> HostSession:
        log = RunLog(self.project_dir, run_id)
        return HostSession(self.call, project_dir=self.project_dir, host=self.host, clock=self.clock, run_log=log)

    @property
    def run_id(self) -> str:
        assert self.session is not None and self.session.run_log is not None
        return self.session.run_log.run_id

    # -- start and resume ------------------------------------------------------------------

    async def start_run(self, asker: Asker, workflow: str, facts: Mapping[str, Any]) -> Reply:
        by = await self._confirm_facts(asker, facts)
        if isinstance(by, Reply):
            return by
        session = self._new_session(new_run_id())
        result = await session.start(workflow, facts, by=by)
        if result["status"] == "blocked":
            lines = ["The run did not start. The verifier needs:", *failure_words(result["failures"])]
            lines.append("Ask the user for what is missing and call start_run again with every fact.")
            return Reply("\n".join(lines), {"status": "blocked", "failures": _codes(result)}, is_error=True)
        self.session = session
        return await self._go_on(result, [f"Started run {self.run_id} ({by})."])

    async def resume_run(self, run: str | None) -> Reply:
        runs = list_runs(self.project_dir)
        unfinished = [r for r in runs if not RunLog(self.project_dir, r).load_state().get("completed")]
        run_id = run or (unfinished[-1] if unfinished else None)
        if run_id is None or run_id not in runs:
            return Reply(f"No run to resume here. Runs in this project: {', '.join(runs) or 'none'}.", is_error=True)
        session = self._new_session(run_id)
        result = await session.resume()
        self.session = session
        return await self._go_on(result, [f"Resumed run {run_id} from its log."])

    # -- steps -----------------------------------------------------------------------------

    async def show_step(self) -> Reply:
        session = self._active()
        if isinstance(session, Reply):
            return session
        return await self._describe(session.result, [])

    async def step_done(self) -> Reply:
        session = self._active()
        if isinstance(session, Reply):
            return session
        step = session.step
        if session.result.get("status") == "input_required":
            return await self._describe(session.result, ["The step is waiting for an answer first."], error=True)
        if not step.get("gated"):
            return await self._go_on(await session.advance(), [f"Step {step['id']} done."])
        if session.prepared is not None and session.prepared.pending:
            return self._validators(session, ["Validators are still waiting for a verdict."])
        try:
            artifacts = session.read_outputs()
        except HarnessError as exc:
            return Reply(f"{exc}. Write the files first, then call step_done again.", {"step": step["id"]}, True)
        prepared = await session.prepare(artifacts)
        if prepared["status"] == "deterministic_validation_failed":
            lines = ["The verifier refused the files:", *failure_words(prepared["failures"])]
            lines.append("Fix the files, then call step_done again.")
            return Reply("\n".join(lines), {"status": prepared["status"], "failures": _codes(prepared)}, True)
        if not prepared["validators"]:
            return await self._go_on(await session.submit(), [f"Step {step['id']} checked."])
        return self._validators(session, [])

    async def record_verdict(self, validator: str, verdict: str, findings: Sequence[str]) -> Reply:
        session = self._active()
        if isinstance(session, Reply):
            return session
        prepared = session.prepared
        if prepared is None:
            return Reply("No validator is waiting for a verdict. Call show_step to see what to do.", is_error=True)
        names = {s["validator_id"]: f"{s['validator_id']}@{s['version']}" for s in prepared.validators}
        key = names.get(validator.split("@")[0])
        if key is None:
            return Reply(f"{validator} is not waiting; waiting: {', '.join(names)}.", is_error=True)
        if verdict == "fail" and not findings:
            return Reply("A fail verdict needs at least one finding saying what is wrong.", is_error=True)
        session.verdict(key, verdict, [{"severity": "error", "message": f} for f in findings])
        if prepared.pending:
            return self._validators(session, [f"Recorded {verdict} for {validator}."])
        return await self._go_on(await session.submit(), [f"Recorded {verdict} for {validator}; step submitted."])

    async def answer_question(self, asker: Asker, answer: str | None) -> Reply:
        session = self._active()
        if isinstance(session, Reply):
            return session
        question = session.result.get("question")
        if session.result.get("status") != "input_required" or not question:
            return Reply("No question is waiting. Call show_step to see what to do.", is_error=True)
        choices = tuple(str(c) for c in question.get("choices") or ())
        if asker.available:
            ask = Ask(question["field"], question["prompt"], choices, answer)
            got = (await asker.ask([ask]))[question["field"]]
            if not got.confirmed:
                return Reply(
                    f"The user did not answer ({got.action}); nothing was recorded. Call answer_question to ask again.",
                    {"status": "input_required", "user": got.action},
                    is_error=True,
                )
            value, by = got.value, BY_ELICITATION
        elif answer is None:
            return Reply("Ask the user, then call answer_question with their answer.", is_error=True)
        else:
            value, by = answer, BY_MODEL
        if choices and value not in choices:
            return Reply(f"{value!r} is not one of: {', '.join(choices)}.", is_error=True)
        result = await session.advance({question["field"]: value}, by=by)
        return await self._go_on(result, [f"Recorded {question['field']} = {value} ({by})."])

    # -- migration -------------------------------------------------------------------------

    async def migrate_run(self, asker: Asker, to_release: str | None, confirm: bool, facts: Mapping[str, Any]) -> Reply:
        session = self._active()
        if isinstance(session, Reply):
            return session
        if not to_release:
            offer = session.migration_offer
            if offer is None:
                return Reply("The verifier offers no newer release for this run; nothing to migrate to.", {}, True)
            to_release = str(offer_summary(offer)["to_release"])
        values = {**session.state.values, **facts}
        try:
            preview = await session.migrate(to_release, values, confirm=False)
        except ToolRefused as exc:
            return Reply(
                f"The verifier refused the migration: {exc.code}: {exc.error.get('message')}\n"
                "Ask the user for what the newer release needs and pass it as facts.",
                {"status": "refused", "refused": exc.code},
                is_error=True,
            )
        words = preview_words(preview.get("migration") or {}, preview.get("failures") or [])
        blocking = [f for f in preview.get("failures") or [] if f.get("code") != "migration_confirmation_required"]
        data = {"status": "preview", "to_release": to_release, "failures": _codes(preview)}
        if blocking or not confirm:
            tail = "Call migrate_run with confirm true once the user agrees." if not blocking else ""
            if any(f.get("code") == "confirmed_field_missing" for f in blocking):
                tail = "Ask the user for what the newer release needs and pass it as facts."
            return Reply("\n".join([*words, tail]).strip(), data, is_error=bool(blocking))
        by = BY_MODEL
        if asker.available:
            asks = [Ask(f"fact:{k}", _fact_message(k, v)) for k, v in facts.items()]
            asks.append(Ask("migrate", "\n".join([*words, "Migrate this run now?"])))
            got = await asker.ask(asks)
            refused = [k for k, a in got.items() if not a.confirmed]
            if refused or len(got) < len(asks):
                action = got[refused[0]].action if refused else "cancel"
                return Reply(
                    f"The user did not confirm the migration ({action}); the run stays where it is.",
                    {**data, "user": action},
                    is_error=True,
                )
            by = BY_ELICITATION
        migrated = await session.migrate(to_release, values, confirm=True, by=by)
        if migrated["status"] != "active":
            return Reply("\n".join(["The migration was refused:", *failure_words(migrated["failures"])]), data, True)
        return await self._go_on(migrated, [f"Migrated run {self.run_id} to {to_release} ({by})."])

    # -- shared ----------------------------------------------------------------------------

    def _active(self) -> HostSession | Reply:
        if self.session is not None:
            return self.session
        runs = list_runs(self.project_dir)
        hint = f" or resume_run (runs here: {', '.join(runs)})" if runs else ""
        return Reply(f"No run is active. Call start_run{hint}.", is_error=True)

    async def _confirm_facts(self, asker: Asker, facts: Mapping[str, Any]) -> str | Reply:
        if not asker.available:
            return BY_MODEL
        got = await asker.ask([Ask(f"fact:{k}", _fact_message(k, v)) for k, v in facts.items()])
        refused = [k for k, a in got.items() if not a.confirmed]
        if refused:
            field_name = refused[0].removeprefix("fact:")
            return Reply(
                f"The user did not confirm {field_name} ({got[refused[0]].action}); the run did not start. "
                "Talk it through with the user and call start_run again.",
                {"status": "not_started", "user": got[refused[0]].action, "field": field_name},
                is_error=True,
            )
        return BY_ELICITATION

    async def _go_on(self, result: dict[str, Any], lines: list[str]) -> Reply:
        """After a move: do the setup step ourselves, then describe where the run is."""
        session = self.session
        assert session is not None
        if result["status"] in ("active", "advanced") and (result.get("step") or {}).get("id") == SETUP_STEP:
            prepared = await session.prepare([session.set_up_workspace()])
            if prepared["status"] != "ready_for_semantic_validation":
                return Reply(
                    "\n".join(["Setting up the workspace failed:", *failure_words(prepared["failures"])]),
                    {"status": prepared["status"]},
                    True,
                )
            result = await session.submit()
            lines.append("The workspace is set up: the release's prompt, skill and subagents are installed.")
        return await self._describe(result, lines)

    async def _output_schemas(self, step: Mapping[str, Any], release_id: str) -> dict[str, OutputSchema]:
        """Each JSON output's schema, fetched once per release and copied into the project."""
        found: dict[str, OutputSchema] = {}
        if self.read_resource is None or self.session is None or not step.get("gated"):
            return found
        for output in step.get("outputs") or []:
            uri = str(output.get("schema_uri") or "")
            if uri and uri not in self._schemas:
                self._schemas[uri] = await output_schema(self.read_resource, self.session.files, release_id, output)
            schema = self._schemas.get(uri)
            if schema is not None:
                found[output["path"]] = schema
        return found

    async def _describe(self, result: Mapping[str, Any], lines: list[str], *, error: bool = False) -> Reply:
        session = self.session
        assert session is not None
        status = result.get("status")
        data: dict[str, Any] = {"run": self.run_id, "status": status}
        if status == "completed":
            files = sorted(w.path for w in session.record.written.values())
            lines += [
                "The run is complete.",
                f"Run log: .rimthan/runs/{self.run_id}.log (rimthan-mcp audit verifies it).",
            ]
            return self._reply(lines, {**data, "files": files}, error)
        step = result.get("step") or {}
        data["step"] = {"id": step.get("id"), "title": step.get("title"), "gated": step.get("gated")}
        if status == "validation_failed":
            files = [o["path"] for o in step.get("outputs") or []]
            lines += findings_words(result.get("findings") or [])
            lines += ["The step's files:", *(f"- {path}" for path in files)]
            return self._reply(lines, {**data, "files": files}, error)
        release_id = str((result.get("release") or session.result.get("release") or {}).get("id") or "release")
        schemas = await self._output_schemas(step, release_id)
        lines += step_words(step, self.run_id, workflow_version(result), schemas)
        if session.migration_offer is not None:
            lines += offer_words(session.migration_offer)
            data["migration"] = offer_summary(session.migration_offer)
        if status == "input_required" and result.get("question"):
            question = result["question"]
            lines += ["", *question_words(question, elicits=self.elicits)]
            data["question"] = {
                "field": question["field"],
                "prompt": question["prompt"],
                "choices": question["choices"],
            }
        data["files"] = [o["path"] for o in step.get("outputs") or []] if step.get("gated") else []
        return self._reply(lines, data, error)

    def _validators(self, session: HostSession, lines: list[str]) -> Reply:
        assert session.prepared is not None
        pending = session.prepared.pending
        lines += validator_words(session.step, pending)
        data = {
            "run": self.run_id,
            "status": "validators_pending",
            "validators": [{"name": s["validator_id"], "subagent": s["subagent"]} for s in pending],
        }
        return self._reply(lines, data, False)

    def _reply(self, lines: list[str], data: dict[str, Any], error: bool) -> Reply:
        return Reply(scrub("\n".join(lines).strip()), data, error)


def _fact_message(name: str, value: Any) -> str:
    shown = (
        value if isinstance(value, str) else "\n".join(f"- {v}" for v in value) if isinstance(value, list) else value
    )
    return f"Confirm {name} for this run:\n{shown}"


def _codes(result: Mapping[str, Any]) -> list[str]:
    return [str(f.get("code")) for f in result.get("failures") or []]


__all__ = ["Bridge", "Reply", "ToolRefused"]
