"""When the verifier connection is gone mid-move: get it back once, resume the run from its log, say so.

A child the bridge starts is restarted; a verifier at a URL is connected to afresh (its process may be running
still: only the connection was lost, e.g. an HTTP session it no longer holds after a restart). Either way one
attempt, at once, per lost call. The move that was cut off may have left the session half-way (a checkpoint
the log never got), so the session is dropped and the run goes on from its
log and the state saved for the log's last checkpoint - the same path as
``resume_run`` after a crash; if that resume is refused (``run_position_unknown``...), the refusal is the
reply, its code the one the words and the data give. A verifier that does not answer the attempt: the model is
told how to go on once it is back (at a URL: that it is unreachable).
"""

from __future__ import annotations

from dataclasses import dataclass

from .bridge import Bridge, Reply
from .link import VerifierLink, VerifierLost


@dataclass(frozen=True)
class Afresh:
    """What was lost and what the bridge did about it, in words: a child restarted, or a URL reconnected."""

    lost: str  # "The verifier had stopped", or "The connection to the verifier at <url> was lost"
    done: str  # "the bridge restarted it and reconnected", or "the bridge reconnected"


def _afresh(link: VerifierLink) -> Afresh:
    """The words for ``link``'s way back: a child's restart, or a URL's new connection."""
    if link.url is None:
        return Afresh("The verifier had stopped", "the bridge restarted it and reconnected")
    return Afresh(f"The connection to the verifier at {link.url} was lost", "the bridge reconnected")


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
    how = _afresh(link)
    try:
        await (link.restart() if link.url is None else link.reconnect())
        if run is None:
            text = f"{how.lost} ({lost.code.value}); {how.done}. {tool} did not go through: {retry}."
            return Reply(text, {"status": "reconnected", **code}, True)
        resumed = await bridge.resume_run(run)
    except VerifierLost as again:
        return Reply(
            _not_back(link, tool, lost, again, retry), {"status": "verifier_unreachable", "run": run, **code}, True
        )
    if bridge.session is None:
        return resume_refused(tool, lost, resumed, how)
    head = (
        f"{how.lost} during {tool}; {how.done} ({lost.code.value}). Your {tool} call did not go through: {_again(tool)}"
    )
    return Reply(f"{head}\n{resumed.text}", {**code, **resumed.data, "reconnected": True}, True)


def _not_back(link: VerifierLink, tool: str, lost: VerifierLost, again: VerifierLost, retry: str) -> str:
    """The words for a verifier that did not answer the one attempt to get it back."""
    if link.url is not None:
        return (
            f"The verifier at {link.url} is unreachable ({lost.code.value}: {lost}; {again}); {tool} did not go "
            f"through. Once the verifier is running again, {retry} (the bridge reconnects on that call)."
        )
    return (
        f"The verifier stopped during {tool} and did not come back after a restart ({lost.code.value}: {again}); "
        f"{retry}."
    )


def _again(tool: str) -> str:
    """What to do with the call that was lost: a verdict's round went with the session, so not the verdict again."""
    if tool == "record_verdict":  # (the run is picked up again with no round open: a verdict re-sent is refused)
        return "its validation round ended with the verifier, so do not send the verdict again: go on as below."
    return "make it again if it still fits where the run is (below)."


def resume_refused(tool: str, lost: VerifierLost, refusal: Reply, how: Afresh) -> Reply:
    """The verifier is back (``how``), but the resume after it was refused (no run is active): the refusal is what to
    act on.

    Its first line names the refusal's code, the code its data gives (``verifier_lost`` only for a refusal that has
    none), and says how the verifier came back; its ``next:`` is the refusal's."""
    said = "" if "code" in refusal.data else f" ({lost.code.value})"
    head = (
        f"{how.lost} during {tool}{said}; {how.done}, but {tool} did not go through and the run was not picked up "
        "again."
    )
    return Reply(f"{head} {refusal.text}", {"code": lost.code.value, **refusal.data, "reconnected": True}, True)
