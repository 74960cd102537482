"""A failure that may last many refreshes (a registry outage, a full disk), logged once per kind.

A follower meets the same failure at every refresh while it lasts: one
warning per refresh flooded the log of a long outage. :class:`Recurring`
says a failure once when it starts or changes kind (the kind: what the
operator would do something different about, e.g. its code and next step),
at debug while it lasts, and in one info line when it is over.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Recurring:
    """The failures of one sort, each under a key (a tag; ``""`` for one of the whole sync), by the kind last said."""

    log: logging.Logger
    started: str  # the warning's event, when a failure starts or changes kind
    lasting: str  # the debug event, while the same kind lasts
    cleared: str | None = None  # the info event when it is over (None: the caller's own line says so)
    _kinds: dict[str, Hashable] = field(default_factory=dict)

    def failed(self, kind: Hashable, extra: Mapping[str, Any], key: str = "", *, meanwhile: str | None = None) -> None:
        """Warn of a failure of a new kind under ``key``; one of the kind last said is only debug.

        ``meanwhile``: what the replica does meanwhile when it is not what ``started`` says after its ``;`` (a
        start with nothing held to serve yet); the warning's event then ends with it instead."""
        before, self._kinds[key] = self._kinds.get(key), kind
        if before == kind:
            self.log.debug(self.lasting, extra=dict(extra))
            return
        event = self.started if meanwhile is None else f"{self.started.partition(';')[0]}; {meanwhile}"
        self.log.warning(event, extra=dict(extra))

    def switched(self, key: str = "") -> None:
        """The failure under ``key`` became one another :class:`Recurring` says: forget it, with no line."""
        self._kinds.pop(key, None)

    def over(self, key: str = "", **extra: Any) -> None:
        """The failure under ``key`` is over: one info line (with ``was``: its kind), if there was one."""
        before = self._kinds.pop(key, None)
        if before is not None and self.cleared is not None:
            self.log.info(self.cleared, extra={**extra, "was": before})
