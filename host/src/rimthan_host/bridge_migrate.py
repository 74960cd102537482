"""The bridge's migration move: preview the release the verifier offers, then migrate once the user agrees."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rimthan_workflow_registry.errors import FailureCode, quoted

from .asking import Ask, Asker
from .bridge_core import BridgeCore
from .confirmations import BY_ELICITATION, BY_MODEL, carried_values
from .fact_forms import expects_of_offer
from .facts import Confirmed, already_confirmed, form_round, not_confirmed
from .held_facts import Holding, held_words
from .migration_values import learn_offer
from .protocol import (
    ToolRefused,
)
from .result_parts import wires
from .session import HostSession
from .step_replies import Reply, failure_codes, reply
from .unanswered import Unanswered
from .words import failure_words, offer_summary, preview_words, then_asked


def not_carried(session: HostSession, target: str, facts: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``facts`` less those of fields the offer of ``target`` says its confirmed state does not have, and the line
    saying so: :meth:`HostSession.migrate` carries no value of such a field, so the user is not asked to confirm it."""
    kept = carried_values(facts, session.migration_offer, target)
    dropped = [k for k in facts if k not in kept]
    if not dropped:
        return kept, []
    said = (f"{quoted(', '.join(dropped))}: not carried to {target}, whose confirmed state has no such field; the "
            "user was not asked to confirm it.")  # fmt: skip
    return kept, [said]


