"""The bridge's shared core: the active run, the project's lock, and what every move ends with.

Every move of :class:`~rimthan_host.bridge.Bridge` goes through here: the run it acts on (or the words
saying there is none), the setup step done by the bridge itself, an unexpected failure in one sentence.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

from . import kept_copies
from .audit_command import PROGRAM
from .delivered import AssetClash
from .fact_forms import Expects
from .held_facts import HeldFacts
from .offered import OfferedList, offered_workflows
from .outputs import RefusedFiles
from .protocol import (
    SETUP_STEP,
    HostProfile,
    MetaLister,
    ResourceReader,
    ToolCaller,
    ToolRefused,
)
from .results import RunResult, ValidationRound
from .runlog import RunLog, RunSummary, run_summaries
from .session import HostSession
from .state_schema import state_fields
from .step_replies import Reply, StepReplies, files_refused, validators_waiting, where
from .unserved import served_workflows, unserved_reply
from .words import (
    busy_words,
    failed_words,
    installed_words,
    known_runs,
    no_run_words,
)
from .workspace_lock import BY_BRIDGE, REFUSED_MEANWHILE, WorkspaceBusy, WorkspaceLock
from .write_targets import step_files_refusal

T = TypeVar("T")


def verifier_refused(tool: str, code: str, message: str) -> Reply:
    """The verifier refused ``tool``'s call (``code``: ``message``), in its words: nothing changed, call it again."""
    words = f"The verifier refused: {code}: {message}\nNothing changed; fix what it names and call {tool} again."
    return Reply(words, {"status": "refused", "refused": code}, True)


def _with_offered(reply: Reply, offered: OfferedList) -> Reply:
    if not offered.words():
        return reply
    return Reply(f"{reply.text}\n{offered.words()}", {**reply.data, "workflows": offered.names()}, reply.is_error)


class ResumeFailed(Exception):
    """Picking ``run`` up from its log failed unexpectedly (``cause``); the active run was not touched."""

    def __init__(self, run: str, cause: Exception) -> None:
        super().__init__(f"resuming run {run} failed: {cause!r}")
        self.run = run
        self.cause = cause


