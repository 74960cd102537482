"""A schema ``pattern`` whose matching can backtrack exponentially is refused, at build and at load.

A catalogue schema's ``pattern`` values (and ``patternProperties`` names) are
matched with Python's ``re``, which backtracks, against what a model writes:
every JSON artifact at prepare, every confirmed fact. ``^(a+)+$`` against
forty ``a`` and a ``!`` runs for hours, holding a verifier thread (and
``rimthan-pack check``, on a worked example) all that time. Such a pattern
is refused (``schema_invalid``) by :func:`backtracking_pattern`.

The exponential shape is ambiguity under a repeat: inside a part repeated
more than once, a variable-length repeat whose characters may also be what
comes next (``(a+)+``, ``(\\w+\\s?)+``, ``(x*y*)*``), or alternatives that may
begin with one character (``(a|ab)*``). Characters are compared on a probe
alphabet (ASCII and a few others); a part this check cannot reason about
(a back reference, a repeat of a repeat, a case-insensitive flag) under a
repeat is refused rather than let pass. ``^[a-z]+(-[a-z0-9]+)*$`` and
``^(0[1-9]|1[0-2])$`` pass: their repeats cannot split one text two ways.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from typing import Any

_PROBES = frozenset(chr(c) for c in range(128)) | frozenset("é\u00a0中\u2028\U0001f600")
_ALL = frozenset(_PROBES)
_Chars = frozenset[str]
_EMPTY = frozenset({""})
_CASE_FLAG = re.compile(r"\(\?[a-zA-Z-]*i")  # (?i) or (?i:...): characters compared without case


class _Unsure(Exception):
    """A part whose characters this check cannot tell: refused when it sits under a repeat."""


def backtracking_pattern(schema: Any) -> str | None:
    """The first pattern in ``schema`` whose matching can backtrack exponentially, said; ``None`` if none can."""
    for pattern in _patterns(schema):
        if _exponential(pattern):
            return (
                f"pattern {pattern!r} can take exponential time to match (a repeated part that can split one text "
                "in more than one way); a model's text could hold the verifier for hours: write it so each "
                "character has one place, e.g. ^[a-z]+(-[a-z]+)*$ rather than ^([a-z]+-?)+$"
            )
    return None


def _patterns(schema: Any) -> Iterator[str]:
    """Every ``pattern`` string and ``patternProperties`` name, wherever it sits (fail closed, as formats are)."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("pattern"), str):
                yield node["pattern"]
            if isinstance(node.get("patternProperties"), dict):
                yield from (name for name in node["patternProperties"] if isinstance(name, str))
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def _exponential(pattern: str) -> bool:
    import re._parser as sre  # type: ignore[import-not-found]  # the parse re runs (3.11+): no stub of its own

    try:
        parsed = sre.parse(pattern)
    except (re.error, RecursionError, OverflowError):
        return False
    try:
        if parsed.state.flags & re.IGNORECASE or _CASE_FLAG.search(pattern):
            return _repeats(list(parsed))
        return _ambiguous(list(parsed), under=False)
    except (_Unsure, RecursionError):
        return True


def _repeats(items: list[Any]) -> bool:
    """Whether any repeat of more than one holds a variable part (the plain rule, for a case-insensitive pattern)."""
    return any(_is_repeat(op) and av[1] > 1 and not _fixed(av[2]) for op, av in items) or any(
        _repeats(list(sub)) for op, av in items for sub in _children(op, av)
    )


def _ambiguous(items: list[Any], *, under: bool) -> bool:
    """Whether a repeat in ``items`` (``under``: itself inside one) can split one text more than one way."""
    for op, av in items:
        if _is_repeat(op) and av[1] > 1:
            body = list(av[2])
            if _splits(body, after=_first(body)) or _ambiguous(body, under=True):
                return True
            continue
        if under and str(op) in ("GROUPREF", "GROUPREF_EXISTS"):
            raise _Unsure
        if under and str(op) == "BRANCH" and _alternatives_overlap(av[1]):
            return True
        if any(_ambiguous(list(sub), under=under) for sub in _children(op, av)):
            return True
    return False


def _splits(body: list[Any], *, after: _Chars) -> bool:
    """Whether a variable repeat inside ``body`` may take a character that may also come right after it."""
    for index, (op, av) in enumerate(body):
        rest = body[index + 1 :]
        follow = _first(rest) | (after if _nullable(rest) else frozenset())
        if _is_repeat(op) and av[0] != av[1] and _last(list(av[2])) & follow:
            return True
        if str(op) == "BRANCH" and _alternatives_overlap(av[1]):
            return True
        if str(op) == "SUBPATTERN" and _splits(list(av[3]), after=follow):
            return True
    return False