class MigrationMoves(BridgeCore):
    """migrate_run."""

    async def migrate_run(self, asker: Asker, to_release: str | None, confirm: bool, facts: Mapping[str, Any]) -> Reply:
        session = self._running()
        if isinstance(session, Reply):
            return session
        offer = session.migration_offer
        if offer is None and not to_release:
            return self._no_offer(session.offer_asked, session.position.step_id)
        target = to_release or ""
        if offer is not None:  # (none known, e.g. a run resumed at an ungated step: the verifier judges the named one)
            offered = str(offer_summary(offer)["to_release"])
            if to_release and to_release != offered:
                lines = [f"Nothing was done: {quoted(to_release)} is not offered for this run; the release offered "
                         f"is {offered}. Call migrate_run without to_release to take it."]  # fmt: skip
                return reply(lines, {"run": self.run_id, "status": "refused", "to_release": offered}, True)
            target = offered
        await learn_offer(session, target)  # (so the session sends none the target dropped)
        values = {**session.state.values, **facts}
        facts, known = already_confirmed(session, facts)  # (one confirmed with that value is not asked again)
        facts, behind = not_carried(session, target, facts)  # (nor one the target has no field for)
        known += behind
        try:
            preview = await session.migrate(target, values, confirm=False)
        except ToolRefused as exc:
            return _refused(exc)
        words = preview_words(preview)
        blocking = [f for f in wires(preview.failures) if f.get("code") != "migration_confirmation_required"]
        data = {"status": "preview", "to_release": target, "failures": failure_codes(wires(preview.failures))}
        if blocking or not confirm:
            tail = _preview_tail(blocking, asker.available)
            return Reply("\n".join([*known, *words, tail]).strip(), data, is_error=bool(blocking))
        by, chosen = BY_MODEL, list[str]()
        if asker.available:
            asked = await self._ask_migration(asker, session, target, facts, (words, data))
            if isinstance(asked, Reply):
                return asked
            values |= asked.facts  # (the value the user picked is migrated)
            by, chosen = asked.by, list(asked.said)
        held = held_words(list(facts), "migrate_run") if by == BY_ELICITATION else []  # (each confirmed, held)
        try:
            migrated = await session.migrate(target, values, confirm=True, by=by)
        except ToolRefused as exc:  # (a value the user filled in that the target's schema refuses)
            if not held or exc.code != FailureCode.CONFIRMED_STATE_INVALID.value:
                raise
            return _refused(exc, [*chosen, *held])
        if migrated.status != "active":
            lines = ["The migration was refused:", *failure_words(wires(migrated.failures)), *chosen, *held]
            return Reply("\n".join(lines), data, True)
        self.held.forget()
        return await self._go_on(migrated, [*known, *chosen, f"Migrated run {self.run_id} to {target} ({by})."])

    async def _ask_migration(
        self,
        asker: Asker,
        session: HostSession,
        target: str,
        facts: Mapping[str, Any],
        preview: tuple[Sequence[str], Mapping[str, Any]],
    ) -> Confirmed | Reply:
        """Put ``facts`` (but those held for this move: :mod:`.held_facts`) and the migration (``preview``: its
        words and the reply's data) to the person: the values they confirmed, or the reply for a no."""
        holding = Holding(self.held, ("migrate", self.run_id, session.checkpoint, target))  # (this run, here, to it)
        asked = (expects_of_offer(session.migration_offer), f"for the migration to {target}")
        now = Ask("migrate", "\n".join([*preview[0], "Migrate this run now?"]))
        answered = await form_round(asker, facts, asked, holding, [now])
        if answered.refusal is None:
            return answered.confirmed("migrate_run")
        key, said = answered.refusal
        no = self._not_migrated(said, key, session.position.step_id, preview[1])
        return answered.refusing(no, "migrate_run")

    def _no_offer(self, asked: bool, step: object) -> Reply:
        """migrate_run with no offer known: none (the verifier said so), or not asked yet (since a resume).

        Every result of a move (start_run's, step_done's, answer_question's)
        says whether a newer release can take the run; a run resumed from its
        saved result, with no call, has not been told since.
        """
        if asked:
            said = f"no newer release is offered for run {self.run_id}, so there is nothing to migrate to"
        else:
            said = (f"the verifier has not said yet whether a newer release can take run {self.run_id}: it says so "
                    "with the result of the run's next move (step_done, answer_question; not with resume_run's from "
                    "the run's log), and that result names the release if there is one")  # fmt: skip
        lines = [f"Nothing was done: {said}. Carry on with step {step} (show_step says what it needs); if the user "
                 "names a release installed since, call migrate_run with it as to_release."]  # fmt: skip
        return reply(lines, {"run": self.run_id, "status": "no_offer"}, True)

    def _not_migrated(self, said: str, refused: str, step: object, data: Mapping[str, Any]) -> Reply:
        """The person said no to a fact the migration needs (``refused``: its ask's key) or to the migration itself.

        A fact: ask again for the value they confirm. The migration: carry on
        where the run is, without asking again unless the user wants it.
        """
        undone = f"nothing was migrated; run {self.run_id} stays at step {step} on its release"
        if refused.startswith("fact:"):
            retry = "migrate_run with the value they confirm in facts"
            fact = refused.removeprefix("fact:")
            return not_confirmed(fact, said, "migrate_run", (undone, "preview"), data, retry)
        carry_on = f"carry on with step {step} (show_step says what it needs)"
        instead = f"{carry_on}; call migrate_run again only if the user asks for the newer release."
        again = f"call migrate_run with confirm true to ask them again, or {carry_on} if they would rather not."
        what = f"the question to migrate run {self.run_id}"
        asked = Unanswered(what, "migrating it now", f"{undone}.", instead, again)
        no = f"The user did not confirm the migration ({said}); {undone}. {instead[0].upper()}{instead[1:]}"
        return Reply(asked.words(said) or no, {**data, "user": said}, is_error=True)


def _refused(exc: ToolRefused, held: Sequence[str] = ()) -> Reply:
    """The verifier refused the migration (its preview, or the migration the user confirmed: ``held``, the line
    saying which of their facts are not asked again)."""
    text = (f"The verifier refused the migration: {exc.code}: {exc.error.get('message')}\nThe run stays where it "
            "is. Fix what the refusal names (ask the user for facts) and call migrate_run again, or carry on with the "
            "current step.")  # fmt: skip
    return Reply("\n".join([text, *held]), {"status": "refused", "refused": exc.code}, is_error=True)


def _preview_tail(blocking: Sequence[Mapping[str, Any]], elicits: bool) -> str:
    """The call a migration's preview leads to: the migration once the user agrees (``elicits``: the bridge asks
    them in their own client), or the facts the newer release needs (confirmed the same way); none if refused."""
    if any(f.get("code") == "confirmed_field_missing" for f in blocking):
        needs = "Ask the user for what the newer release needs and pass it as facts to migrate_run"
        return f"{needs}{then_asked(elicits)}."
    if blocking:
        return ""
    if elicits:
        return (
            "Call migrate_run with confirm true if the user wants the newer release: the bridge puts this preview to "
            "them in their own client and migrates only if they confirm it there."
        )
    return "Call migrate_run with confirm true once the user agrees."
