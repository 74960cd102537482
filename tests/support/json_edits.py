"""Edits of a JSON value for property tests: every location in it, and copies with one location changed."""

from __future__ import annotations

import copy
from typing import Any


def pointers(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every location in a JSON value (keys of objects, indexes of arrays), the root excluded."""
    found = [path] if path else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += pointers(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += pointers(item, (*path, index))
    return found


def replaced_at(value: Any, path: tuple[Any, ...], new: Any = None, *, delete: bool = False) -> Any:
    """``value`` with ``new`` at ``path`` (or the key or item there deleted), copying only the containers on the path.

    Everything off the path is shared with ``value``: cheap enough for a fuzz loop's thousands of edits, but the
    result must not be changed in place (``set_at`` and ``delete_at`` give copies that may be).
    """
    if not path:
        return new
    head, rest = path[0], path[1:]
    out = copy.copy(value)
    if rest:
        out[head] = replaced_at(value[head], rest, new, delete=delete)
    elif delete:
        del out[head]
    else:
        out[head] = new
    return out


def set_at(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    """A deep copy of ``value`` with ``new`` at ``path`` (a new key if the parent object lacks it)."""
    return replaced_at(copy.deepcopy(value), path, new)


def delete_at(value: Any, path: tuple[Any, ...]) -> Any:
    """A deep copy of ``value`` without the key or item at ``path``."""
    return replaced_at(copy.deepcopy(value), path, delete=True)
