"""How a person's decline or cancel of what the bridge asked them reads: the same for a question, a fact, a migration.

Elicitation has two ways to leave a question unanswered, and they call for
different next moves: declined, the person said no to it as it was put to
them, so the model asks them in the conversation; cancelled, they dismissed it
and nothing was answered, so it is asked again. An accept that confirms
nothing (an unticked box: ``no``) is said by each caller in its own words.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Unanswered:
    """What was asked and what did not happen; the ``next:`` of a decline (``instead``) and of a cancel (``again``).

    ``what``: what the person declined ("the question about research_route"); ``no_to``: what they said no to
    ("answering it as asked"); ``undone``: what did not happen, a sentence ending in a full stop.
    """

    what: str
    no_to: str
    undone: str
    instead: str
    again: str

    def words(self, action: str) -> str | None:
        """The reply's text for ``action`` (``decline``, ``cancel``), or None for another (the caller says it)."""
        if action == "decline":
            return f"The user declined {self.what}: they said no to {self.no_to}; {self.undone}\nnext: {self.instead}"
        if action == "cancel":
            return (
                f"The user dismissed {self.what} (cancel): nothing was answered, so {self.undone}\nnext: {self.again}"
            )
        return None
