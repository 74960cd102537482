"""A package's public names imported from their modules on first use.

``release`` and ``run`` declare every public name with its home module; a
name is imported when it is first read and then kept in the package's
namespace, so importing one light module of a package (a CLI's start-up, a
server start that only lists tools) does not import the rest. The import
system's per-module locks make a first use from several threads safe.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def first_use_getattr(package: str, homes: Mapping[str, str], namespace: dict[str, Any]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: each name in ``homes`` from its module, then kept."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(home), name)
        namespace[name] = value
        return value

    return __getattr__
