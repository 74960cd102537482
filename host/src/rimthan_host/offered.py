"""The workflows a model may start, as the verifier's resource listing names them.

No fifth verifier tool: each served catalogue's active release is a manifest resource whose ``_meta`` says new
runs start on it (:data:`~rimthan_workflow_registry.protocol_names.NEW_RUNS_META`) and which workflows it
carries (:data:`~rimthan_workflow_registry.protocol_names.WORKFLOWS_META`: id, title, aliases). A start refused
for its workflow and ``show_step`` with no run name them: at most :data:`OFFERED_SHOWN`, then how many more.
What the verifier sent is taken only in the expected shape, each text quoted and cut. A listing that does not end
(:class:`~rimthan_host.protocol.ListingUnbounded`) names none, never part of them, and says so. The bridge keeps
the listing per verifier connection until it changes (:mod:`.kept_listing`). A start refused as
``workflow_not_found`` is said in the bridge's own words (:mod:`.unserved`), each workflow named once.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rimthan_workflow_registry.errors import quoted
from rimthan_workflow_registry.protocol_names import NEW_RUNS_META, RELEASE_META, WORKFLOWS_META

from .protocol import ListingUnbounded, MetaLister

OFFERED_SHOWN = 10
"""Workflows a reply names; past this, how many more (a verifier may serve many catalogues)."""
TITLE_CHARS = 80
"""A workflow's title as a reply quotes it: cut past this."""
_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Offered:
    """One workflow a new run may start: its id, the release a run of it starts on ("" if not named), its title and
    aliases."""

    workflow: str
    release: str
    title: str = ""
    aliases: tuple[str, ...] = ()

    def words(self) -> str:
        """``id (title, release r; also called a, b)``, each part only when known."""
        title = quoted(self.title, TITLE_CHARS) if self.title else ""
        release = f"release {quoted(self.release)}" if self.release else ""
        named = ", ".join(part for part in (title, release) if part)
        also = f"also called {', '.join(quoted(a) for a in self.aliases)}" if self.aliases else ""
        inside = "; ".join(part for part in (named, also) if part)
        return f"{quoted(self.workflow)} ({inside})" if inside else quoted(self.workflow)


@dataclass(frozen=True)
class OfferedList:
    """The workflows the verifier offers, in its order; empty when it named none or could not be asked."""

    workflows: tuple[Offered, ...] = ()
    unread: str = ""  # why none is named though the verifier may offer some (its listing did not end)

    def words(self) -> str:
        """One line naming them for start_run, or "" when there are none to name."""
        if self.unread:
            return f"The workflows you can start are not named here: {self.unread}; ask the user for the name."
        if not self.workflows:
            return ""
        shown = "; ".join(o.words() for o in self.workflows[:OFFERED_SHOWN])
        rest = len(self.workflows) - OFFERED_SHOWN
        more = f"; and {rest} more" if rest > 0 else ""
        return f"Workflows you can start (pass the name as start_run's workflow): {shown}{more}."

    def names(self) -> list[str]:
        """The names :meth:`words` shows, for a reply's data."""
        return [o.workflow for o in self.workflows[:OFFERED_SHOWN]]


async def offered_workflows(list_metas: MetaLister | None) -> OfferedList:
    """What the verifier offers now; empty (the reply then stands as it was) if it cannot say."""
    if list_metas is None:
        return OfferedList()
    try:
        metas = await list_metas()
    except ListingUnbounded as exc:  # (fail closed: no list at all rather than one missing the later manifests)
        _log.warning("%s", exc)
        return OfferedList(unread=str(exc))
    except Exception as exc:  # (a help only: a reply without it still says what to do)
        _log.info("the verifier's resource listing could not be read: %r", exc)
        return OfferedList()
    return OfferedList(tuple(o for meta in metas if meta.get(NEW_RUNS_META) is True for o in release_offers(meta)))


def release_offers(meta: Mapping[str, Any]) -> list[Offered]:
    """The workflows one manifest resource's ``_meta`` names, each as :class:`Offered`; none if it names none."""
    release, workflows = meta.get(RELEASE_META), meta.get(WORKFLOWS_META)
    if not isinstance(release, str) or not isinstance(workflows, list):
        return []
    return [o for o in (listed_workflow(release, entry) for entry in workflows) if o is not None]


def listed_workflow(release: str, entry: object) -> Offered | None:
    """One workflow as a listing names it (an object with a text ``id``; its title and aliases taken if they are
    texts), or None for an entry of another shape."""
    if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
        return None
    title = entry.get("title")
    aliases = entry.get("aliases")
    named = _texts(aliases) if isinstance(aliases, list) else ()
    return Offered(entry["id"], release, title if isinstance(title, str) else "", named)


def _texts(values: Sequence[object]) -> tuple[str, ...]:
    return tuple(v for v in values if isinstance(v, str))
