"""Facts the person confirms for a run: at ``start_run``, and mid-run with ``step_done``'s ``facts``.

A step such as ``interview`` asks the model to confirm fields with the user
(options, success criteria, a deadline); ``step_done`` takes them, the bridge
asks the person directly when the client can elicit (else records them as
relayed by the model, after it asked the user), and each goes into the
confirmed state with a fresh confirmation, exactly as ``start_run``'s facts
do. The verifier checks them against the workflow's confirmed-state schema
with the same ``continue_workflow`` that moves the step on: a value it
refuses changes nothing, and the reply names the field and what to fix.

One round of forms asks them (:func:`form_round`): each fact in its own form, then any question of the caller's
own (``migrate_run``'s "Migrate this run now?"), each yes held for the move's retry; the caller builds its reply
from the :class:`FormRound` it returns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from rimthan_workflow_registry.errors import FailureCode, quoted
from rimthan_workflow_registry.run import schema_misfit

from .asking import Answer, Ask, Asker
from .confirmations import BY_ELICITATION, BY_MODEL
from .fact_forms import Expects, FactForm, fact_form
from .fact_shapes import misshapen, shape_words
from .held_facts import HeldFacts, Holding, held_words, kept_words
from .protocol import ToolRefused
from .result_parts import wires
from .results import RunResult
from .session import HostSession
from .step_replies import Reply, missing_fields, reply, run_id_of
from .unanswered import Unanswered
from .words import then_asked


@dataclass(frozen=True)
class Confirmed:
    """How the person confirmed a move's facts (``by``), the values confirmed (``facts``: a value they picked in a
    fact's own form, else the one passed) and the lines telling the model of each value they changed."""

    by: str
    facts: dict[str, Any]
    said: tuple[str, ...] = ()


async def confirm_facts(
    asker: Asker,
    facts: Mapping[str, Any],
    tool: str,
    undone: tuple[str, str],
    data: Mapping[str, Any] | None = None,
    asked: tuple[Expects, str] = ({}, "for this run"),
    holding: Holding | None = None,
) -> Confirmed | Reply:
    """How the person confirmed ``facts`` (asked directly if the client can elicit), or the reply for a no.

    ``tool``: the call that asks them again (start_run, step_done); ``undone``: what
    did not happen on a no, in words and as the reply's status; ``data``: where the run is, for the reply's data;
    ``asked``: each field's schema in the release (its form offers its choices or type) and why they are asked;
    ``holding``: the facts the person confirmed in a form for this move already (not asked again), and where
    those they confirm now are held should the move not happen (:mod:`.held_facts`).
    """
    found = misshapen(facts, asked[0])
    if found:  # (a value of another type than its field's is refused before anyone is asked to confirm it)
        refusal = shape_words(found, undone[0], tool, asker.available)
        shapes = {**(data or {}), "status": "facts_refused", "misshapen": [m.name for m in found]}
        return Reply(refusal, shapes, is_error=True)
    if not asker.available or not facts:
        return Confirmed(BY_MODEL, dict(facts))
    answered = await form_round(asker, facts, asked, holding)
    if answered.refusal is None:
        return answered.confirmed(tool)
    key, said = answered.refusal
    return answered.refusing(not_confirmed(key.removeprefix("fact:"), said, tool, undone, data), tool)


@dataclass(frozen=True)
class FormRound:
    """One round of forms put to the person: each fact's form (``forms``) and the extra asks, their ``answers``,
    the facts held from a round before (``kept``: not asked again), the forms they said yes to (``yes``: held now),
    the lines telling the model of each value they changed (``said``), the facts held for the move's retry
    (``held``: none without a holding), and the first ask they did not confirm (``refusal``: its key and what they
    said; None if they confirmed all) or else the values confirmed (``values``, in the facts' order)."""

    forms: tuple[FactForm, ...]
    answers: Mapping[str, Answer]
    kept: Mapping[str, Any]
    yes: tuple[FactForm, ...]
    said: tuple[str, ...]
    held: tuple[str, ...]
    refusal: tuple[str, str] | None
    values: Mapping[str, Any]

    def confirmed(self, tool: str) -> Confirmed:
        """The person confirmed all: their values, and the lines saying which were not asked again (``tool``:
        the move's call) and which they changed."""
        return Confirmed(BY_ELICITATION, dict(self.values), (*kept_words(self.kept, tool), *self.said))

    def refusing(self, no: Reply, tool: str) -> Reply:
        """The caller's reply ``no`` for the refusal, with the values changed and the facts held for ``tool``."""
        return replace(no, text=before_next(no.text, [*self.said, *held_words(self.held, tool)]))


