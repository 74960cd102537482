"""When the verifier connection is gone mid-move: restart the child once, resume the run from its log, say so.

The move that was cut off may have left the session half-way (a checkpoint
the log never got), so the session is dropped and the run goes on from its
log and the state saved for the log's last checkpoint - the same path as
``resume_run`` after a crash. A verifier at a URL is not the bridge's to
restart: the model is told it is unreachable and how to go on once it is back.
"""

from __future__ import annotations

from .bridge import Bridge, Reply
from .link import VerifierLink, VerifierLost


def logged_run(bridge: Bridge) -> str | None:
    """The active run, if its log exists (a run the verifier never started has nothing to resume)."""
    log = bridge.session.run_log if bridge.session is not None else None
    return log.run_id if log is not None and log.log_path.exists() else None


async def recover(bridge: Bridge, link: VerifierLink, tool: str, lost: VerifierLost) -> Reply:
    """Answer a move whose verifier connection was lost: reconnected and resumed, or how to retry."""
    run = logged_run(bridge)
    bridge.session = None
    retry = f"call resume_run {run} to go on from the run log" if run else f"call {tool} again"
    code = {"code": lost.code.value}
    if link.url is not None:
        text = (
            f"The verifier at {link.url} is unreachable ({lost.code.value}: {lost}); {tool} did not go through. "
            f"Once the verifier is running again, {retry} (the bridge reconnects on that call)."
        )
        return Reply(text, {"status": "verifier_unreachable", "run": run, **code}, True)
    try:
        await link.restart()
        if run is None:
            text = f"The verifier had stopped ({lost.code.value}); the bridge restarted it and reconnected. {tool} "
            text += f"did not go through: {retry}."
            return Reply(text, {"status": "reconnected", **code}, True)
        resumed = await bridge.resume_run(run)
    except VerifierLost as again:
        text = f"The verifier stopped during {tool} and did not come back after a restart ({lost.code.value}: "
        text += f"{again}); {retry}."
        return Reply(text, {"status": "verifier_unreachable", "run": run, **code}, True)
    head = (
        f"The verifier had stopped during {tool}; the bridge restarted it and reconnected ({lost.code.value}). "
        f"Your {tool} call did not go through: make it again if it still fits where the run is (below)."
    )
    return Reply(f"{head}\n{resumed.text}", {**code, **resumed.data, "reconnected": True}, True)
