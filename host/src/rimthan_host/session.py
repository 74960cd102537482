"""The host session: one run's protocol moves, with the state, files and log they need.

A :class:`HostSession` holds everything the verifier asks the host to carry
between calls - the current checkpoint, the confirmed state, the validation
bundle - and turns plain moves (start, confirm, answer, attest the step's
files, submit verdicts, migrate, resume) into the four tools' exact
arguments. The scripted harness (:mod:`rimthan_host.harness`) and the MCP
bridge (:mod:`rimthan_host.bridge`) both drive runs through it: one
implementation of the host side. Every checkpoint is appended to the run log
as it is issued, and the session takes a move only once its files record it.
A session with a run log holds the run's lock (:mod:`rimthan_host.run_lock`)
from its start or resume until it is closed (``close``, or ``with session:``)
or the run completes: another session on that run is refused meanwhile.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .confirmations import BY_SCRIPT, ConfirmedStateBook, carried_values
from .file_digests import Evidence
from .kept_round import round_json
from .project_files import ProjectFiles, WrittenFile
from .protocol import (
    CONTINUE,
    PREPARE,
    SETUP_STEP,
    START,
    HarnessError,
    HostProfile,
    MoveNotRecorded,
    ToolCaller,
    failure_lines,
)
from .result_parts import Step, StepOutput
from .results import RunResult
from .run_lock import RunLock
from .runlog import RunLog
from .session_record import EventSink as EventSink  # (re-exported: the harness's and the bridge's names)
from .session_record import HarnessEvent as HarnessEvent
from .session_record import Prepared as Prepared
from .session_record import RunRecord as RunRecord
from .session_record import SavedMove, offered, resume_state
from .session_resume import ResumeFromLog
from .session_round import RoundMoves
from .workspace import set_up_workspace
from .workspace_lock import BY_LIBRARY
from .write_targets import check_outputs


class HostSession(ResumeFromLog, RoundMoves):
    """One run, in one project directory, through one :data:`ToolCaller`."""

    def __init__(
        self,
        call: ToolCaller,
        *,
        project_dir: Path,
        host: HostProfile | None = None,
        clock: Callable[[], float] = time.time,
        run_log: RunLog | None = None,
        on_event: EventSink | None = None,
        holder: str = BY_LIBRARY,
    ) -> None:
        self.call_tool = call
        self.lock = RunLock(run_log, holder) if run_log is not None else None
        self.files = ProjectFiles(Path(project_dir))
        self.host = host or HostProfile()
        self.clock = clock
        self.state = ConfirmedStateBook(clock)
        self.record = RunRecord()
        self.run_log = run_log
        self._result: dict[str, Any] = {}  # the verifier's result that placed the run, as sent (saved, resumed)
        self._position: RunResult | None = None  # ``_result`` typed, built once as it is placed (see ``_place``)
        self.prepared: Prepared | None = None
        self.existed_before: dict[str, bool] = {}
        self.evidence: dict[str, Evidence] = {}  # every file of this run the verifier accepted, kept across a resume
        self.migration_offer: dict[str, Any] | None = None  # the verifier's latest unconfirmed preview (saved)
        self.offer_asked = False  # a result since start or resume said whether one is offered
        self.saved_differs = False  # the last resume's saved step was not the one the verifier showed (stale, edited)
        self.blocked_start: RunResult | None = None  # a start the verifier answered blocked: nothing started
        self._emit: EventSink = on_event or (lambda event: None)

    @property
    def project_dir(self) -> Path:
        return self.files.root

    def close(self) -> None:
        """Let go of the run: another session (this process or another) may resume it from its log."""
        if self.lock is not None:
            self.lock.release()

    def __enter__(self) -> HostSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- calls ----------------------------------------------------------------------------

    async def call(
        self,
        tool: str,
        arguments: dict[str, Any],
        *,
        proposed: ConfirmedStateBook | None = None,
        accepted: Sequence[WrittenFile] = (),
        probe: str | None = None,
    ) -> dict[str, Any]:
        """Call a tool; save the resume state and log a new checkpoint; only then make the result current.

        ``proposed``: the confirmed state the arguments propose, taken unless
        the verifier answers ``blocked``. ``accepted``: the files a submitted
        round attested, evidence from this move on unless the verifier refused
        the round (``validation_failed``). ``probe``: the release of a preview
        sent only to learn its offer (:meth:`_record_call`). If saving or logging fails
        (:class:`~rimthan_host.protocol.MoveNotRecorded` for an OSError,
        :class:`~rimthan_host.runlog.StateTooLarge`), the session stays where
        the log is - its last checkpoint and that checkpoint's state - and the
        run goes on from there, as a resumed host would: the verifier's tokens
        are not spent by use, so the logged checkpoint still takes the move.
        """
        if self.lock is not None:
            self.lock.ensure()  # (RunBusy: another holds the run; RunLockLost: the lock file deleted or replaced)
        result = await self.call_tool(tool, arguments)
        state = proposed if proposed is not None and result["status"] != "blocked" else self.state
        step = (result.get("step") or {}).get("id")
        new_step = bool(step) and (not self.record.steps_visited or self.record.steps_visited[-1] != step)
        existed = self._existence(result["step"]) if new_step else self.existed_before
        position = result if result.get("step") or result["status"] == "completed" else self._result
        offer = offered(result) if tool != PREPARE else self.migration_offer  # (prepare's result never says one)
        same = tool != PREPARE and result.get("checkpoint") in (None, self._result.get("checkpoint"))
        # (a round lives at its checkpoint)
        kept = round_json(self.prepared, str(self.step_wire.get("id"))) if same else {}
        saved = SavedMove(state, position, existed, self._evidence(result, accepted), offer, kept)
        try:
            self._log(result.get("checkpoint"), saved)
        except OSError as exc:
            raise MoveNotRecorded(tool, exc) from exc
        self._take(tool, result, saved, step if new_step else None)
        self._record_call(tool, result, probe)
        return result

    def _take(self, tool: str, result: dict[str, Any], saved: SavedMove, new_step: str | None) -> None:
        """Make a logged move current: its state, position, outputs and offer."""
        self.state, self.existed_before = saved.state, saved.existed
        self._place(saved.position)
        self.evidence = saved.evidence
        if new_step is not None:
            self.prepared = None
            self.record.steps_visited.append(new_step)
        if result["status"] == "completed":
            self.record.final = result
            self.close()  # a completed run moves no more: nothing left to hold
        self.offer_asked = self.offer_asked or tool != PREPARE  # (start, continue, submit say whether one is)
        self.migration_offer = saved.offer

    def _record_call(self, tool: str, result: Mapping[str, Any], probe: str | None) -> None:
        """What the record and events say of a call: the run's status line and a ``call`` event; for a probe (a
        preview the host sent to learn an offer, which no one asked for), a ``probe`` line and event instead."""
        status, step = result["status"], (result.get("step") or {}).get("id")
        if probe is not None:
            self.record.probes.append((probe, status))
            learned = "offer learned" if offered(result) is not None else "no offer learned"
            said = f"asked the verifier what {probe} needs (a preview with no values) -> {status}, {learned}"
            self._emit(HarnessEvent("probe", said, {"tool": tool, "release": probe, "result": result}))
            return
        self.record.statuses.append((tool, status, step))
        said = f"{tool} -> {status}" + (f" [{step}]" if step else "")
        self._emit(HarnessEvent("call", said, {"tool": tool, "result": result}))

    def _log(self, token: str | None, saved: SavedMove) -> None:
        """Save the resume state for ``token``, then log ``token`` if it is new (in that order: see runlog)."""
        self._save(token, saved)
        if token and (not self.record.checkpoints or self.record.checkpoints[-1] != token):
            if self.run_log is not None:
                self.run_log.append(token)
            self.record.checkpoints.append(token)

    def _evidence(self, result: Mapping[str, Any], accepted: Sequence[WrittenFile]) -> dict[str, Evidence]:
        """The run's evidence after a move: the files of a round the verifier took join it, none it refused."""
        if not accepted or result["status"] == "validation_failed":
            return self.evidence
        return {**self.evidence, **{a.artifact_id: Evidence(a.artifact_id, a.path, a.sha256) for a in accepted}}

    def _existence(self, step: Mapping[str, Any]) -> dict[str, bool]:
        """Which outputs exist as a step begins: an attestation says ``created`` or ``replaced`` from this."""
        return {o["path"]: self.files.exists(o["path"]) for o in step.get("outputs") or []}

    @property
    def checkpoint(self) -> str:
        token = self._result.get("checkpoint")
        if not token:
            raise self._no_step()
        return str(token)

    @property
    def release_digest(self) -> str:
        """The manifest digest of the run's release, as the verifier's last result names it."""
        return str((self._result.get("release") or {}).get("manifest_digest") or "")

    @property
    def release_id(self) -> str:
        """The id of the run's release (``research-decision@1.3.0``), as the verifier's last result names it."""
        return str((self._result.get("release") or {}).get("id") or "")

    @property
    def position(self) -> RunResult:
        """Where the run is: the last result that placed it (at a step, or completed); HarnessError before one."""
        if self._position is None:
            raise self._no_step()
        return self._position

    def _place(self, result: dict[str, Any]) -> None:
        """Make ``result`` the one that places the run, typed once here (``position`` is read often)."""
        if result is not self._result:
            self._position = RunResult.of(result) if "status" in result else None
        self._result = result

    @property
    def step(self) -> Step | None:
        """The step the run is at, as the verifier's last result describes it (None before there is one)."""
        wire = self.step_wire
        return Step.of(wire) if wire else None

    @property
    def step_wire(self) -> Mapping[str, Any]:
        """That step as the verifier sent it (empty before there is one)."""
        return self._result.get("step") or {}

    def _at_step(self) -> Mapping[str, Any]:
        """The step the run is at; :class:`HarnessError` saying why there is none (a blocked start: what it lacks)."""
        if self.step_wire.get("id"):
            return self.step_wire
        raise self._no_step()

    def _no_step(self) -> HarnessError:
        """Why no run is at a step here: a start the verifier answered blocked (what it lacks), or none made."""
        if self.blocked_start is None:
            return HarnessError("no run is in progress here: start or resume one first")
        why = failure_lines(self.blocked_start.failures, self.blocked_start.message)
        return HarnessError(f"the run did not start (the verifier answered blocked: {why}); confirm what it names "
                            "and start again")  # fmt: skip

    # -- start, continue, answer ----------------------------------------------------------

    async def start(
        self, workflow: str, values: Mapping[str, Any], *, workflow_version: str | None = None, by: str = BY_SCRIPT
    ) -> RunResult:
        """Confirm ``values`` and start ``workflow`` (:class:`~rimthan_host.run_lock.RunBusy` if another holds it)."""
        self._hold()
        for name, value in values.items():
            self.state.confirm(name, value, by)
        started = RunResult.of(await self.call(START, self._start_arguments(workflow, self.state, workflow_version)))
        self.blocked_start = started if started.status == "blocked" else None
        return started

    async def newest_version(self, workflow: str) -> str:
        """The version of ``workflow`` a start without one starts (the verifier's answer to a start with no facts:
        ``blocked``, naming it, or ``active`` for a workflow that requires no facts; nothing is logged). A refusal
        such as ``workflow_not_found`` is raised as the start's would be."""
        asked = await self.requirements(workflow)
        if asked.status not in ("blocked", "active") or not asked.workflow_version:
            why = failure_lines(asked.failures, asked.message)
            raise HarnessError(f"a start of {workflow} with no facts did not name its version: {why}")
        return asked.workflow_version

    async def requirements(self, workflow: str) -> RunResult:
        """The verifier's answer to a start of ``workflow`` with no facts: ``blocked``, naming the version and every
        fact it needs (``active`` if it needs none); nothing is logged. A refusal (``workflow_not_found``) is raised
        as a start's."""
        self._hold()
        empty = ConfirmedStateBook(self.clock)
        return RunResult.of(await self.call_tool(START, self._start_arguments(workflow, empty, None)))

    def _hold(self) -> None:
        """Hold the run's lock: :class:`~rimthan_host.run_lock.RunBusy`, before anything is sent, if another does."""
        if self.lock is not None:
            self.lock.acquire()

    def _start_arguments(
        self, workflow: str, state: ConfirmedStateBook, workflow_version: str | None
    ) -> dict[str, Any]:
        """``start_workflow``'s arguments: the run's workflow (a version, if one is asked for), ``state`` and host."""
        arguments = {"workflow": workflow, "confirmed_state": state.projection(), "host": self.host.to_json()}
        return arguments if workflow_version is None else {**arguments, "workflow_version": workflow_version}

    async def advance(self, updates: Mapping[str, Any] | None = None, *, by: str = BY_SCRIPT) -> RunResult:
        """``continue_workflow`` from the current checkpoint, with confirmed ``updates`` (answers) if any.

        The updates are taken into the confirmed state only if the verifier
        takes them (not ``blocked``) and the move is logged.
        """
        arguments: dict[str, Any] = {"checkpoint": self.checkpoint, "confirmed_state": self.state.projection()}
        proposed = None
        if updates:
            proposed = ConfirmedStateBook.from_projection(self.state.projection(), self.clock)
            for name, value in updates.items():
                proposed.confirm(name, value, by)
                self._emit(HarnessEvent("confirm", f"user confirmed {name} ({by})", {"field": name}))
            arguments["next_confirmed_state"] = proposed.projection()
        return RunResult.of(await self.call(CONTINUE, arguments, proposed=proposed))

    # -- gated steps ----------------------------------------------------------------------

    def set_up_workspace(self) -> WrittenFile:
        """The setup step's output: deliver every asset and write the workspace manifest."""
        if self._at_step().get("id") != SETUP_STEP:
            raise HarnessError(f"the current step is {self.step_wire.get('id')}, not {SETUP_STEP}")

        def delivered(entry: Mapping[str, Any]) -> None:
            self._emit(HarnessEvent("deliver", f"delivered {entry['kind']} {entry['asset']} -> {entry['path']}"))

        written = set_up_workspace(self.files, self.step_wire, self.host, delivered, release=self.release_digest)
        self._keep(written)
        return written

    def write_output(self, output: StepOutput | Mapping[str, Any], text: str) -> WrittenFile:
        """Write one declared output (a :class:`~rimthan_host.result_parts.StepOutput` of the step's ``outputs``, or
        its JSON) and attest it; :class:`StepFilesRefused`, before anything is written, if the host's repository
        policy does not let it write the step's files (or one is a file of the host's own), in the library's words
        (:func:`~rimthan_host.write_targets.outputs_refusal`)."""
        output = output.wire if isinstance(output, StepOutput) else output
        step = self._at_step()
        check_outputs(self.host, [*(step.get("outputs") or []), output], str(step.get("id")))
        written = self.files.write(output["id"], output["path"], output["media_type"], text)
        self._keep(written)
        return written

    def read_outputs(self, read: Mapping[str, bytes] | None = None) -> list[WrittenFile]:
        """Attest the current step's declared outputs as they are on disk (written by someone else); refused
        before anything is read as :meth:`write_output` refuses them. ``read``: their bytes as just read, by path
        (``outputs.read_step_files``), attested as they are, not read again."""
        outputs = self._at_step().get("outputs") or []
        check_outputs(self.host, outputs, str(self.step_wire.get("id")))
        if read is None:
            found = {o["path"]: self.files.read_written(o["path"], max_bytes=int(o["max_bytes"])) for o in outputs}
            read = {path: data for path, data in found.items() if data is not None}
        missing = [o["path"] for o in outputs if o["path"] not in read]
        if missing:
            raise HarnessError("not written yet: " + ", ".join(missing))
        out = []
        for output in outputs:
            path = output["path"]
            written = self.files.attested(
                output["id"], path, output["media_type"], read[path], existed_before=self._existed(path)
            )
            self._keep(written)
            out.append(written)
        return out

    def _existed(self, path: str) -> bool:
        return self.existed_before.get(path, False)

    def _keep(self, written: WrittenFile) -> None:
        self.existed_before[written.path] = True  # a later attempt replaces what this one attested
        self.record.written[written.artifact_id] = written  # (evidence once the verifier takes it: submit)
        self._emit(HarnessEvent("write", f"wrote {written.path} ({written.size} bytes, {written.write})"))

    # -- migration ------------------------------------------------------------------------

    async def migrate(
        self,
        target_release: str,
        target_values: Mapping[str, Any],
        *,
        confirm: bool,
        by: str = BY_SCRIPT,
        probe: bool = False,
    ) -> RunResult:
        """Preview (``confirm=False``) or perform a migration; every target field is confirmed afresh.

        Only the fields the target's state has are sent, as the verifier's offer of ``target_release`` names them
        (:func:`~rimthan_host.confirmations.carried_values`): a value of a field the target dropped stays behind.
        ``probe``: a preview sent only to learn the offer (:func:`~rimthan_host.migration_values.learn_offer`),
        no one's call: a ``probe`` event and ``record.probes`` line, not a ``call``, ``migrate`` or status line.
        """
        prior = self.state.projection()
        target = ConfirmedStateBook(self.clock)
        for name, value in carried_values(target_values, self.migration_offer, target_release).items():
            target.confirm(name, value, by)
        arguments = {
            "checkpoint": self.checkpoint,
            "confirmed_state": prior,
            "migration": {
                "target_release": target_release,
                "confirmed_state": target.projection(),
                "host": self.host.to_json(),
                "confirm": confirm,
            },
        }
        migrated = await self.call(
            CONTINUE, arguments, proposed=target if confirm else None, probe=target_release if probe else None
        )
        if not probe:
            said = f"migration to {target_release}: {migrated['status']}"
            self._emit(HarnessEvent("migrate", said, {"preview": migrated.get("migration")}))
        return RunResult.of(migrated)

    # -- saving (the resume: session_resume) ----------------------------------------------

    def save(self, token: str | None = None) -> None:
        """Save the resume state for ``token`` (default the last logged checkpoint) next to the log.

        Nothing for a run the verifier never started. The state of the log's
        last line is kept alongside until ``token`` is logged too. A prepared
        round is kept with it (:mod:`rimthan_host.kept_round`).
        """
        kept = round_json(self.prepared, str(self.step_wire.get("id")))
        self._save(token, SavedMove(self.state, self._result, self.existed_before, self.evidence, self.migration_offer,
                                    kept))  # fmt: skip

    def _save(self, token: str | None, saved: SavedMove) -> None:
        logged = self.record.checkpoints[-1] if self.record.checkpoints else None
        token = token or logged
        if self.run_log is None or token is None:
            return
        self.run_log.save_state(token, resume_state(self.run_log.run_id, saved), logged=logged)
