"""A fact's own form: what the person is offered for a fact the model passed, from the field's schema in the release.

Where the workflow's confirmed-state schema declares the field's choices (``enum``) or a scalar type (text,
integer, number, boolean), the elicitation form offers them: the choices, with the model's value as default when
it is one of them (equal as JSON Schema compares, as the verifier does: ``5.0`` is the choice ``5``, ``true`` is
not ``1``), or a field of that type with the model's value filled in. The value the person picks is the one
confirmed (the verifier still checks it). A field of another shape (a list, an object), or whose schema is not
known, is put to the person as before: confirm the value as the model passed it, yes or no. The field's schema
comes from the verifier: at ``start_run`` and mid-run the workflow's confirmed-state schema as the verified
release names it (:mod:`.state_schema`; at ``start_run`` also a start with no facts' ``expects``), for a
migration the offer's ``target_needs.confirmed_state``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rimthan_workflow_registry.canonical import json_equal
from rimthan_workflow_registry.errors import FailureCode

from .asking import Answer, Ask
from .words import choice_texts, fact_message, shown_exactly

Expects = Mapping[str, Mapping[str, Any]]  # a field's name -> its schema in the release (description, type, enum)

_SCALARS = {"string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,)}
_FORMATS = ("date", "date-time", "email", "uri")  # the string formats an elicitation form may declare
_BOUNDS = {"string": ("minLength", "maxLength"), "integer": ("minimum", "maximum"), "number": ("minimum", "maximum")}


@dataclass(frozen=True)
class FactForm:
    """One fact put to the person: its question, and how the answer reads back as the value confirmed."""

    name: str
    passed: Any  # the model's value
    ask: Ask
    choices: tuple[Any, ...] = ()  # the field's enum, in the order of the form's texts

    def value(self, answer: Answer) -> Any:
        """The value the person confirmed: the one they picked or filled in, else the one passed."""
        if not answer.filled:
            return self.passed
        if self.choices:
            return self.choices[choice_texts(self.choices).index(answer.value)]
        return answer.value

    def said(self, answer: Answer) -> str | None:
        """The line telling the model the person confirmed another value than it passed (None if the same)."""
        value = self.value(answer)
        if json_equal(value, self.passed):
            return None
        return f"The user chose {self.name} = {shown_exactly(value)} (you passed {shown_exactly(self.passed)})."


def fact_form(name: str, value: Any, expects: Mapping[str, Any] | None, why: str) -> FactForm:
    """The question for fact ``name`` (``value`` as the model passed it), asked ``why`` (e.g. "at step interview")."""
    key = f"fact:{name}"
    expects = expects or {}
    kind, choices = expects.get("type"), expects.get("enum")
    if isinstance(choices, list) and choices and all(isinstance(c, (str, int, float, bool)) for c in choices):
        texts = choice_texts(choices)
        form: dict[str, Any] = {"type": "string", "title": name, "enum": list(texts)}
        picked = [t for c, t in zip(choices, texts, strict=True) if json_equal(c, value)]
        form.update({"default": picked[0]} if picked else {})
        message = _message(name, value, expects, why, f"Pick the value that is right: {', '.join(texts)}.")
        return FactForm(name, value, Ask(key, message, form=form), tuple(choices))
    if isinstance(kind, str) and kind in _SCALARS:
        form = {"type": kind, "title": name}
        form.update({"default": value} if _fits(kind, value) else {})
        form.update({k: v for k, v in expects.items() if k in _BOUNDS.get(kind, ()) and _number(v)})
        form.update({"format": expects["format"]} if kind == "string" and expects.get("format") in _FORMATS else {})
        message = _message(name, value, expects, why, f"Check the value, or correct it ({kind}).")
        return FactForm(name, value, Ask(key, message, form=form))
    return FactForm(name, value, Ask(key, fact_message(name, value)))


def _message(name: str, value: Any, expects: Mapping[str, Any], why: str, todo: str) -> str:
    """Which fact, why it is asked, what the model passed and what the field is (the release's description)."""
    lines = [f"Confirm {name} {why}. The model passed:", shown_exactly(value), todo]  # (the value on its own line)
    description = expects.get("description")
    if isinstance(description, str) and description:
        lines.append(f"{name}: {description}")
    return "\n".join(lines)


def _fits(kind: str, value: Any) -> bool:
    return isinstance(value, _SCALARS[kind]) and (kind == "boolean" or not isinstance(value, bool))


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def expects_of_failures(failures: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """Each missing field's schema, as a ``blocked`` start names it (``confirmed_field_missing``'s ``expects``)."""
    found: dict[str, Mapping[str, Any]] = {}
    for failure in failures:
        details = failure.get("details")
        if failure.get("code") == FailureCode.CONFIRMED_FIELD_MISSING.value and isinstance(details, Mapping):
            expects = details.get("expects")
            if isinstance(details.get("field"), str) and isinstance(expects, Mapping):
                found[details["field"]] = expects
    return found


def expects_of_offer(offer: Mapping[str, Any] | None) -> dict[str, Mapping[str, Any]]:
    """Each field of a migration target's confirmed state, as the verifier's offer names it."""
    needs = ((offer or {}).get("target_needs") or {}).get("confirmed_state") or []
    return {
        str(n["field"]): n["expects"]
        for n in needs
        if isinstance(n, Mapping) and isinstance(n.get("field"), str) and isinstance(n.get("expects"), Mapping)
    }
