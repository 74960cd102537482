"""A start the verifier refused as ``workflow_not_found``, in the bridge's own words.

The reply is written from the refusal's code, the name the start asked for and the refusal's
``details.available`` (the workflows the verifier serves, as the core writes them: id, title, aliases, and with
several catalogues served the release of each; else the release the bridge's listing names for it): the name
asked, why it starts nothing (no workflow or alias of that name, or several share it), then each workflow once.
The verifier's message is never read or edited: its reason may name the workflows too, or be worded otherwise.
Details missing or not in that shape name no list of theirs, not even part of one: the bridge's own listing
(:mod:`.offered`) is named instead, or the reply says the list could not be read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from rimthan_workflow_registry.errors import FailureCode, quoted

from .offered import Offered, OfferedList, listed_workflow
from .step_replies import Reply

CODE = FailureCode.WORKFLOW_NOT_FOUND.value
UNREAD = "Its list of the workflows it serves could not be read"


def served_workflows(details: object) -> OfferedList | None:
    """The workflows ``details.available`` names, in its order; None unless every entry has the core's shape."""
    available = details.get("available") if isinstance(details, Mapping) else None
    if not isinstance(available, list):
        return None
    named = [_entry(entry) for entry in available]
    return OfferedList(tuple(o for o in named if o is not None)) if None not in named else None


def _entry(entry: object) -> Offered | None:
    release = entry.get("release") if isinstance(entry, Mapping) else None
    return listed_workflow(release if isinstance(release, str) else "", entry)


def with_releases(served: OfferedList, listing: OfferedList) -> OfferedList:
    """``served``, each workflow whose release it does not name given the one ``listing`` names for its id (with one
    catalogue served the refusal names none; the bridge's listing does)."""
    releases: dict[str, set[str]] = {}
    for offered in listing.workflows:
        releases.setdefault(offered.workflow, set()).add(offered.release)
    return replace(served, workflows=tuple(_released(o, releases.get(o.workflow, set())) for o in served.workflows))


def _released(offered: Offered, releases: set[str]) -> Offered:
    return replace(offered, release=next(iter(releases))) if not offered.release and len(releases) == 1 else offered


def unserved_reply(tool: str, asked: str, served: OfferedList | None, listing: OfferedList) -> Reply:
    """The reply to ``tool`` refused for the workflow ``asked``: ``served`` (:func:`served_workflows`) named, each
    workflow with its release from ``listing`` (the bridge's) where it names none; ``listing`` itself when
    ``served`` is None (the details could not be read)."""
    data: dict[str, object] = {"status": "refused", "refused": CODE}
    head = f"The verifier refused: {CODE}: {_reason(asked, served)}"
    shown = with_releases(served, listing) if served is not None else listing
    if shown.names():
        data["workflows"] = shown.names()
    return Reply("\n".join([head, *_rest(tool, served is not None, shown)]), data, True)


def _reason(asked: str, served: OfferedList | None) -> str:
    name = f"'{quoted(asked)}'"
    sharing = [] if served is None else [o for o in served.workflows if asked in (o.workflow, *o.aliases)]
    if served is None or len(sharing) == 1:  # (nothing known of why, or a reason the list does not show)
        return f"it starts no workflow by the name {name}."
    if sharing:
        return f"{name} names several of the workflows it serves; pass the id of the one meant."
    return f"no workflow or alias {name} is among the workflows it serves."


def _rest(tool: str, read: bool, shown: OfferedList) -> list[str]:
    """What follows the reason: the workflows ``shown``, each once (``read``: the refusal's own), and the call."""
    if shown.unread:  # (the details unread, and the bridge's listing did not end)
        return [f"Nothing changed. {UNREAD}. {shown.words()}"]
    if shown.words():
        again = f"Nothing changed; call {tool} again with the name of one of the workflows below."
        return [
            again if read else f"Nothing changed. {UNREAD}; the verifier's resource listing names them:",
            shown.words(),
        ]
    if read:
        return [
            f"Nothing changed. The verifier serves no workflow a run can start: tell the user; {tool} cannot go on."
        ]
    return [f"Nothing changed. {UNREAD}: ask the user which workflow they meant, then call {tool} again."]
