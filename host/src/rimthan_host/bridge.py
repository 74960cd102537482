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

import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rimthan_workflow_registry.errors import quoted

from .asking import Ask, Asker
from .confirmations import BY_ELICITATION, BY_MODEL
from .delivered import AssetClash, restore_release, restore_subagents
from .facts import confirm_facts, record_facts
from .outputs import changed_files, file_problems, refusal_words
from .protocol import (
    SETUP_STEP,
    HarnessError,
    HostProfile,
    ResourceReader,
    ToolCaller,
    ToolRefused,
    VerifierLost,
)
from .reports import refused_report
from .runlog import RunLog, RunSummary, new_run_id, run_summaries
from .session import HostSession
from .step_replies import Reply, StepReplies, failure_codes, misplaced, reply, validators_waiting, where
from .words import (
    busy_words,
    fact_message,
    failed_words,
    failure_words,
    installed_words,
    known_runs,
    no_run_words,
    offer_summary,
    preview_words,
    refusal_reason,
)
from .workspace_lock import REFUSED_MEANWHILE, WorkspaceBusy, WorkspaceLock


class ResumeFailed(Exception):
    """Picking ``run`` up from its log failed unexpectedly (``cause``); the active run was not touched."""

    def __init__(self, run: str, cause: Exception) -> None:
        super().__init__(f"resuming run {run} failed: {cause!r}")
        self.run = run
        self.cause = cause


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
        self.replies = StepReplies(read_resource)
        self.project_dir = Path(project_dir)
        self.host = host or HostProfile()
        self.clock = clock
        self.session: HostSession | None = None
        self.elicits = False  # whether the client of the current call can ask the person directly
        self.lock = WorkspaceLock(self.project_dir)  # held while this bridge's run is unfinished (see settle)

    def _new_session(self, run_id: str) -> HostSession:
        log = RunLog(self.project_dir, run_id)
        return HostSession(self.call, project_dir=self.project_dir, host=self.host, clock=self.clock, run_log=log)

    @property
    def run_id(self) -> str:
        assert self.session is not None and self.session.run_log is not None
        return self.session.run_log.run_id

    # -- start and resume ------------------------------------------------------------------

    async def start_run(self, asker: Asker, workflow: str, facts: Mapping[str, Any], *, new_run: bool = False) -> Reply:
        busy = self._claim("start_run")
        if busy is not None:
            return busy
        unfinished = self._unfinished()
        if unfinished and not new_run:
            return self._busy(unfinished)
        by = await confirm_facts(asker, facts, "start_run", ("the run did not start", "not_started"))
        if isinstance(by, Reply):
            return by
        session = self._new_session(new_run_id())
        result = await session.start(workflow, facts, by=by)
        if result["status"] == "blocked":
            lines = ["The run did not start. The verifier needs:", *failure_words(result["failures"])]
            lines.append("Ask the user for what is missing and call start_run again with every fact.")
            return Reply("\n".join(lines), {"status": "blocked", "failures": failure_codes(result)}, is_error=True)
        self.session = session
        self.lock.note(self.run_id)
        lines = [f"Started run {self.run_id} ({by})."]
        lines += [f"Run {r.run_id} is set aside unfinished: resume_run {r.run_id} returns to it."
                  for r in unfinished if not r.damaged]  # fmt: skip
        return await self._go_on(result, lines)

    async def resume_run(self, run: str | None) -> Reply:
        runs = {r.run_id: r for r in run_summaries(self.project_dir)}
        unfinished = [r.run_id for r in runs.values() if not r.completed and not r.damaged]
        run_id = run or (unfinished[-1] if unfinished else None)
        known = known_runs(runs.values())
        if run_id is None or run_id not in runs:
            head = f"There is no run {quoted(run)} in this project." if run else "No unfinished run in this project."
            return Reply(f"{head} {known} Call start_run for a new run.", {"status": "refused"}, is_error=True)
        if runs[run_id].completed:
            return Reply(
                f"Run {run_id} is already complete; there is nothing to resume (its log: "
                f".rimthan/runs/{run_id}.log). {known} Call start_run for a new run.",
                {"run": run_id, "status": "completed"},
                is_error=True,
            )
        if self.session is not None and self.session.run_log is not None and self.run_id == run_id:
            return await self._show([f"Run {run_id} is already the active run."])
        busy = self._claim("resume_run")
        if busy is not None:
            return busy
        lines = [f"Resumed run {run_id} from its log."]
        lines += [
            f"Run {r.run_id} is set aside unfinished: resume_run {r.run_id} returns to it."
            for r in self._unfinished()
            if self.session is not None and r.run_id == self.run_id
        ]
        session = self._new_session(run_id)
        try:
            result = await session.resume()
        except (HarnessError, ToolRefused, VerifierLost):
            raise  # said in words by the server, the active run untouched (a lost verifier is reconnect's)
        except Exception as exc:
            raise ResumeFailed(run_id, exc) from exc
        try:
            restored = restore_release(session.files, session.release_digest, run_id)
        except AssetClash as exc:  # the run stays in its log; the active run, if any, stays active
            return Reply(str(exc), {"run": run_id, "status": "workspace_refused"}, is_error=True)
        self.session = session
        self.lock.note(run_id)
        lines += [f"Re-installed {p}: run {run_id}'s release delivered it otherwise (another run's setup had "
                  "replaced it)." for p in restored]  # fmt: skip
        return await self._go_on(result, lines)

    # -- steps -----------------------------------------------------------------------------

    async def show_step(self) -> Reply:
        return await self._show([])

    async def _show(self, lines: list[str]) -> Reply:
        if self.session is None:
            return self._no_run()
        session = self.session
        if session.prepared is not None and session.prepared.pending:
            return validators_waiting(session, [*lines, where(session)])
        return await self.replies.describe(session, session.result, lines, elicits=self.elicits)

    async def step_done(self, asker: Asker, facts: Mapping[str, Any]) -> Reply:
        session = self._running()
        if isinstance(session, Reply):
            return session
        step = session.step
        if session.result.get("status") == "input_required":
            return misplaced(session, "Nothing was done: the step is waiting for an answer first.")
        if facts or not step.get("gated"):  # facts go in with the same continue_workflow that moves an ungated step
            moved = await record_facts(session, asker, facts)
            if isinstance(moved, Reply):
                return moved
            if not step.get("gated"):
                return await self._go_on(moved[0], [*moved[1], f"Step {step['id']} done."])
            session.prepared = None  # the checkpoint changed: the files are checked afresh against it
        prepared = session.prepared
        if prepared is not None and prepared.pending and not changed_files(session.files, prepared.artifacts):
            lines = ["Nothing was done: the files were checked already and validators still wait for a verdict."]
            return validators_waiting(session, lines, error=True)
        lines = ["The files changed since they were checked: checking them again."] if prepared else []
        return await self._check(session, lines)

    async def _check(self, session: HostSession, lines: list[str]) -> Reply:
        """Read the step's files from disk and have the verifier check them; then its validators, if any."""
        step = session.step
        problems = file_problems(session.files, step.get("outputs") or [])
        if problems:
            lines = ["Nothing was checked yet:", *(f"- {p}" for p in problems), "Then call step_done again."]
            return reply(lines, {"run": self.run_id, "status": "files_missing", "step": step["id"]}, True)
        prepared_result = await session.prepare(session.read_outputs())
        if prepared_result["status"] == "deterministic_validation_failed":
            schemas = {
                p: s.path
                for p, s in (await self.replies.output_schemas(session, step, self._release_id())).items()
                if s.path
            }
            lines += ["The verifier refused the files:"]
            lines += refusal_words(prepared_result["failures"], step.get("outputs") or [], schemas)
            lines.append("Fix the files, then call step_done again; the run waits at this step.")
            data = {"run": self.run_id, "status": prepared_result["status"], "failures": failure_codes(prepared_result)}
            return reply(lines, data, True)
        if not prepared_result["validators"]:
            return await self._submit(session, [*lines, f"Step {step['id']} checked."])
        try:
            restored = restore_subagents(
                session.files, session.release_digest, [v["subagent"] for v in prepared_result["validators"]]
            )
        except AssetClash as exc:
            session.prepared = None  # step_done checks the files again, then the subagents
            return reply([str(exc)], {"run": self.run_id, "status": "workspace_refused", "step": step["id"]}, True)
        lines += [f"Re-installed {p}: this run's release defines that subagent otherwise (another run's setup had "
                  "replaced it)." for p in restored]  # fmt: skip
        return validators_waiting(session, lines)

    async def record_verdict(self, validator: str, verdict: str, findings: Sequence[str]) -> Reply:
        session = self._running()
        if isinstance(session, Reply):
            return session
        prepared = session.prepared
        if prepared is None:
            return misplaced(session, "No validator is waiting for a verdict; nothing was recorded.")
        names = {s["validator_id"]: f"{s['validator_id']}@{s['version']}" for s in prepared.validators}
        name = validator.split("@")[0]
        key = names.get(name)
        if key is None:
            lines = [f"Nothing was recorded: {quoted(validator)} is not a validator of this step."]
            return validators_waiting(session, lines, error=True)
        if key in prepared.verdicts:
            lines = [f"Nothing was recorded: {name} already has a verdict ({prepared.verdicts[key][0]}); it stands."]
            return validators_waiting(session, lines, error=True)
        findings = [f.strip() for f in findings if f.strip()]
        if verdict == "fail" and not findings:
            lines = [
                f"Nothing was recorded: a fail verdict needs findings. Call record_verdict again for {name} with "
                'verdict "fail" and findings: what is wrong, one sentence each, as the subagent reported it.'
            ]
            return validators_waiting(session, lines, error=True)
        severity = "error" if verdict == "fail" else "warning"
        found = [{"severity": severity, "message": f} for f in findings]
        problem = session.verdict_problem(key, verdict, found)
        if problem is not None:
            lines = [
                f"Nothing was recorded: the verifier would refuse these findings ({problem}). Call record_verdict "
                f"again for {name} with fewer, shorter findings: each problem once, in a sentence or two."
            ]
            return validators_waiting(session, lines, error=True)
        session.verdict(key, verdict, found)
        if prepared.pending:
            return validators_waiting(session, [f"Recorded {verdict} for {name}."])
        changed = changed_files(session.files, prepared.artifacts)
        if changed:
            session.prepared = None
            lines = [
                f"{', '.join(changed)} changed after step_done: the verdicts were about the old content and are "
                "discarded. Call step_done to check the files as they are now; then run the validators again."
            ]
            return reply(lines, {"run": self.run_id, "status": "files_changed", "files": changed}, True)
        return await self._submit(session, [f"Recorded {verdict} for {name}; step submitted."])

    async def _submit(self, session: HostSession, lines: list[str]) -> Reply:
        """Submit the round; if the verifier refuses, discard what it refused so the model can redo it."""
        try:
            result = await session.submit()
        except ToolRefused as exc:
            return await self._submit_refused(session, exc)
        return await self._go_on(result, lines)

    async def _submit_refused(self, session: HostSession, exc: ToolRefused) -> Reply:
        prepared = session.prepared
        assert prepared is not None
        said = refusal_reason(exc.error)
        key = refused_report(exc.error, prepared.validators)
        if key is not None and key in prepared.verdicts:  # one report: only that verdict goes
            del prepared.verdicts[key]
            name = key.split("@")[0]
            lines = [f"The verifier refused the verdict of {name} ({said}). That verdict is discarded, the others "
                     f"stand: call record_verdict for {name} again, with findings the verifier accepts."]  # fmt: skip
            return validators_waiting(session, lines, error=True)
        session.prepared = None  # the round as a whole: check the files again, every validator runs again
        head = f"The verifier refused the step's verdicts ({said}); they are discarded."
        if prepared.validators:  # (a step without validators would only be refused again)
            try:
                checked = await self._check(session, [head, "The files are checked again."])
                return Reply(checked.text, checked.data, is_error=True)
            except ToolRefused as again:
                head += f" Checking the files again was refused too ({refusal_reason(again.error)})."
        lines = [head, "Call step_done to try again; show_step says where the run is."]
        return reply(lines, {"run": self.run_id, "status": "refused", "refused": exc.code}, True)

    async def answer_question(self, asker: Asker, answer: str | None) -> Reply:
        session = self._running()
        if isinstance(session, Reply):
            return session
        question = session.result.get("question")
        if session.result.get("status") != "input_required" or not question:
            return misplaced(session, "No question is waiting; nothing was recorded.")
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
            lines = [
                f"Nothing was recorded: '{quoted(value)}' is not one of the choices: {', '.join(choices)}.",
                "Ask the user to choose one of them, then call answer_question with it exactly as written.",
            ]
            return reply(lines, {"run": self.run_id, "status": "input_required", "choices": list(choices)}, True)
        result = await session.advance({question["field"]: value}, by=by)
        return await self._go_on(result, [f"Recorded {question['field']} = {quoted(value)} ({by})."])

    # -- migration -------------------------------------------------------------------------

    async def migrate_run(self, asker: Asker, to_release: str | None, confirm: bool, facts: Mapping[str, Any]) -> Reply:
        session = self._running()
        if isinstance(session, Reply):
            return session
        offer = session.migration_offer
        if offer is None:
            lines = [f"Nothing was done: no newer release is offered for run {self.run_id}, so there is nothing to "
                     "migrate to. Carry on with the current step (show_step says what it needs)."]  # fmt: skip
            return reply(lines, {"run": self.run_id, "status": "no_offer"}, True)
        offered = str(offer_summary(offer)["to_release"])
        if to_release and to_release != offered:
            lines = [f"Nothing was done: {quoted(to_release)} is not offered for this run; the release offered is "
                     f"{offered}. Call migrate_run without to_release to take it."]  # fmt: skip
            return reply(lines, {"run": self.run_id, "status": "refused", "to_release": offered}, True)
        to_release = offered
        values = {**session.state.values, **facts}
        try:
            preview = await session.migrate(to_release, values, confirm=False)
        except ToolRefused as exc:
            return Reply(
                f"The verifier refused the migration: {exc.code}: {exc.error.get('message')}\n"
                "The run stays where it is. Fix what the refusal names (ask the user for facts) and call migrate_run "
                "again, or carry on with the current step.",
                {"status": "refused", "refused": exc.code},
                is_error=True,
            )
        words = preview_words(preview.get("migration") or {}, preview.get("failures") or [])
        blocking = [f for f in preview.get("failures") or [] if f.get("code") != "migration_confirmation_required"]
        data = {"status": "preview", "to_release": to_release, "failures": failure_codes(preview)}
        if blocking or not confirm:
            tail = "Call migrate_run with confirm true once the user agrees." if not blocking else ""
            if any(f.get("code") == "confirmed_field_missing" for f in blocking):
                tail = "Ask the user for what the newer release needs and pass it as facts to migrate_run."
            return Reply("\n".join([*words, tail]).strip(), data, is_error=bool(blocking))
        by = BY_MODEL
        if asker.available:
            asks = [Ask(f"fact:{k}", fact_message(k, v)) for k, v in facts.items()]
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

    def failed(self, tool: str, exc: Exception) -> Reply:
        """An unexpected failure mid-move in one sentence. The session moves only once a move is logged, but
        a move may have stopped half-way (a step's setup), so it is dropped: ``resume_run`` picks the run up from
        its log and saved state. A failed resume is the exception: the active run made no move, and stays."""
        if isinstance(exc, ResumeFailed):
            kept = f" Run {self.run_id} stays the active run." if self.session is not None else ""
            text = failed_words(tool, exc.cause, self.project_dir, exc.run) + kept
            return Reply(text, {"status": "bridge_error", "run": exc.run}, True)
        log = self.session.run_log if self.session is not None else None
        run = log.run_id if log is not None and log.log_path.exists() else None
        self.session = None
        return Reply(failed_words(tool, exc, self.project_dir, run), {"status": "bridge_error"}, True)

    def settle(self) -> None:
        """After each call: let another bridge take the project's runs once this one has no unfinished run."""
        if self.session is None or self.session.result.get("status") == "completed":
            self.lock.release()

    def _claim(self, tool: str) -> Reply | None:
        """Hold the project's lock before a move that picks a run (None), or the refusal naming its owner."""
        try:
            self.lock.acquire()
        except WorkspaceBusy as busy:
            data = {"status": "workspace_busy", "owner_pid": busy.owner.pid, "owner_run": busy.owner.run}
            return Reply(busy.words(tool), data, is_error=True)
        return None

    def _running(self) -> HostSession | Reply:
        """The active run, if it can still move; else words saying how to get one."""
        if self.session is None:
            return self._no_run()
        if self.session.result.get("status") == "completed":
            runs = known_runs(run_summaries(self.project_dir))
            return Reply(
                f"Run {self.run_id} is complete; nothing more to do in it. {runs} Call start_run for a new run.",
                {"run": self.run_id, "status": "completed"},
                is_error=True,
            )
        return self.session

    def _no_run(self) -> Reply:
        owner = self.lock.other_owner()
        held = f" Right now {WorkspaceBusy(owner)}: {REFUSED_MEANWHILE}" if owner is not None else ""
        return Reply(no_run_words(run_summaries(self.project_dir)) + held, {"status": "no_run"}, is_error=True)

    def _unfinished(self) -> list[RunSummary]:
        """The project's unfinished runs (the active one among them, as its log's state says)."""
        return [r for r in run_summaries(self.project_dir) if not r.completed]

    def _busy(self, unfinished: Sequence[RunSummary]) -> Reply:
        active = self.run_id if self.session is not None else None
        data = {"status": "refused", "unfinished": [r.run_id for r in unfinished]}
        return Reply(busy_words(unfinished, active), data, is_error=True)

    def _release_id(self) -> str:
        assert self.session is not None
        return str((self.session.result.get("release") or {}).get("id") or "release")

    async def _go_on(self, result: dict[str, Any], lines: list[str]) -> Reply:
        """After a move: do the setup step ourselves, then describe where the run is."""
        session = self.session
        assert session is not None
        if result["status"] in ("active", "advanced") and (result.get("step") or {}).get("id") == SETUP_STEP:
            try:
                manifest = session.set_up_workspace()
            except AssetClash as exc:
                return self._not_set_up(exc)
            prepared = await session.prepare([manifest])
            if prepared["status"] != "ready_for_semantic_validation":
                return Reply(
                    "\n".join(["Setting up the workspace failed:", *failure_words(prepared["failures"])]),
                    {"status": prepared["status"]},
                    True,
                )
            result = await session.submit()
            lines.append(installed_words(json.loads(manifest.text)["delivered"]))
        return await self.replies.describe(session, result, lines, elicits=self.elicits)

    def _not_set_up(self, clash: AssetClash) -> Reply:
        """Setup refused before a file was written: the run waits at setup, to be resumed once the files moved."""
        run = self.run_id
        self.session = None  # resume_run picks the run up from its log and sets the workspace up again
        text = f"{clash} Run {run} waits at its setup step: resume_run {run} picks it up."
        return Reply(text, {"run": run, "status": "workspace_refused"}, is_error=True)


__all__ = ["Bridge", "Reply", "ResumeFailed", "ToolRefused"]
