"""Strict JSON: what every JSON document Rimthan reads goes through (a release's, a run's, a host's files).

:func:`parse_strict_json` refuses what ``json.loads`` lets through: a repeated
key (:class:`DuplicateKeyError`), ``NaN``/``Infinity`` and a number that
overflows to infinity (``1e999``), invalid UTF-8, and nesting past a bound;
:func:`find_float` finds a float where a signed record holds integers only.
Split from :mod:`.canonical`, which makes the one byte form of a value and its digests.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

from rimthan_workflow_registry.errors import FailureCode, RegistryError, quoted
from rimthan_workflow_registry.limits import MAX_JSON_DEPTH, depth_exceeds, too_deep_message


class DuplicateKeyError(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(f"duplicate JSON key {quoted(repr(key))}")
        self.key = key


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) < len(pairs):  # a repeated key; the common case (none) is decided in C
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKeyError(key)
            seen.add(key)
    return out


NOT_JSON_PREFIX = "not valid JSON: "  # how parse_strict_json's refusal of bytes json.loads cannot read begins


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name} is not JSON")


def _finite_float(text: str) -> float:
    """A JSON number with a fraction or exponent; ``1e999`` (which Python reads as infinity) is refused."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text} is too large for JSON (it overflows to infinity)")
    return value


def _utf8_text(data: bytes, *, where: str, code: FailureCode) -> str:
    """``data`` decoded; bytes that are not UTF-8 refused at their line and column, not in Python's words."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        from rimthan_workflow_registry.not_utf8 import not_utf8_at  # only for bytes that are not UTF-8

        raise RegistryError(code, f"{NOT_JSON_PREFIX}{not_utf8_at(data, exc.start)} is not UTF-8", path=where) from None


def parse_strict_json(
    data: bytes | str,
    *,
    where: str,
    code: FailureCode,
    max_depth: int = MAX_JSON_DEPTH,
    depth_checked: bool = True,
    known_canonical: bool = False,
) -> Any:
    """Parse JSON refusing duplicate keys, NaN/Infinity (``1e999`` too), invalid UTF-8 and nesting past ``max_depth``.

    Raises ``RegistryError`` with ``code`` (or ``manifest_duplicate_key`` for
    duplicates when parsing a manifest) naming ``where``. ``depth_checked=False``
    leaves the walk over the parsed value for nesting past ``max_depth`` to the
    caller (:func:`depth_exceeds`), which must then do it or bound the depth itself.
    ``known_canonical=True`` says the bytes are known (by digest) to be RFC 8785
    output, which serialises objects and so never repeats a key: the per-object
    duplicate check (a Python call per object) is then left out.
    """
    hook = None if known_canonical else _no_duplicates
    text = data if isinstance(data, str) else _utf8_text(data, where=where, code=code)
    try:
        value = json.loads(text, object_pairs_hook=hook, parse_constant=_refuse_constant, parse_float=_finite_float)
    except RecursionError:
        raise RegistryError(code, too_deep_message("the JSON", max_depth), path=where) from None
    except DuplicateKeyError as exc:
        dup_code = FailureCode.MANIFEST_DUPLICATE_KEY if code is FailureCode.MANIFEST_INVALID else code
        raise RegistryError(dup_code, str(exc), path=where) from None
    except ValueError as exc:
        raise RegistryError(code, f"{NOT_JSON_PREFIX}{exc}", path=where) from None
    if depth_checked and depth_exceeds(value, max_depth):
        raise RegistryError(code, too_deep_message("the JSON", max_depth), path=where)
    return value


def find_float(value: Any) -> str | None:
    """JSON pointer of the first float in ``value`` (``None`` if there is none).

    Signed records hold integers only; ``5.0`` must not pass as ``5`` (JSON
    Schema would accept it as an integer), so manifests are checked with this.
    A manifest lists every file, so the common answer (none) is found by one
    iterative pass that builds no pointers; only a hit is located.
    """
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, float):
            return _float_pointer(value, "")
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return None


def _float_pointer(value: Any, pointer: str) -> str | None:
    if isinstance(value, float):
        return pointer or "/"
    items: Iterable[tuple[str, Any]]
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = ((str(i), v) for i, v in enumerate(value))
    else:
        return None
    for key, item in items:
        found = _float_pointer(item, f"{pointer}/{key}")
        if found is not None:
            return found
    return None