class BridgeCore:
    """One project, one verifier connection, at most one active run at a time."""

    def __init__(
        self,
        call: ToolCaller,
        *,
        project_dir: Path,
        host: HostProfile | None = None,
        clock: Callable[[], float] = time.time,
        read_resource: ResourceReader | None = None,
        verifier_args: Sequence[str] | None = (),
        verifier_program: str = PROGRAM,
        list_metas: MetaLister | None = None,
    ) -> None:
        self.call = call
        self.list_metas = list_metas  # the verifier's resource listing: the workflows a run may start
        self.replies = StepReplies(read_resource, verifier_args, verifier_program)
        self.project_dir = Path(project_dir)
        self.host = host or HostProfile()
        self.clock = clock
        self._session: HostSession | None = None
        self.had_run = False  # whether a run was ever active in this process (a fresh one picks its run up)
        self.elicits = False  # whether the client of the current call can ask the person directly
        self.lock = WorkspaceLock(self.project_dir)  # held while this bridge's run is unfinished (see settle)
        self.refused_files = RefusedFiles()  # the bytes of the files the last check refused
        self._state_schemas: dict[tuple[str, str, str], Expects] = {}  # per release digest: it never changes
        self.held = HeldFacts()  # what the person confirmed in a form for a move that did not happen (this process)

    @property
    def session(self) -> HostSession | None:
        """The active run's session: it holds the run's lock (:mod:`rimthan_host.run_lock`) while unfinished."""
        return self._session

    @session.setter
    def session(self, session: HostSession | None) -> None:
        """Make ``session`` the active one; the one it replaces lets go of its run (another may resume it)."""
        if self._session is not None and self._session is not session:
            self._session.close()
        self._session = session
        self.had_run = self.had_run or session is not None

    @contextmanager
    def _candidate(self, run_id: str) -> Iterator[HostSession]:
        """A new session for ``run_id``; closed (its run's lock let go) unless it became the active one."""
        session = self._new_session(run_id)
        try:
            yield session
        finally:
            if self._session is not session:
                session.close()

    def _unlogged(self) -> HostSession:
        """A session with no run (no log, no lock, nothing written): for a question that starts nothing."""
        return HostSession(self.call, project_dir=self.project_dir, host=self.host, clock=self.clock)

    def _new_session(self, run_id: str) -> HostSession:
        log = RunLog(self.project_dir, run_id)
        return HostSession(
            self.call, project_dir=self.project_dir, host=self.host, clock=self.clock, run_log=log, holder=BY_BRIDGE
        )

    @property
    def run_id(self) -> str:
        assert self.session is not None and self.session.run_log is not None
        return self.session.run_log.run_id

    # -- steps -----------------------------------------------------------------------------

    async def show_step(self) -> Reply:
        return await self._show([])

    async def _show(self, lines: list[str]) -> Reply:
        if self.session is None:  # (a state, not a failure: the reply is no error, for show_step)
            return await self.offering(replace(self._no_run(), is_error=False))
        session = self.session
        if session.prepared is not None and session.prepared.pending:
            return validators_waiting(session, [*lines, where(session)])
        return await self.replies.describe(session, session.position, lines, elicits=self.elicits, facts=True)

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
        run = log.run_id if log is not None and log.logged() else None
        self.session = None
        return Reply(failed_words(tool, exc, self.project_dir, run), {"status": "bridge_error"}, True)

    def settle(self) -> None:
        """After each call: let another bridge take the project's runs once this one has no unfinished run.

        A run at a step whose files the bridge does not use (:func:`step_files_refusal`) is set aside as a
        refused setup is: ``resume_run`` picks it up from its log and asks the verifier for the step again."""
        session = self.session
        unfinished = session is not None and session.position.status != "completed"
        if unfinished and session is not None and step_files_refusal(session.host, session.position.step_wire):
            self.session = None
        if self.session is None or self.session.position.status == "completed":
            self.lock.release()

    def _claim(self, tool: str) -> Reply | None:
        """Hold the project's lock before a move that picks a run (None), or the refusal naming its owner."""
        try:
            self.lock.acquire()
        except WorkspaceBusy as busy:
            data = {"status": "workspace_busy", "owner_pid": busy.owner.pid, "owner_run": busy.owner.run}
            return Reply(busy.words(tool), data, is_error=True)
        return None

    async def _put_back(self, session: HostSession, restore: Callable[[], T]) -> T:
        """``restore()`` (a put-back of :mod:`.delivered`); a kept copy of a text it needs that is gone is fetched
        again from the verifier, checked against the digest delivered (:mod:`.kept_copies`)."""
        return await kept_copies.restored(self.replies.read_resource, session.files, session.release_digest, restore)

    async def _state_fields(self, result: RunResult) -> Expects:
        """Each field of the confirmed-state schema of ``result``'s workflow, as its release names it: what a
        fact's own form offers (:mod:`.state_schema`)."""
        key = (result.manifest_digest, result.workflow, result.workflow_version)
        if key not in self._state_schemas:  # (a release is immutable: read and parsed once, as its digest names it)
            fields = await state_fields(self.replies.read_resource, *key)
            if not fields:
                return fields  # (none read, perhaps for now: asked again next time)
            self._state_schemas[key] = fields
        return self._state_schemas[key]

    def _running(self) -> HostSession | Reply:
        """The active run, if it can still move; else words saying how to get one."""
        if self.session is None:
            return self._no_run()
        if self.session.position.status == "completed":
            runs = known_runs(run_summaries(self.project_dir))
            return Reply(
                f"Run {self.run_id} is complete; nothing more to do in it. {runs} Call start_run for a new run.",
                {"run": self.run_id, "status": "completed"},
                is_error=True,
            )
        return self.session

    async def offering(self, reply: Reply) -> Reply:
        """``reply`` with the workflows the verifier offers for start_run named (:mod:`.offered`), if it names any."""
        return _with_offered(reply, await offered_workflows(self.list_metas))

    async def not_served(self, tool: str, asked: str, refused: ToolRefused) -> Reply:
        """The verifier's ``workflow_not_found`` of the workflow ``asked``, in the bridge's words (:mod:`.unserved`):
        the workflows its details name, each once; the bridge's listing (kept) when they cannot be read."""
        listing = await offered_workflows(self.list_metas)
        return unserved_reply(tool, asked, served_workflows(refused.error.get("details")), listing)

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
        return self.session.release_id or "release"

    async def _go_on(self, result: RunResult, lines: list[str], *, facts: bool = False) -> Reply:
        """After a move: do the setup step ourselves, then describe where the run is (``facts``: with the run's
        confirmed facts, for a model picking the run up)."""
        session = self.session
        assert session is not None
        if result.status in ("active", "advanced") and result.step_id == SETUP_STEP:
            try:
                manifest = session.set_up_workspace()
            except AssetClash as exc:
                return self._not_set_up(exc)
            prepared = await session.prepare([manifest])
            if not prepared.ready:
                return self._setup_refused(session, prepared)
            result = await session.submit()
            lines.append(installed_words(json.loads(manifest.text)["delivered"]))
        return await self.replies.describe(session, result, lines, elicits=self.elicits, facts=facts)

    def _setup_refused(self, session: HostSession, refused: ValidationRound) -> Reply:
        """The verifier refused the workspace the bridge set up: the run waits at setup, to be resumed once fixed."""
        run = self.run_id
        todo = (
            f"next: tell the user what the verifier refused; run {run} waits at its setup step, and once that is "
            f"fixed, call resume_run {run}, which sets the workspace up again."
        )
        said = files_refused(session, refused, ["Setting up the workspace failed."], todo, {})
        self.session = None  # resume_run picks the run up from its log and sets the workspace up again
        return said

    def _not_set_up(self, clash: AssetClash) -> Reply:
        """Setup refused before a file was written: the run waits at setup, to be resumed once the files moved."""
        run = self.run_id
        self.session = None  # resume_run picks the run up from its log and sets the workspace up again
        text = f"{clash.bridge_words} Run {run} waits at its setup step: resume_run {run} picks it up."
        return Reply(text, {"run": run, "status": "workspace_refused"}, is_error=True)
