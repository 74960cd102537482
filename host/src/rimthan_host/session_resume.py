"""A session's resume: a run picked up from its log, where the saved state of its last checkpoint left it.

:class:`ResumeFromLog` is :class:`~rimthan_host.session.HostSession`'s resume
half (``resume``); the session's calls, position and saving stay in
:mod:`rimthan_host.session`, what a resume reads in :mod:`rimthan_host.runlog`
and :mod:`rimthan_host.session_record`.

Before anything of the run is made current, the verifier is asked whether it
takes the log's last checkpoint (a ``continue_workflow``, nothing saved or
logged: the verifier keeps nothing per run and a token is not spent by use). A
verifier started with other checkpoint keys (another state directory: another
``--state-dir``, ``RIMTHAN_STATE_DIR`` or ``HOME``) refuses every move of the
run; the resume is then :class:`CheckpointNotHeld`, never a resume that
cannot go on. Where its answer is the run's step itself (a question asked
again: same checkpoint, same step), that answer is what the resume shows, byte
for byte, never the copy saved in the run's state file, which anyone who can
write the project's files could have edited (``saved_differs`` says whether
the two differed). Where it moves past the step (an ungated step with a next
one), the step is shown from the saved copy, as before: the verifier has no
call that shows an ungated step again without moving past it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from rimthan_workflow_registry.errors import FailureCode

from .confirmations import ConfirmedStateBook
from .file_digests import Evidence, evidence_from_json
from .positions import PositionUnknown, asks_the_verifier
from .protocol import CONTINUE, HarnessError, NotAProtocolResult, ToolCaller, ToolRefused, VerifierLost
from .results import RunResult
from .run_lock import RunLock
from .run_state import OFFER_KEY
from .runlog import RunLog
from .session_record import RunRecord, offered

# The refusals of a checkpoint the verifier cannot take: no move of the run can go on from it.
TOKEN_REFUSALS = frozenset({FailureCode.CHECKPOINT_KEY_UNKNOWN.value, FailureCode.CHECKPOINT_INVALID.value})


class CheckpointNotHeld(HarnessError):
    """The verifier refuses the log's last checkpoint of ``run`` (``refusal``): the run was not resumed."""

    def __init__(self, run: str, refusal: ToolRefused) -> None:
        super().__init__(f"the verifier refuses run {run}'s last checkpoint: {refusal}")
        self.run = run
        self.code = refusal.code
        self.said = str(refusal.error.get("message") or "")


class _Session(Protocol):
    """What of the session a resume reads and sets (:class:`~rimthan_host.session.HostSession` has it all)."""

    run_log: RunLog | None
    lock: RunLock | None
    clock: Callable[[], float]
    state: ConfirmedStateBook
    evidence: dict[str, Evidence]
    record: RunRecord
    existed_before: dict[str, bool]
    migration_offer: dict[str, Any] | None
    offer_asked: bool
    saved_differs: bool

    @property
    def step_wire(self) -> Mapping[str, Any]: ...

    def close(self) -> None: ...

    def save(self) -> None: ...

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]: ...

    call_tool: ToolCaller

    def _place(self, result: dict[str, Any]) -> None: ...


class ResumeFromLog:
    """The resume of a run from its log (mixed into :class:`~rimthan_host.session.HostSession`)."""

    async def resume(self: _Session) -> RunResult:
        """Pick a run up from its log: the last checkpoint, its saved confirmed state, and the step it is at.

        The run stays where its log ends. An ungated step is shown again as
        the verifier answers for that checkpoint where it answers with the step
        itself (a question), else from the result saved for it (in the state
        file, or the side file it names), with no move: ``continue_workflow``
        there advances past it (an owner-facing step skipped). A gated step is asked of the
        verifier, which returns that same step. A state with no result for a
        step that may be ungated (an older bridge's, or one past the limit) is
        :class:`PositionUnknown`: nothing is sent.
        """
        if self.run_log is None or self.lock is None:
            raise HarnessError("this session has no run log to resume from")
        held = self.lock.held
        self.lock.acquire()  # (RunBusy, nothing read or sent, if another session holds the run)
        try:
            return RunResult.of(await _resume(self, self.run_log))
        except BaseException:
            if not held:  # (a session that held the run before this resume keeps it)
                self.close()
            raise