def _children(op: Any, av: Any) -> Iterator[Any]:
    name = str(op)
    if name == "SUBPATTERN":
        yield av[3]
    elif name in ("ASSERT", "ASSERT_NOT"):
        yield av[1]
    elif name == "BRANCH":
        yield from av[1]
    elif name == "ATOMIC_GROUP":
        yield av
    elif name == "GROUPREF_EXISTS":
        yield from (part for part in av[1:] if part is not None)
    elif _is_repeat(op):
        yield av[2]


def _is_repeat(op: Any) -> bool:
    return str(op) in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")


def _fixed(sub: Any) -> bool:
    low, high = sub.getwidth()
    return bool(low == high)


def _alternatives_overlap(branches: list[Any]) -> bool:
    """Whether two alternatives may begin with one character, or both match nothing ("" marks that)."""
    return _overlap([_first(list(b)) | (_EMPTY if _nullable(list(b)) else frozenset()) for b in branches])


def _overlap(sets: list[_Chars]) -> bool:
    seen: set[str] = set()
    for chars in sets:
        if seen & chars:
            return True
        seen |= chars
    return False


def _nullable(items: list[Any]) -> bool:
    return all(_item_nullable(op, av) for op, av in items)


def _item_nullable(op: Any, av: Any) -> bool:
    name = str(op)
    if _is_repeat(op):
        return bool(av[0] == 0 or _nullable(list(av[2])))
    if name == "SUBPATTERN":
        return _nullable(list(av[3]))
    if name == "BRANCH":
        return any(_nullable(list(b)) for b in av[1])
    return name in ("AT", "ASSERT", "ASSERT_NOT")


def _first(items: list[Any]) -> _Chars:
    """The characters a match of ``items`` may begin with (the probe alphabet's)."""
    return _edge(items, last=False)


def _last(items: list[Any]) -> _Chars:
    """The characters a match of ``items`` may end with."""
    return _edge(items, last=True)


def _edge(items: list[Any], *, last: bool) -> _Chars:
    found: set[str] = set()
    for op, av in reversed(items) if last else items:
        found |= _item_edge(op, av, last=last)
        if not _item_nullable(op, av):
            break
    return frozenset(found)


def _item_edge(op: Any, av: Any, *, last: bool) -> _Chars:
    name = str(op)
    if _is_repeat(op):
        return _edge(list(av[2]), last=last)
    if name == "SUBPATTERN":
        return _edge(list(av[3]), last=last)
    if name == "BRANCH":
        return frozenset().union(*(_edge(list(b), last=last) for b in av[1]))
    return _chars(op, av)


def _chars(op: Any, av: Any) -> _Chars:
    """The probe characters one single-character item matches; anything else is unsure."""
    name = str(op)
    if name in ("AT", "ASSERT", "ASSERT_NOT"):
        return frozenset()
    if name == "LITERAL":
        return frozenset({chr(av)})
    if name == "NOT_LITERAL":
        return _ALL - {chr(av)}
    if name == "ANY":
        return _ALL - {"\n"}
    if name == "IN":
        return _in_chars(tuple(av))
    raise _Unsure


@cache
def _in_chars(items: tuple[Any, ...]) -> _Chars:
    """The probe characters a character set matches (a schema's patterns repeat a few sets many times)."""
    return frozenset(c for c in _PROBES if _in_set(items, c))


def _in_set(items: tuple[Any, ...], char: str) -> bool:
    negate, hit = False, False
    for op, av in items:
        name = str(op)
        if name == "NEGATE":
            negate = True
        elif name == "LITERAL":
            hit = hit or char == chr(av)
        elif name == "RANGE":
            hit = hit or av[0] <= ord(char) <= av[1]
        elif name == "CATEGORY":
            hit = hit or _in_category(str(av), char)
        else:
            raise _Unsure
    return hit != negate


_CATEGORY_PROBES = {"DIGIT": r"\d", "SPACE": r"\s", "WORD": r"\w"}


def _in_category(category: str, char: str) -> bool:
    name = category.removeprefix("CATEGORY_").removeprefix("NOT_")
    if name not in _CATEGORY_PROBES:
        raise _Unsure
    inside = re.fullmatch(_CATEGORY_PROBES[name], char) is not None
    return inside != ("NOT_" in category)
