"""A fact whose JSON type is not the one its field takes, caught before the person is asked to confirm it.

The model passes facts as it heard them: two options said in one sentence come as one text, where the
workflow's confirmed-state schema takes a list; a deadline comes as "31 March 2027" where the field takes
YYYY-MM-DD. The verifier refuses such a value, but only after the person confirmed every fact of the call in a
form, and its words ("is not of type 'array'") say neither what the field takes nor that the user's answer was
fine. The field's ``type`` (and a ``date`` format) in the release, the same schema a fact's form reads
(:mod:`.fact_forms`), is checked first: a fact of another shape is refused with what the field takes, the person
not asked, nothing recorded. A field whose type the release does not give is left to the verifier.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any

from .fact_forms import Expects
from .words import shown_exactly

_TAKES = {  # a JSON Schema type -> (what the field takes, in words; the Python types of a value of it)
    "array": ("a list (a JSON array)", (list, tuple)),
    "object": ("an object (a JSON object)", (dict,)),
    "string": ("a text (a JSON string)", (str,)),
    "integer": ("a whole number", (int,)),
    "number": ("a number", (int, float)),
    "boolean": ("true or false", (bool,)),
}
_DATE = "a date written YYYY-MM-DD (e.g. 2027-03-31)"
_AS_DATE = "if the user named a day, pass it written that way; if not, ask them for the day"
_OF_ITEMS = {"string": " of texts", "object": " of objects", "integer": " of whole numbers", "number": " of numbers"}


@dataclass(frozen=True)
class Misshapen:
    """A fact the model passed in another shape than its field takes: ``takes`` and ``passed`` in words, and
    ``todo``, how to pass it (a date in words may be a day the user named, or no day at all: theirs to say)."""

    name: str
    takes: str
    passed: str
    todo: str


def misshapen(facts: Mapping[str, Any], expects: Expects) -> tuple[Misshapen, ...]:
    """Each of ``facts`` whose value is not of the type its field's schema (in ``expects``) declares."""
    found = []
    for name, value in facts.items():
        kind = (expects.get(name) or {}).get("type")
        if isinstance(kind, str) and kind in _TAKES and not _is(kind, value):
            found.append(Misshapen(name, _takes(kind, expects[name]), _kind_of(value), _as_type(name, kind)))
        elif kind == "string" and expects[name].get("format") == "date" and not _a_date(value):
            found.append(Misshapen(name, _DATE, shown_exactly(value), _AS_DATE))
    return tuple(found)


def shape_words(found: tuple[Misshapen, ...], undone: str, tool: str, elicits: bool) -> str:
    """The refusal of ``found``: what each field takes, that nothing happened (``undone``), the call to make."""
    unasked = ", and the user was not asked to confirm any fact" if elicits else ""
    return (f"Nothing was done: {'; '.join(_words(m) for m in found)}. {undone[:1].upper()}{undone[1:]}{unasked}. "
            f"Call {tool} again with every fact in facts, each in the form its field takes.")  # fmt: skip


def _words(found: Misshapen) -> str:
    return f"{found.name} takes {found.takes}, and you passed {found.passed}: {found.todo}"


def _as_type(name: str, kind: str) -> str:
    """How to pass a value of the field's type: the shape is the model's to fix, the user's answer stands."""
    how = (f'pass each of the values the user gave as one item, e.g. "{name}": ["...", "..."]' if kind == "array"
           else "pass the user's answer as that")  # fmt: skip
    return f"{how} (the shape of the value, not the user's answer: do not ask them again for it)"


def _a_date(value: str) -> bool:
    """A calendar date as JSON Schema's ``date`` format writes it (RFC 3339 full-date), as the verifier checks it."""
    try:
        return len(value) == 10 and date.fromisoformat(value).isoformat() == value
    except ValueError:
        return False


def _is(kind: str, value: Any) -> bool:
    if isinstance(value, bool) and kind != "boolean":
        return False
    if kind == "integer" and isinstance(value, float):  # 5.0 is a whole number, as JSON Schema (the verifier) reads it
        return value.is_integer()
    return isinstance(value, _TAKES[kind][1])


def _takes(kind: str, schema: Mapping[str, Any]) -> str:
    items = schema.get("items")
    item = items.get("type") if kind == "array" and isinstance(items, Mapping) else None
    return _TAKES[kind][0] + (_OF_ITEMS.get(item, "") if isinstance(item, str) else "")


def _kind_of(value: Any) -> str:
    for kind, (words, _types) in _TAKES.items():
        if kind != "number" and _is(kind, value):
            return words
    if isinstance(value, float):
        return "a number"
    return "null" if value is None else "another kind of value"
