"""The values a migration carries to the release it names, known even when no offer of it is.

A run's values go to the target release only for the fields its confirmed
state has (:func:`~rimthan_host.confirmations.carried_values`, from the
verifier's offer): a field the target dropped would have the migration
refused (``confirmed_state_invalid``). A run resumed from its log at a step
shown without a call knows no offer, so the bridge's ``migrate_run`` naming a
release, and the library's ``WorkflowHarness.migrate``, ask the verifier
first: a preview carrying no values (a preview takes a state that lacks the
target's fields) names what the target needs, and becomes the offer.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from .confirmations import carried_values, offers
from .protocol import ToolRefused
from .session import HostSession


async def migration_values(session: HostSession, values: Mapping[str, Any], target_release: str) -> dict[str, Any]:
    """``values`` the migration of ``session``'s run to ``target_release`` carries: those of the fields the target's
    confirmed state has, as the verifier's offer names them, asked for first if no offer of it is known. A refused
    preview leaves every value to the migration itself, which the verifier refuses in its own words."""
    if not offers(session.migration_offer, target_release):
        with contextlib.suppress(ToolRefused):
            await session.migrate(target_release, {}, confirm=False)
    return carried_values(values, session.migration_offer, target_release)
