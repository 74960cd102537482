"""A receipt table's JSON text, kept from the verified token and spliced when a few receipts change.

A checkpoint token's payload is ``json.dumps(claims, separators=(",", ":"))``
(what PyJWT writes), and each receipt table in it is written sorted by name.
A table read from a verified token keeps that text (:func:`receipt_texts`
finds it, and keeps it only after proving the payload is exactly the
claims' own serialisation around it); re-issuing then replaces, inserts or
removes the changed receipts' members in the text with ``str.find`` and
slicing instead of serialising every receipt again. A member is found by its
key, ``"name":``: for a name of the plain characters below, a comma or brace
then that key can only be the start of a member of this very table (a quote
after a comma or brace always opens a string, and receipt values are flat
arrays of hex digits, ``"pass"`` and integers). Any other change gives up the
text, and the table is written by ``json.dumps`` again: the bytes are the
same either way (tested against ``json.dumps`` on random tables and changes).
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Collection, Mapping
from typing import Any

TABLES = ("artifacts", "validators")
_PLACEHOLDER = '"artifacts":{},"validators":{}'
_PLAIN_NAME = re.compile(r"[A-Za-z0-9._@+/-]{1,128}")


def claims_json(value: Any) -> str:
    """JSON exactly as the checkpoint token's payload holds it (``jwt.encode``'s ``json.dumps``)."""
    return json.dumps(value, separators=(",", ":"))


def payload_json(head: Mapping[str, Any], artifacts: str, validators: str) -> str:
    """The claims' JSON: ``head`` (whose receipt tables are empty) with the two tables' texts in place."""
    text = claims_json(head)
    return text.replace(_PLACEHOLDER, f'"artifacts":{artifacts},"validators":{validators}', 1)


def receipt_texts(claims: Mapping[str, Any], payload: bytes) -> tuple[str | None, str | None]:
    """The texts of the two receipt tables in ``payload``, the verified bytes ``claims`` were parsed from.

    Kept only when ``payload`` is exactly the claims' serialisation around them
    (so each text is the one its table was parsed from) and each table is
    sorted by name; otherwise ``(None, None)``. ``claims`` has passed the
    closed-shape check.
    """
    try:
        text = payload.decode("ascii")
    except UnicodeDecodeError:
        return None, None
    start, middle = text.find(',"artifacts":{'), text.find('},"validators":{')
    end = text.find('},"host":{', middle)
    if min(start, middle, end) < 0 or text.count('"artifacts":') + text.count('"validators":') != 2:
        return None, None
    artifacts, validators = text[start + 13 : middle + 1], text[middle + 15 : end + 1]
    head = {**claims, "artifacts": {}, "validators": {}}
    if payload_json(head, artifacts, validators) != text:
        return None, None
    if any(list(claims[name]) != sorted(claims[name]) for name in TABLES):
        return None, None
    return artifacts, validators


def spliced(
    text: str | None, claims: Mapping[str, Any], changes: Mapping[str, Any], dropped: Collection[str]
) -> str | None:
    """``text`` (the sorted JSON of ``claims``) with ``changes`` set and ``dropped`` removed, or ``None``.

    ``None`` when there is no text or a change cannot be spliced exactly
    (a name of other characters, an entry that is not a flat array).
    """
    if text is None:
        return None
    names = sorted(claims)
    for name in dropped:
        text = _without(text, names, name)
        if text is None:
            return None
    for name, entry in changes.items():
        value = claims_json(entry)
        if not (value.startswith("[") and value.count("]") == 1 and value.endswith("]")):
            return None
        text = _with(text, names, name, value)
        if text is None:
            return None
    return text


def _member(text: str, names: list[str], name: str) -> tuple[int, int] | None:
    """Start and end of ``name``'s member in ``text`` (its comma included when it follows one)."""
    at = bisect.bisect_left(names, name)
    if at == len(names) or names[at] != name:
        return None
    key = f'"{name}":['
    start = 1 if at == 0 else text.find("," + key)
    if start < 0 or (at == 0 and not text.startswith(key, 1)):
        return None
    end = text.index("]", start) + 1
    return start, end


def _without(text: str, names: list[str], name: str) -> str | None:
    if _PLAIN_NAME.fullmatch(name) is None:
        return None
    member = _member(text, names, name)
    if member is None:
        return text
    start, end = member
    names.remove(name)
    if start == 1:  # the first member: drop the comma after it, if any
        return "{" + text[end + 1 :] if text[end] == "," else "{}"
    return text[:start] + text[end:]


def _with(text: str, names: list[str], name: str, value: str) -> str | None:
    if _PLAIN_NAME.fullmatch(name) is None:
        return None
    member = _member(text, names, name)
    if member is not None:
        start, end = member
        lead = "," if start > 1 else ""
        return text[:start] + f'{lead}"{name}":{value}' + text[end:]
    at = bisect.bisect_left(names, name)
    entry = f'"{name}":{value}'
    if not names:
        text = "{" + entry + "}"
    elif at == len(names):
        text = text[:-1] + "," + entry + "}"
    else:
        following = _member(text, names, names[at])
        if following is None:
            return None
        start = following[0]
        text = text[:start] + "," + entry + text[start:] if start > 1 else "{" + entry + "," + text[1:]
    names.insert(at, name)
    return text