async def form_round(
    asker: Asker,
    facts: Mapping[str, Any],
    asked: tuple[Expects, str],
    holding: Holding | None = None,
    extra: Sequence[Ask] = (),
) -> FormRound:
    """Put ``facts`` (but those ``holding`` holds: :mod:`.held_facts`) to the person, each in its own form
    (``asked``: each field's schema and why they are asked), then the ``extra`` asks; hold each yes."""
    fresh, kept = holding.split(facts) if holding is not None else (dict(facts), {})
    forms = tuple(fact_form(k, v, asked[0].get(k), asked[1]) for k, v in fresh.items())
    asks = [*(f.ask for f in forms), *extra]
    got = await asker.ask(asks)
    yes = tuple(f for f in forms if f.ask.key in got and got[f.ask.key].confirmed)
    said = tuple(s for s in (f.said(got[f.ask.key]) for f in yes) if s)
    if holding is not None:
        holding.hold({f.name: f.value(got[f.ask.key]) for f in yes})
    held = (*kept, *(f.name for f in yes)) if holding is not None else ()
    refusal = _first_no(asks, got)
    if refusal is not None:
        return FormRound(forms, got, kept, yes, said, held, refusal, {})
    values = {**kept, **{f.name: f.value(got[f.ask.key]) for f in forms}}
    return FormRound(forms, got, kept, yes, said, held, None, {k: values[k] for k in facts})


def _first_no(asks: Sequence[Ask], got: Mapping[str, Answer]) -> tuple[str, str] | None:
    """The key of the first of ``asks`` the person did not confirm and what they said (one left unanswered: a
    cancel), None if they confirmed all."""
    for one in asks:
        answer = got.get(one.key)
        if answer is None or not answer.confirmed:
            return one.key, answer.said if answer is not None else "cancel"
    return None


def before_next(text: str, lines: Sequence[str]) -> str:
    """``text`` with ``lines`` added before its ``next:`` line (at its end if it has none)."""
    head, sep, todo = text.partition("\nnext: ")
    return "\n".join([head, *lines]) + sep + todo


def not_confirmed(
    field: str,
    said: str,
    tool: str,
    undone: tuple[str, str],
    data: Mapping[str, Any] | None = None,
    retry: str | None = None,
) -> Reply:
    """The reply for a fact the person did not confirm (``said``: decline, cancel, no): what did not happen.

    ``tool``: the call that puts the facts to them again; ``retry``: the call to make once a no is talked
    through (``tool`` if not said). Declined, the model asks them in the conversation for the value; cancelled,
    nothing was answered, so the same facts are put to them again."""
    name = quoted(field)
    instead = (f"ask the user in the conversation what {name} should be instead, then call {tool} again with it in "
               "facts (they are asked to confirm it).")  # fmt: skip
    again = f"call {tool} again with the same facts to ask them again."
    what = f"the request to confirm {name}"
    asked = Unanswered(what, "the value as it was put to them", f"{undone[0]}.", instead, again)
    no = f"The user did not confirm {name} ({said}); {undone[0]}. Talk it through with the user and call"
    return Reply(
        asked.words(said) or f"{no} {retry or tool} again.",
        {**(data or {}), "status": undone[1], "user": said, "field": name},
        is_error=True,
    )


_NAMES = (
    "A fact's name is not a field of this workflow: name each fact exactly as the step's instructions spell its "
    "field (e.g. success_criteria), and leave out what is no field"
)


def _at_top(failure: Mapping[str, Any]) -> bool:
    """A confirmed state refused at its top level: a field the workflow's schema does not have."""
    details = failure.get("details")
    return (
        failure.get("code") == FailureCode.CONFIRMED_STATE_INVALID.value
        and isinstance(details, Mapping)
        and details.get("pointer") == "/"
    )


def _refused_words(failure: Mapping[str, Any]) -> str:
    """What the verifier said of one refused fact: a schema misfit said of the facts, not of its argument."""
    details = failure.get("details")
    if failure.get("code") == FailureCode.CONFIRMED_STATE_INVALID.value and isinstance(details, Mapping):
        said = schema_misfit("the confirmed state with these facts", details)
        if said is not None:
            return said
    return str(failure.get("message"))


