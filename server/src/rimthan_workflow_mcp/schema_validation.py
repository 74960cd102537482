"""A tool's declared schema, compiled once: a fast verdict on every call, the same refusal as before.

Every ``tools/call`` checks its arguments against the tool's input schema and
its result against the output schema. Python ``jsonschema`` spent 1-7 ms per
check (``$ref`` resolution, one ``evolve`` per keyword), more than half of a
call. ``jsonschema-rs`` (a compiled Draft 2020-12 validator) gives the verdict
in microseconds; only when it refuses does Python ``jsonschema`` explain why,
so a refusal names the same JSON pointer, schema path and message as it always
did. The two are kept in agreement by a property test over fuzzed arguments
and results (tests/attacks/test_attacks_fast_schema.py); where they could
disagree, the stricter answer wins: a value either refuses is refused, and a
value the fast validator cannot read (a lone surrogate, a non-string key) is
checked by Python ``jsonschema`` alone.

Compiled validators are shared by schema digest: the runtime state is built
more than once per process (pre-flight, serve) and two tools share an output
schema. A tool's schemas are compiled on its first call
(:class:`CompiledSchemas`), not at start: listing the tools needs none of them,
so neither validator is imported before then.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rimthan_workflow_registry.canonical import digest_value

if TYPE_CHECKING:
    import jsonschema_rs
    from rimthan_workflow_registry.jsonschema_formats import Draft202012Validator

MAX_MESSAGE_CHARS = 600


@dataclass(frozen=True)
class SchemaProblem:
    """The most relevant violation: where in the instance, which schema keyword, and what is wrong."""

    pointer: str
    schema_path: str
    message: str


@dataclass(frozen=True)
class CompiledSchema:
    """One schema compiled for both validators; ``problem`` is ``None`` exactly when the value is valid."""

    fast: jsonschema_rs.Draft202012Validator
    explain: Draft202012Validator

    def problem(self, instance: Any) -> SchemaProblem | None:
        try:
            if self.fast.is_valid(instance):
                return None
        except (ValueError, TypeError, OverflowError):  # a value the fast validator cannot read
            pass
        from rimthan_workflow_registry.jsonschema_formats import best_match

        error = best_match(self.explain.iter_errors(instance))
        if error is not None:
            return SchemaProblem(
                pointer=_pointer(error.absolute_path),
                schema_path="/".join(str(p) for p in error.schema_path),
                message=_short(error.message),
            )
        return self._fast_only(instance)

    def _fast_only(self, instance: Any) -> SchemaProblem | None:
        """Refused by the fast validator alone (its ECMA-262 ``$`` does not match before a final newline)."""
        try:
            first = next(iter(self.fast.iter_errors(instance)), None)
        except (ValueError, TypeError, OverflowError):
            return None  # unreadable by the fast validator and valid for jsonschema
        if first is None:
            return None
        return SchemaProblem(
            pointer=_pointer(first.instance_path),
            schema_path="/".join(str(p) for p in first.schema_path),
            message=_short(first.message),
        )


_compiled: dict[str, CompiledSchema] = {}
_lock = threading.Lock()


def compiled_schema(schema: Mapping[str, Any]) -> CompiledSchema:
    """``schema`` compiled once per process (keyed by the digest of its canonical JSON); never fetches a ``$ref``."""
    key = digest_value(schema)
    with _lock:
        found = _compiled.get(key)
        if found is None:
            import jsonschema_rs  # on the first call that needs a schema: a start lists tools without either
            from rimthan_workflow_registry.jsonschema_formats import Draft202012Validator

            plain = dict(schema)
            found = CompiledSchema(
                fast=jsonschema_rs.Draft202012Validator(plain, validate_formats=False, offline=True),
                explain=Draft202012Validator(plain),
            )
            _compiled[key] = found
    return found


class CompiledSchemas(Mapping[str, CompiledSchema]):
    """Tool name -> its schema, compiled (:func:`compiled_schema`) on first use, then kept."""

    def __init__(self, schemas: Mapping[str, Mapping[str, Any]]) -> None:
        self._schemas = dict(schemas)
        self._compiled: dict[str, CompiledSchema] = {}

    def __getitem__(self, name: str) -> CompiledSchema:
        found = self._compiled.get(name)
        if found is None:  # two first calls at once both get compiled_schema's one shared object
            found = self._compiled[name] = compiled_schema(self._schemas[name])
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._schemas)

    def __len__(self) -> int:
        return len(self._schemas)


def _pointer(path: Any) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def _short(message: str) -> str:
    return message if len(message) <= MAX_MESSAGE_CHARS else message[:MAX_MESSAGE_CHARS] + "…"
