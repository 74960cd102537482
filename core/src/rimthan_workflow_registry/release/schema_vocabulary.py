"""Every keyword in a catalogue JSON Schema is one Draft 2020-12 defines, or an annotation the author marks ``x-``.

JSON Schema ignores a keyword it does not know, and the 2020-12 metaschema
allows one, so a misspelt keyword (``minItem`` for ``minItems``, ``requird``,
``propertes``) passes ``check_schema``, builds, signs and serves, and the
schema checks less than its author meant. ``rimthan-pack build`` refuses it
(``schema_invalid``, with the file, the JSON pointer and the keyword meant).
The keywords are those of the seven 2020-12 vocabularies, read from
jsonschema's own metaschemas (:func:`draft202012_keywords`). A key starting
``x-`` is the author's own annotation and is allowed.

Only schema positions are walked: the values under ``properties``,
``patternProperties``, ``$defs`` and ``dependentSchemas``, the entries of
``allOf``, ``anyOf``, ``oneOf`` and ``prefixItems``, and the schema under each
single-subschema keyword; data (``enum``, ``const``, ``default``,
``examples``) and annotations are not schemas and are not read.

A build-time authoring check only: the loader does not run it, so a release
signed before it keeps loading. Passes are remembered like the metaschema
check's (``schema_checks``, under their own checker name), so a rebuild of
schemas that passed never imports jsonschema.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from rimthan_workflow_registry.errors import CatalogueError, FailureCode, closest_name, collected

from .schema_checks import SCHEMA_CHECKS, validator_version

AUTHOR_PREFIX = "x-"  # an annotation of the author's own: allowed anywhere a keyword is
_ONE_SCHEMA = frozenset(
    {
        "additionalProperties",
        "contains",
        "contentSchema",
        "else",
        "if",
        "items",
        "not",
        "propertyNames",
        "then",
        "unevaluatedItems",
        "unevaluatedProperties",
    }
)
_NAMED_SCHEMAS = frozenset({"$defs", "dependentSchemas", "patternProperties", "properties"})
_LISTED_SCHEMAS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
SUBSCHEMA_KEYWORDS = _ONE_SCHEMA | _NAMED_SCHEMAS | _LISTED_SCHEMAS


def check_schema_keywords(schemas: Mapping[str, Any], read: Callable[[str], bytes]) -> None:
    """Refuse (``schema_invalid``) every keyword in ``schemas`` that Draft 2020-12 does not define, each said.

    ``schemas``: each schema's path and parsed document; ``read``: its bytes, the key its pass is remembered under.
    One refusal carries them all (the first, the others in ``also``), so one build shows every misspelling.
    """
    checker = f"vocabulary:{validator_version()}"
    raw = {path: read(path) for path in schemas}
    unseen = [path for path in schemas if not SCHEMA_CHECKS.passed(raw[path], checker)]
    if not unseen:
        return
    from rimthan_workflow_registry.jsonschema_formats import draft202012_keywords

    known = draft202012_keywords()
    failures = [
        _unknown(path, (*where, keyword), keyword, known)
        for path in unseen
        for where, keyword in _keywords(schemas[path], ())
        if keyword not in known and not keyword.startswith(AUTHOR_PREFIX)
    ]
    if failures:
        raise collected(failures)
    SCHEMA_CHECKS.remember(raw.values(), checker)  # reached only when every schema passed


def _keywords(schema: Any, where: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], str]]:
    """Each keyword of ``schema`` and of its subschemas, depth first in document order, with the schema's place."""
    if not isinstance(schema, dict):
        return  # a boolean schema has no keywords; anything else is the metaschema's to refuse
    for keyword, value in schema.items():
        yield where, keyword
        for place, subschema in _subschemas(keyword, value):
            yield from _keywords(subschema, (*where, keyword, *place))


def _subschemas(keyword: str, value: Any) -> Iterator[tuple[tuple[str, ...], Any]]:
    if keyword in _ONE_SCHEMA:
        yield (), value
    elif keyword in _NAMED_SCHEMAS and isinstance(value, dict):
        yield from (((name,), schema) for name, schema in value.items())
    elif keyword in _LISTED_SCHEMAS and isinstance(value, list):
        yield from (((str(index),), schema) for index, schema in enumerate(value))


def _unknown(path: str, parts: tuple[str, ...], keyword: str, known: frozenset[str]) -> CatalogueError:
    from jsonpointer import JsonPointer

    pointer = JsonPointer.from_parts(list(parts)).path
    names = _meant(keyword, known)
    meant = " or ".join(repr(name) for name in names)
    guess = f" (did you mean {meant}?)" if names else ""
    fix = {0: "use a Draft 2020-12 keyword", 1: f"rename it {meant}"}.get(len(names), f"replace it with {meant}")
    return CatalogueError(
        FailureCode.SCHEMA_INVALID,
        f"unknown JSON Schema keyword {keyword!r}{guess} at JSON pointer {pointer!r} inside the schema: "
        "Draft 2020-12 ignores a keyword it does not define, so the schema would check less than it says",
        path=path,
        next_step=f"{fix}, or, for an annotation of your own, start its name with {AUTHOR_PREFIX!r} "
        f"({AUTHOR_PREFIX}{keyword} is kept and never checked)",
    )


def _meant(keyword: str, known: frozenset[str]) -> tuple[str, ...]:
    """What ``keyword`` stands for: an earlier draft's replacements (``definitions``: ``$defs``), or its closest."""
    from rimthan_workflow_registry.jsonschema_formats import draft202012_retired_keywords

    replaced = draft202012_retired_keywords().get(keyword)
    if replaced:
        return replaced
    closest = closest_name(keyword, known)
    return (closest,) if closest else ()
