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

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from rimthan_workflow_registry.errors import FailureCode, quoted

from .asking import Asker
from .bridge_core import BridgeCore, ResumeFailed
from .bridge_migrate import MigrationMoves
from .bridge_steps import StepMoves
from .delivered import AssetClash, restore_release
from .fact_forms import Expects, expects_of_failures
from .facts import confirm_facts
from .held_facts import Holding
from .kept_copies import refused_code
from .kept_round import ROUND_KEY, restored_round
from .positions import PositionUnknown
from .project_files import ProjectFiles
from .protocol import (
    HarnessError,
    ToolRefused,
    VerifierLost,
)
from .result_parts import wires
from .results import RunResult
from .runlog import new_run_id, run_summaries
from .session import HostSession
from .session_record import Prepared
from .session_resume import CheckpointNotHeld
from .step_replies import Reply, failure_codes, missing_fields
from .words import failure_words, known_runs, then_asked

# The moves that act on the active run: in a bridge process that has had none, the project's one unfinished run.
NO_WORKFLOW = "Nothing was done: workflow is empty. Call start_run again with a workflow's name."
PICKS_UP = ("show_step", "step_done", "answer_question", "record_verdict", "migrate_run")
PICKED_UP = (
    "Picked up run {run} from its log first: this bridge process started after the run's last move (the host or "
    "the server was started again), and it is the one unfinished run here."
)

SAVED_DIFFERS = (
    "The copy of step {step} saved in .rimthan/runs/{run}.json differs from what the verifier shows for it (the "
    "copy is stale or was edited): the verifier's step is shown below, never the saved copy."
)


def names_no_workflow(workflow: object) -> bool:
    """Whether a start_run's ``workflow`` leaves the model without a name to start: none, not text, or blank."""
    return not isinstance(workflow, str) or not workflow.strip()


