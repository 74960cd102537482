"""When the verifier connection is gone mid-move: restart the child once, resume the run from its log, say so.

The move that was cut off may have left the session half-way (a checkpoint
the log never got), so the session is dropped and the run goes on from its
log and the state saved for the log's last checkpoint - the same path as
``resume_run`` after a crash; if that resume is refused (``run_position_unknown``...), the refusal is the
reply, its code the one the words and the data give. A verifier at a URL is not the bridge's to
restart: the model is told it is unreachable and how to go on once it is back.
"""

from __future__ import annotations

from .bridge import Bridge, Reply
from .link import VerifierLink, VerifierLost


def logged_run(bridge: Bridge) -> str | None:
    """The active run, if its log exists (a run the verifier never started has nothing to resume)."""
    log = bridge.session.run_log if bridge.session is not None else None
    return log.run_id if log is not None and log.logged() else None


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
    if bridge.session is None:
        return resume_refused(tool, lost, resumed)
    head = (
        f"The verifier had stopped during {tool}; the bridge restarted it and reconnected ({lost.code.value}). "
        f"Your {tool} call did not go through: {_again(tool)}"
    )
    return Reply(f"{head}\n{resumed.text}", {**code, **resumed.data, "reconnected": True}, True)


def _again(tool: str) -> str:
    """What to do with the call that was lost: a verdict's round went with the session, so not the verdict again."""
    if tool == "record_verdict":  # (the run is picked up again with no round open: a verdict re-sent is refused)
        return "its validation round ended with the verifier, so do not send the verdict again: go on as below."
    return "make it again if it still fits where the run is (below)."


def resume_refused(tool: str, lost: VerifierLost, refusal: Reply) -> Reply:
    """The verifier restarted, but the resume after it was refused (no run is active): the refusal is what to act on.

    Its first line names the refusal's code, the code its data gives (``verifier_lost`` only for a refusal that has
    none), and says the verifier was restarted; its ``next:`` is the refusal's."""
    said = "" if "code" in refusal.data else f" ({lost.code.value})"
    head = (
        f"The verifier had stopped during {tool}{said}; the bridge restarted it and reconnected, but {tool} did not "
        "go through and the run was not picked up again."
    )
    return Reply(f"{head} {refusal.text}", {"code": lost.code.value, **refusal.data, "reconnected": True}, True)