async def _resume(session: _Session, run_log: RunLog) -> dict[str, Any]:
    token, saved = run_log.last_checkpoint()
    session.state = ConfirmedStateBook.from_projection(saved["confirmed_state"], session.clock)
    session.evidence = evidence_from_json(saved.get("validated", {})) or {}  # (an older bridge's state: none kept)
    session.record.checkpoints = [token]  # the log's last: what the run goes on from (the log keeps the rest)
    session.saved_differs = False
    position = saved.get("position") or run_log.side_position(token, saved)
    if position is not None:
        answer = await _taken(session, run_log.run_id, token)
        if answer is not None and _shows_again(answer, token, saved.get("step")):  # the verifier's own step
            session.saved_differs = answer.get("step") != position.get("step")
            return _restore(session, _as_entered(answer, position), saved)
        return _restore(session, {**position, "checkpoint": token}, saved)
    if not asks_the_verifier(saved):
        raise PositionUnknown(run_log.run_id, saved.get("step"))
    session._place({"checkpoint": token})
    try:  # (the verifier asked for the step: its answer says whether it takes the checkpoint)
        result = await session.call(CONTINUE, {"checkpoint": token, "confirmed_state": session.state.projection()})
    except ToolRefused as refusal:
        raise _not_held(run_log.run_id, refusal) or refusal from None
    if session.step_wire.get("id") == saved.get("step"):  # same step: existence as it was when the step began
        session.existed_before = dict(saved.get("existed_before") or {})
        session.save()
    return result


async def _taken(session: _Session, run: str, token: str) -> dict[str, Any] | None:
    """Ask the verifier whether it takes ``token``; its answer (nothing saved or logged), None on any other failure
    (a verifier that is not up or lost, another refusal): the move that meets it says it, as before."""
    try:
        return await session.call_tool(CONTINUE, {"checkpoint": token, "confirmed_state": session.state.projection()})
    except ToolRefused as refusal:
        if (not_held := _not_held(run, refusal)) is not None:
            raise not_held from None
    except (HarnessError, VerifierLost, NotAProtocolResult):
        pass
    return None


def _shows_again(answer: Mapping[str, Any], token: str, step: object) -> bool:
    """Whether the verifier's ``answer`` to ``token`` is the run's step itself, not a move past it: the same
    checkpoint (nothing issued) showing the step the state names (a question: asked again, not answered)."""
    shown = answer.get("step")
    return answer.get("checkpoint") == token and isinstance(shown, Mapping) and shown.get("id") == step


def _as_entered(answer: dict[str, Any], position: Mapping[str, Any]) -> dict[str, Any]:
    """The verifier's ``answer`` as the run was left: where the step was shown as entered (``active``, its question
    not asked yet), the same, with the verifier's step and no question (the next move asks it, as before the
    resume); where the question was asked, the answer as it is."""
    if position.get("status") != "active" or answer.get("status") != "input_required":
        return answer
    return {**answer, "status": "active", "question": None, "message": None}


def _not_held(run: str, refusal: ToolRefused) -> CheckpointNotHeld | None:
    """A refusal of the run's checkpoint as :class:`CheckpointNotHeld`; None for another refusal (the one check of
    which refusals say the verifier does not hold the checkpoint)."""
    return CheckpointNotHeld(run, refusal) if refusal.code in TOKEN_REFUSALS else None


def _restore(session: _Session, result: dict[str, Any], saved: Mapping[str, Any]) -> dict[str, Any]:
    """Make the saved result of the log's last checkpoint current, as if it had just been returned."""
    session._place(result)
    session.existed_before = dict(saved.get("existed_before") or {})
    session.record.steps_visited.append(str(result["step"]["id"]))
    # the last offer the run saw, saved with its state (an older bridge's state: the one its result held)
    session.migration_offer = saved[OFFER_KEY] if OFFER_KEY in saved else offered(result)
    session.offer_asked = session.migration_offer is not None  # none saved: not asked since this resume
    return result