class Bridge(StepMoves, MigrationMoves):
    """One project, one verifier connection, at most one active run at a time."""

    async def picked_up(self, tool: str, move: Callable[[], Awaitable[Reply]]) -> Reply:
        """``move``, after resuming the project's one unfinished run when this process never had a run active.

        A host that starts the bridge again between calls (a new session, a command-line client that starts a
        server per call) then carries on as the model was told; with two unfinished runs, or the project's runs
        moved by another bridge, the move says so as before. A move it makes after the pick-up is the model's own:
        ``step`` and ``field`` still refuse one meant for another step or question."""
        if tool not in PICKS_UP or self.session is not None or self.had_run:
            return await move()
        unfinished = [r for r in run_summaries(self.project_dir) if not r.completed]
        lone = unfinished[0] if len(unfinished) == 1 and not unfinished[0].damaged else None
        if lone is None or self.lock.other_owner() is not None:  # (none, or another bridge moves the runs: said)
            return await move()
        head = PICKED_UP.format(run=lone.run_id)
        resumed = await self.resume_run(lone.run_id, head=head)  # (show_step: the resume's reply, said once)
        if resumed.is_error or self.session is None or tool == "show_step":
            return resumed
        moved = await move()
        return Reply(f"{head}\n{moved.text}", moved.data, moved.is_error)

    # -- start and resume ------------------------------------------------------------------

    async def arguments_refused(self, tool: str, arguments: Mapping[str, Any], problem: str) -> Reply:
        """A call refused for its arguments (``problem``, :func:`~rimthan_host.tools.argument_problem`); one that
        leaves the model without a workflow name names the workflows (:func:`names_no_workflow`)."""
        said = Reply(problem, {"status": "bad_arguments"}, is_error=True)
        named = arguments.get("workflow")
        return await self.offering(said) if tool == "start_run" and names_no_workflow(named) else said

    async def start_run(self, asker: Asker, workflow: str, facts: Mapping[str, Any], *, new_run: bool = False) -> Reply:
        """Start a run of ``workflow``. A refusal that leaves the model without a workflow name - none given, or
        one the verifier does not serve (``workflow_not_found``) - names the workflows it can start."""
        if names_no_workflow(workflow):  # (no name to send: the verifier would name no workflow)
            return await self.offering(Reply(NO_WORKFLOW, {"status": "bad_arguments"}, is_error=True))
        try:
            return await self._start(asker, workflow, facts, new_run=new_run)
        except ToolRefused as refused:
            if refused.code != FailureCode.WORKFLOW_NOT_FOUND.value:
                raise
            return await self.not_served("start_run", workflow, refused)

    async def _start(self, asker: Asker, workflow: str, facts: Mapping[str, Any], *, new_run: bool) -> Reply:
        busy = self._claim("start_run")
        if busy is not None:
            return busy
        unfinished = self._unfinished()
        if unfinished and not new_run:
            return self._busy(unfinished)
        expects: Expects = {}
        if facts:  # (the user confirms facts only once the workflow is known and none is missing)
            asked = await self._unlogged().requirements(workflow)  # (workflow_not_found raised as a start's)
            left = [f for f in wires(asked.failures) if set(missing_fields([f])) - set(facts)]  # (a field not given)
            if asked.status == "blocked" and left and asker.available:
                return _blocked(left, True)
            # (each field's schema, optional ones too, as the release names it; the start's expects if unread)
            expects = {**expects_of_failures(wires(asked.failures)), **await self._state_fields(asked)}
        why = f"to start {workflow}"
        undone = ("the run did not start", "not_started")
        holding = Holding(self.held, ("start", workflow))  # (a start refused keeps the person's yes: not asked again)
        confirmed = await confirm_facts(asker, facts, "start_run", undone, asked=(expects, why), holding=holding)
        if isinstance(confirmed, Reply):
            return confirmed
        by = confirmed.by
        with self._candidate(new_run_id()) as session:
            result = await session.start(workflow, confirmed.facts, by=by)
            if result.status == "blocked":
                return _blocked(wires(result.failures), asker.available)
            self.session = session
        self.held.forget()
        self.lock.note(self.run_id)
        lines = [*confirmed.said, f"Started run {self.run_id} ({by})."]
        lines += [f"Run {r.run_id} is set aside unfinished: resume_run {r.run_id} returns to it."
                  for r in unfinished if not r.damaged]  # fmt: skip
        return await self._go_on(result, lines)

    async def resume_run(self, run: str | None, *, head: str | None = None) -> Reply:
        """Make ``run`` (default the latest unfinished) the active run, from its log; ``head``: the reply's first
        line in place of "Resumed run ... from its log." (a pick-up's own)."""
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
        lines = [head or f"Resumed run {run_id} from its log."]
        lines += [
            f"Run {r.run_id} is set aside unfinished: resume_run {r.run_id} returns to it."
            for r in self._unfinished()
            if self.session is not None and r.run_id == self.run_id
        ]
        if run is None:  # (picked as the latest: the others the user may have meant)
            lines += [f"Also unfinished here: {runs[r].words()}; resume_run {r} switches to it." for r in unfinished
                      if r != run_id and (self.session is None or r != self.run_id)]  # fmt: skip
        with self._candidate(run_id) as session:
            saved = _saved_state(session)  # (read before the resume: a gated step's continue saves anew)
            try:
                result = await session.resume()  # (RunBusy, a HarnessError, if another session moves the run)
            except PositionUnknown as unknown:  # nothing was sent: the run stays where its log ends
                return position_unknown_reply(unknown)
            except CheckpointNotHeld as other_keys:  # nothing made current: the active run, if any, stays
                return not_held_reply(other_keys)
            except (HarnessError, ToolRefused, VerifierLost):
                raise  # said in words by the server, the active run untouched (a lost verifier is reconnect's)
            except Exception as exc:
                raise ResumeFailed(run_id, exc) from exc
            try:
                restored = await self._put_back(session, partial(restore_release, session.files,
                                                                 session.release_digest, run_id))  # fmt: skip
            except AssetClash as exc:  # the run stays in its log; the active run, if any, stays active
                data = {"run": run_id, "status": "workspace_refused", **refused_code(exc)}
                return Reply(exc.bridge_words, data, is_error=True)
            self.session = session
        self.lock.note(run_id)
        lines += [r.line(f"run {run_id}'s release") for r in restored]
        lines += [SAVED_DIFFERS.format(run=run_id, step=result.step_id)] if session.saved_differs else []
        session.prepared = _kept_round(session, saved)
        if session.prepared is None:
            lines += round_not_kept(self.project_dir, result, had_round=saved is not None and ROUND_KEY in saved[1])
            return await self._go_on(result, lines, facts=True)
        shown = await self._show([*lines, round_kept(result.step_id, session.prepared)])
        return replace(shown, data={**shown.data, "step": {"id": result.step_id}})


def _there(files: ProjectFiles, path: str) -> bool:
    """Whether a step's file is at ``path`` (:meth:`ProjectFiles.exists`); one it would refuse is not."""
    try:
        return files.exists(path)
    except (HarnessError, OSError):
        return False


def _saved_state(session: HostSession) -> tuple[str, dict[str, Any]] | None:
    """The log's last checkpoint and the state saved for it, None if they cannot be read (the resume says why)."""
    try:
        return session.run_log.last_checkpoint() if session.run_log is not None else None
    except (HarnessError, OSError):
        return None


