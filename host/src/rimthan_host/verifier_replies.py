"""The bridge's own words for a verifier's failure, per failure code: one table, :data:`REPLIES`.

A refusal the table does not hold is said in the verifier's words (the caller's generic reply). Each entry reads
a :class:`VerifierFailure` - the code, the verifier's message and details, the tool call it stopped - and says
what happened and the call that goes on:

- ``pinned_release_unavailable`` (a call refused): the run's release is not held by the verifier; where to put it
  back (a child verifier is restarted before the next call, to read its releases directory anew), or, when the
  verifier dropped it as untrusted (``details.untrusted``), that it needs a co-signature by a trusted key; or a new
  run.
- ``rollback_refused`` (the child verifier exited before it was up): the newest release it served was withdrawn, and the
  activation floor that release raised refuses the older one left; put it back (or publish a newer one), or
  lower the floor deliberately and start a new run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields

from rimthan_workflow_registry.below_floor import BelowFloor
from rimthan_workflow_registry.errors import FailureCode, quoted

from .bridge import Bridge, Reply
from .link import VerifierLink


@dataclass(frozen=True)
class VerifierFailure:
    """A failure the verifier reported for ``tool``: its code, message and details (empty when it gave none)."""

    code: str
    tool: str
    message: str = ""
    details: object = None  # (as the verifier sent them: a mapping, or anything else, read as none)
    exited: bool = False  # a child verifier that exited before it was up, not a refusal of the call

    @property
    def untrusted(self) -> bool:
        """Whether the verifier said it dropped the release as untrusted (``details.untrusted``)."""
        return isinstance(self.details, Mapping) and self.details.get("untrusted") is True

    def detail(self, name: str) -> str:
        value = self.details.get(name) if isinstance(self.details, Mapping) else None
        return str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else ""


def reply_for(bridge: Bridge, link: VerifierLink | None, failure: VerifierFailure) -> Reply | None:
    """The bridge's words for ``failure``, or None: none of its own for that code, or no link (a library bridge)."""
    words = REPLIES.get(failure.code)
    return words(bridge, link, failure) if words is not None and link is not None else None


def _release_dir(release: str) -> str:
    """Where ``rimthan-pack build`` or ``pull`` writes ``release`` in the project (by default)."""
    return f"releases/{quoted(release.replace('@', '-', 1))}" if release else "releases/"


_NEW_RUN = " To leave this run as it is instead, call start_run with new_run true (the run stays resumable)."


def pinned_release_reply(bridge: Bridge, link: VerifierLink, failure: VerifierFailure) -> Reply:
    """The run's pinned release is not held by the verifier: where to put it back, and the call that then goes
    through (a child verifier is restarted before it, to read its releases directory anew), or a new run instead."""
    release, tool = failure.detail("release_id"), failure.tool
    named = quoted(release) if release else "its release"
    code = FailureCode.PINNED_RELEASE_UNAVAILABLE.value
    head = f"Nothing changed ({code}): this run is pinned to release {named}, which the verifier"
    if failure.untrusted:
        where, who = (f"at {quoted(link.url)}", "its operator") if link.url else ("the bridge started", "the user")
        text = (
            f"{head} {where} dropped: its trust store no longer vouches for the release's signatures (a signing key "
            f"removed or revoked). Ask {who} to have the release co-signed with a key the verifier trusts "
            f"(rimthan-pack sign) and to refresh the verifier, then call {tool} again."
        )
        link.rescan_before_next_call()
    elif link.url is not None:
        text = (
            f"{head} at {quoted(link.url)} does not hold. Ask its operator to put that release back in its releases "
            f"directory and refresh it (or to route this run to a verifier that holds it), then call {tool} again."
        )
    else:
        link.rescan_before_next_call()
        text = (
            f"{head} the bridge started does not hold: it is no longer in the releases directory (by default the "
            f"project's {_release_dir(release)}, as rimthan-pack build or pull wrote it). Ask the user to put it "
            f"back, then call {tool} again: the bridge restarts the verifier on that call, so that it reads the "
            "releases anew."
        )
    return Reply(text + _NEW_RUN, {"status": "refused", "refused": code, "release": release or None}, True)


def floor_reply(bridge: Bridge, link: VerifierLink, failure: VerifierFailure) -> Reply | None:
    """The newest release was withdrawn below the activation floor it raised: the child verifier refuses the older
    one left (a silent rollback) and does not start; which release, and what the user can do. (None for a refused
    call: a verifier refuses a rollback as it activates releases, so such a call is said in its words.) The names
    are the refusal's details (the child's below-floor log record), never read from its message; without them
    the reply names no release."""
    if not failure.exited:
        return None
    code, tool = FailureCode.ROLLBACK_REFUSED.value, failure.tool
    catalogue, version, floor = (failure.detail(f.name) for f in fields(BelowFloor))
    named = bool(catalogue and version and floor)
    withdrawn, left = (f"{catalogue}@{floor}", f"{catalogue}@{version}") if named else ("", "")
    pinned = bridge.session.release_id if bridge.session is not None else ""
    whose = "this run is pinned to it" if pinned and pinned == withdrawn else "a run may be pinned to it"
    release = f"release {quoted(withdrawn)}" if withdrawn else "release it served"
    older = f" ({quoted(left)} is below it)" if left else ""
    text = (
        f"Nothing changed ({code}): the verifier the bridge starts refuses to start. The newest {release} is no "
        f"longer in the releases directory (by default the project's {_release_dir(withdrawn)}), and the verifier "
        f"does not roll back to an older release below its activation floor{older}: serving {release} raised the "
        f"floor, and {whose}.\n"
        f"next: ask the user to put {release} back (or to publish a newer version), then call {tool} again (the "
        "bridge starts the verifier anew on that call); or, to leave that release for good, the user lowers the "
        "floor deliberately (--lower-floor after -- of rimthan-host serve, restarting the host) and you call "
        "start_run with new_run true."
    )
    return Reply(text, {"status": "refused", "refused": code, "release": withdrawn or None}, True)


# A verifier failure code -> the bridge's words for it and the call that goes on.
REPLIES: dict[str, Callable[[Bridge, VerifierLink, VerifierFailure], Reply | None]] = {
    FailureCode.PINNED_RELEASE_UNAVAILABLE.value: pinned_release_reply,
    FailureCode.ROLLBACK_REFUSED.value: floor_reply,
}
