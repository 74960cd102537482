"""A catalogue JSON Schema: Python jsonschema's verdict, at jsonschema-rs speed where that is exact.

``prepare_step_validation`` checks every JSON artifact against the schema its
step declares, and every call checks the confirmed state against the
workflow's schema. Python jsonschema is the reference (its messages and JSON
pointers are what a refusal says), but it spent 1-3 ms per artifact on
``evolve``/``descend`` and ``$ref`` lookups: most of a prepare. jsonschema-rs,
compiled once per schema on first use, says "valid" in microseconds.

It is asked only where its "valid" is Python jsonschema's "valid":

- ``pattern`` is checked with Python's ``re.search``, as Python jsonschema does
  (ECMA-262's ``$`` does not match before a final newline, its ``\\d`` is
  ASCII only), and every ``format`` with Python jsonschema's own format checker
  (the checkers docs/security.md lists);
- a schema using ``patternProperties`` (property names matched in
  jsonschema-rs's regex dialect) or ``multipleOf`` (its float remainder accepts
  ``0.3`` as a multiple of ``0.1``; Python's does not) is never given to it;
- a value it cannot read (a lone surrogate) is left to Python jsonschema.

Whenever it says "invalid", Python jsonschema decides and explains, so every
refusal is exactly the one Python jsonschema gives, and nothing Python
jsonschema accepts is refused. tests/core/test_catalogue_schema.py throws
mutated artifacts at both.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cached_property
from typing import TYPE_CHECKING, Any

from rimthan_workflow_registry.jsonschema_formats import FORMAT_CHECKER, Draft202012Validator, ValidationError
from rimthan_workflow_registry.release.schema_refs import NO_REMOTE_REFERENCES

if TYPE_CHECKING:
    import jsonschema_rs

# Keywords whose jsonschema-rs reading can accept what Python jsonschema refuses: such a schema stays Python-only.
PYTHON_ONLY_KEYWORDS = frozenset({"patternProperties", "multipleOf"})


class _PythonPattern:
    """``pattern`` as Python jsonschema applies it: ``re.search`` on strings, anything else passes."""

    def __init__(self, parent_schema: Any, value: str, schema_path: Any) -> None:
        self._regex = re.compile(value)

    def validate(self, instance: Any) -> None:
        if isinstance(instance, str) and not self._regex.search(instance):
            raise ValueError(f"{instance!r} does not match {self._regex.pattern!r}")


def _python_format(name: str) -> Any:
    def conforms(instance: str) -> bool:
        return bool(FORMAT_CHECKER.conforms(instance, name))

    return conforms


class CatalogueSchema:
    """One catalogue schema: Python jsonschema (the reference) and, where exact, its jsonschema-rs fast path."""

    def __init__(self, document: Any) -> None:
        self.schema = document
        self.explain = Draft202012Validator(document, format_checker=FORMAT_CHECKER, registry=NO_REMOTE_REFERENCES)

    @cached_property
    def fast(self) -> jsonschema_rs.Validator | None:
        """The compiled fast validator, or ``None`` where it could disagree with Python jsonschema."""
        if not isinstance(self.schema, dict) or _uses(self.schema, PYTHON_ONLY_KEYWORDS):
            return None
        import jsonschema_rs  # on first use: the packager and `rimthan-pack verify` never pay its import

        try:
            return jsonschema_rs.Draft202012Validator(
                self.schema,
                formats={name: _python_format(name) for name in FORMAT_CHECKER.checkers},
                validate_formats=True,
                keywords={"pattern": _PythonPattern},
                offline=True,
            )
        except (ValueError, TypeError, re.error):  # a schema it cannot compile: Python jsonschema alone
            return None

    def iter_errors(self, instance: Any) -> Iterator[ValidationError]:
        """Python jsonschema's errors for ``instance``; none, without asking it, when the fast path passes it."""
        if self._fast_pass(instance):
            return iter(())
        return self.explain.iter_errors(instance)

    def is_valid(self, instance: Any) -> bool:
        return self._fast_pass(instance) or self.explain.is_valid(instance)

    def _fast_pass(self, instance: Any) -> bool:
        fast = self.fast
        if fast is None:
            return False
        try:
            return fast.is_valid(instance)
        except (ValueError, TypeError, OverflowError):  # a value the fast validator cannot read
            return False


def _uses(node: Any, keywords: frozenset[str]) -> bool:
    """Whether any object in ``node`` has one of ``keywords`` as a key (a property of that name counts too)."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if not keywords.isdisjoint(item):
                return True
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False