def _kept_round(session: HostSession, saved: tuple[str, dict[str, Any]] | None) -> Prepared | None:
    """The validation round saved at the checkpoint the run resumed at, if the run is still at that very checkpoint
    and nothing the round judged changed (:mod:`~rimthan_host.kept_round`); else None."""
    step = session.position.step_wire
    if saved is None or saved[0] != session.checkpoint or not (step.get("gated") and step.get("validators")):
        return None
    session.prepared = restored_round(saved[1], session.files, session.release_digest, step, session.read_outputs)
    if session.prepared is None:
        return None
    try:
        session.save()  # (kept again with its checkpoint's state: the resume's continue saved that without it)
    except (HarnessError, OSError):
        return None
    return session.prepared


def round_kept(step: object, prepared: Prepared) -> str:
    """A resumed step whose round was kept: which verdicts stand, and that only the validators waiting run."""
    said = ", ".join(f"{key.split('@')[0]} {outcome}" for key, (outcome, _) in prepared.verdicts.items())
    if not said:
        return (
            f"The validation round of step {step} opened before the run was picked up here is kept: nothing it "
            "judges changed (the step's files, the validators' instructions and subagent files). Run the validators "
            "it names; the last verdict submits the step."
        )
    return (
        f"Verdicts recorded for step {step} before the run was picked up here are kept ({said}): nothing they "
        "judged changed (the step's files, the validators' instructions and subagent files). Run only the "
        "validators still waiting; the last verdict submits the step."
    )


def _blocked(failures: Sequence[Mapping[str, Any]], elicits: bool) -> Reply:
    """The run did not start: what the verifier needs, and the call to make once the user gave it (``elicits``:
    the client of the call can ask the user, who then confirms the facts in it)."""
    lines = ["The run did not start. The verifier needs:", *failure_words(failures)]
    lines.append(f"Ask the user for what is missing and call start_run again with every fact{then_asked(elicits)}.")
    data = {"status": "blocked", "failures": failure_codes(failures), "needs": missing_fields(failures)}
    return Reply("\n".join(lines), data, is_error=True)


def round_not_kept(project: Path, result: RunResult, *, had_round: bool = True) -> list[str]:
    """A resumed step with validators whose files are there: verdicts recorded before the resume were not kept (a
    round lives in the bridge that opened it), so its files are checked again and every validator runs again.
    ``had_round`` false: the run's state kept no round at this checkpoint (the files are there from before, e.g.
    written for the release a migration left), so no verdicts are said to have been recorded."""
    step = result.step_wire
    written = any(_there(ProjectFiles(project), str(o.get("path"))) for o in step.get("outputs") or [])
    if not (step.get("gated") and step.get("validators") and written):
        return []
    if not had_round:
        return [
            f"Files of step {step.get('id')} are in the project, but no validation of them at this step was kept: "
            "call step_done to have them checked, then run every validator it names."
        ]
    return [
        f"Verdicts recorded for step {step.get('id')} before the run was picked up here are not kept: call step_done "
        "to have its files checked again, then run every validator it names (those that passed too)."
    ]


def position_unknown_reply(unknown: PositionUnknown) -> Reply:
    """A resume refused because the run's state keeps no result for its step: what happened, what the owner can do."""
    run, step = unknown.run, unknown.step
    text = (
        f"Run {run} was not resumed ({FailureCode.RUN_POSITION_UNKNOWN.value}): its log ends at step {step}, and its "
        f"state file (.rimthan/runs/{run}.json) keeps no record of what that step showed (it was written by an "
        "older bridge, or that record was lost). Asking the verifier would move the run past that step without the "
        "owner seeing it, so nothing was sent and the run stays where it is.\n"
        f"next: tell the user that run {run} stopped at step {step} and cannot be picked up safely; they can restore "
        f".rimthan/runs/{run}.json (with the files next to it) from a backup and call resume_run {run} again, or "
        "call start_run with new_run true to start a new run."
    )
    code = FailureCode.RUN_POSITION_UNKNOWN.value
    data = {"run": run, "status": "resume_refused", "code": code, "step": {"id": step}}
    return Reply(text, data, is_error=True)


def not_held_reply(refused: CheckpointNotHeld) -> Reply:
    """A resume refused because the verifier does not take the run's last checkpoint (other checkpoint keys)."""
    run = refused.run
    text = (
        f"Run {run} was not resumed ({refused.code}): the verifier this bridge started refuses the run's last "
        f"checkpoint ({refused.said}), so no move of the run could go on; it holds other checkpoint keys than the "
        "run was made with (its state directory differs: another --state-dir, RIMTHAN_STATE_DIR or HOME). Nothing "
        "was sent or recorded, and the run stays where its log ends.\n"
        f"next: tell the user to start the bridge again with the state directory run {run} was made with (the same "
        f"--state-dir, RIMTHAN_STATE_DIR or HOME), then call resume_run {run}; or call start_run with new_run true "
        "to start a new run."
    )
    return Reply(text, {"run": run, "status": "resume_refused", "code": refused.code}, is_error=True)


__all__ = ["Bridge", "BridgeCore", "Reply", "ResumeFailed", "ToolRefused"]
