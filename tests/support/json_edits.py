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


def set_at(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    """A deep copy of ``value`` with ``new`` at ``path`` (a new key if the parent object lacks it)."""
    out = copy.deepcopy(value)
    target = out
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = new
    return out


def delete_at(value: Any, path: tuple[Any, ...]) -> Any:
    """A deep copy of ``value`` without the key or item at ``path``."""
    out = copy.deepcopy(value)
    target = out
    for part in path[:-1]:
        target = target[part]
    del target[path[-1]]
    return out
