"""The values a migration carries to the release it names, known even when no offer of it is.

A run's values go to the target release only for the fields its confirmed
state has (:func:`~rimthan_host.confirmations.carried_values`, from the
verifier's offer): a field the target dropped would have the migration
refused (``confirmed_state_invalid``). A run resumed from its log at a step
shown without a call knows no offer, so the bridge's ``migrate_run`` naming a
release, and the library's ``WorkflowHarness.migrate``, ask the verifier
first (:func:`learn_offer`): a preview carrying no values (a preview takes a
state that lacks the target's fields) names what the target needs, and becomes
the offer; :meth:`~rimthan_host.session.HostSession.migrate` then carries the
run's values by it. The offer is saved with the run's state, so a run resumed
after it knows it and sends no probe again; the probe is logged as one (a
``probe`` event and ``RunRecord.probes`` line), not as a call of the run.
"""

from __future__ import annotations

import contextlib

from .confirmations import offers
from .protocol import ToolRefused
from .session import HostSession


async def learn_offer(session: HostSession, target_release: str) -> None:
    """Have ``session`` know the verifier's offer of ``target_release``, so that :meth:`HostSession.migrate` carries
    only the fields its confirmed state has: when none is known, a preview carrying no values asks for it (a probe:
    a ``probe`` event reaches an ``on_event`` sink, no ``call`` or ``migrate`` event). A refused preview leaves every
    value to the migration itself, which the verifier refuses in its own words."""
    if not offers(session.migration_offer, target_release):
        with contextlib.suppress(ToolRefused):
            await session.migrate(target_release, {}, confirm=False, probe=True)