def facts_refused(
    session: HostSession, failures: Sequence[Mapping[str, Any]], facts: Mapping[str, Any], elicits: bool
) -> Reply:
    """The verifier took none of ``facts`` (a refusal, or ``blocked``): what it said of which field, what to do
    (``elicits``: the client of the call can ask the user, who then confirms the facts in it)."""
    said = "; ".join(f"{f.get('code')}: {_refused_words(f)}" for f in failures)
    todo = _NAMES if any(_at_top(f) for f in failures) else "Ask the user for a value that fits"
    lines = [f"Nothing was recorded: the verifier refused the facts {quoted(', '.join(facts))} ({said}); the run "
             f"stays at step {session.position.step_id}. {todo}, then call step_done again with every fact in "
             f"facts{then_asked(elicits)}."]  # fmt: skip
    data = {"run": run_id_of(session), "status": "facts_refused", "failures": [str(f.get("code")) for f in failures]}
    return reply(lines, data, True)


def already_confirmed(session: HostSession, facts: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``facts`` less those the run's confirmed state holds with the same value (RFC 8785), and the line saying so.

    A fact confirmed already with that value is not put to the person again each time the model passes it; a
    changed value is (:func:`record_facts`).
    """
    same = [k for k, v in facts.items() if session.state.holds(k, v)]
    if not same:
        return dict(facts), []
    fresh = {k: v for k, v in facts.items() if k not in same}
    said = f"{quoted(', '.join(same))}: confirmed already with the same value; the user was not asked again."
    return fresh, [said]


def fields_missing(session: HostSession, fields: Sequence[str], facts: Mapping[str, Any], elicits: bool) -> Reply:
    """The step moves on only with ``fields`` confirmed (the verifier's ``confirmed_field_missing``): nothing was
    recorded or moved; ask the user for them and send them, with any facts given, in one step_done (confirmed
    with the user by the model, or, ``elicits``, by the bridge in the user's client)."""
    step = session.position.step_id
    given = f"; the facts {quoted(', '.join(facts))} were not recorded either" if facts else ""
    confirm = "" if elicits else ", confirm each with them"
    lines = [f"Nothing was done: step {step} moves on only once {', '.join(fields)} are confirmed "
             f"(confirmed_field_missing){given}; the run stays at step {step}. Ask the user for "
             f"{', '.join(fields)} as the step's instructions say{confirm}, then call step_done "
             f"with step {step} and every fact in facts{then_asked(elicits)}."]  # fmt: skip
    data = {"run": run_id_of(session), "status": "facts_refused", "failures": [_MISSING] * len(fields)}
    return reply(lines, data, True)


_MISSING = FailureCode.CONFIRMED_FIELD_MISSING.value


async def record_facts(
    session: HostSession,
    asker: Asker,
    facts: Mapping[str, Any],
    expects: Expects | None = None,
    held: HeldFacts | None = None,
) -> tuple[RunResult, list[str]] | Reply:
    """``continue_workflow`` with ``facts`` (none: a plain one) confirmed afresh: its result and what was done.

    ``expects``: each field's schema in the release, so its form offers its choices or type; ``held``: the facts
    the person confirmed in a form at this checkpoint for a move that did not happen (:mod:`.held_facts`). Or the
    reply saying why nothing was recorded: the person said no, or the verifier refused a value (the run stays where
    it is).
    """
    step = session.position.step_id
    undone = f"nothing was recorded; the run stays at step {step}"
    where = {"run": run_id_of(session), "step": {"id": step}}
    asked = (expects or {}, f"at step {step}")
    holding = Holding(held, ("run", str(where["run"]), session.checkpoint)) if held is not None else None
    confirmed = await confirm_facts(asker, facts, "step_done", (undone, "not_confirmed"), where, asked, holding)
    if isinstance(confirmed, Reply):
        return confirmed
    facts, by = confirmed.facts, confirmed.by
    try:
        result = await session.advance(facts, by=by)
    except ToolRefused as exc:
        if not facts:
            raise
        return facts_refused(session, [exc.error], facts, asker.available)
    unmet = missing_fields(wires(result.failures)) if result.status == "blocked" else []
    if unmet:
        missing = fields_missing(session, unmet, facts, asker.available)
        kept = held_words(list(facts), "step_done") if confirmed.by == BY_ELICITATION and holding is not None else []
        return replace(missing, text="\n".join([missing.text, *confirmed.said, *kept]))
    if facts and result.status == "blocked":
        return facts_refused(session, wires(result.failures), facts, asker.available)
    if held is not None:
        held.forget()
    done = [*confirmed.said, f"Recorded {quoted(', '.join(facts))} as confirmed ({by})."]
    return result, done if facts else []
