"""Python jsonschema, imported without its format libraries: each loads on the first check of its format.

``import jsonschema`` imports a library for each format it can check: fqdn,
rfc3986-validator, rfc3339-validator, uri-template and isoduration (with arrow
and dateutil). That is about 150 M instructions, a sixth of a server start,
for checks a start with a warm state directory never makes. jsonschema
registers those checkers only while it is first imported, and with
from-imports, so a lazy module loader cannot defer them. Instead this module
imports jsonschema with those five libraries hidden (jsonschema then skips
their checkers, as it does when one is not installed), and registers in their
place checkers that import their library on first call. The registrations are
jsonschema's own (same names in the same drafts, same exceptions, same
function bodies), in jsonschema's own format checkers, so
``Draft202012Validator.FORMAT_CHECKER`` (which ``check_schema`` uses for the
metaschema's ``uri`` and ``uri-reference``) and every other checker give
exactly jsonschema's verdicts. tests/core/test_jsonschema_formats.py compares
every format's verdict with a copy of jsonschema's eager checkers.

Every Rimthan module imports jsonschema through this one (the same test keeps
it so): whichever imports it first decides whether the libraries load at start.
If jsonschema was imported before (by a host program, say), its eager checkers
are kept and nothing is registered.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from importlib.util import find_spec

_DEFERRED_LIBRARIES = ("fqdn", "rfc3986_validator", "rfc3339_validator", "uri_template", "isoduration")


def _import_jsonschema_without_format_libraries() -> frozenset[str]:
    """Import jsonschema with the deferred libraries hidden; the ones its first import did not see."""
    if "jsonschema" in sys.modules:
        return frozenset()
    hidden = [name for name in _DEFERRED_LIBRARIES if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]  # `import name` raises ImportError; jsonschema skips it
    try:
        import jsonschema  # noqa: F401
    finally:
        for name in hidden:
            if sys.modules.get(name, ...) is None:
                del sys.modules[name]
    return frozenset(hidden)


_UNSEEN = _import_jsonschema_without_format_libraries()

from jsonschema import (  # noqa: E402  (after the import above, which must come first)
    Draft3Validator,
    Draft4Validator,
    Draft6Validator,
    Draft7Validator,
    Draft201909Validator,
    Draft202012Validator,
    FormatChecker,
    SchemaError,
    ValidationError,
)
from jsonschema.exceptions import FormatError, best_match  # noqa: E402

__all__ = [
    "FORMAT_CHECKER",
    "Draft202012Validator",
    "FormatChecker",
    "SchemaError",
    "ValidationError",
    "best_match",
    "draft202012_keywords",
    "draft202012_retired_keywords",
]

# The checker that validates Draft 2020-12 formats (and the 2020-12 metaschema in check_schema).
FORMAT_CHECKER = Draft202012Validator.FORMAT_CHECKER
_DRAFTS = (Draft3Validator, Draft4Validator, Draft6Validator, Draft7Validator, Draft201909Validator)


def draft202012_keywords() -> frozenset[str]:
    """Every keyword of the Draft 2020-12 vocabularies, read from jsonschema's own copies of their metaschemas.

    The 2020-12 metaschema is the ``allOf`` of one metaschema per vocabulary
    (core, applicator, unevaluated, validation, meta-data, format-annotation,
    content), each listing its keywords under ``properties``. The metaschema's
    own ``properties`` (``definitions``, ``dependencies``, ``$recursiveRef``,
    ``$recursiveAnchor``) are earlier drafts' keywords, in no 2020-12 vocabulary.
    """
    from urllib.parse import urljoin

    from jsonschema_specifications import REGISTRY  # type: ignore[import-untyped]

    meta = Draft202012Validator.META_SCHEMA
    keywords: set[str] = set()
    for part in meta["allOf"]:
        keywords.update(REGISTRY.contents(urljoin(meta["$id"], part["$ref"]))["properties"])
    return frozenset(keywords)


def draft202012_retired_keywords() -> dict[str, tuple[str, ...]]:
    """Earlier drafts' keywords the 2020-12 metaschema still lists, each with the 2020-12 keywords replacing it.

    Read from the metaschema's own notes (``"definitions" has been replaced by "$defs".``): the quoted
    names after the first are the replacements.
    """
    import re

    retired: dict[str, tuple[str, ...]] = {}
    for keyword, entry in Draft202012Validator.META_SCHEMA["properties"].items():
        retired[keyword] = tuple(re.findall(r'"([^"]+)"', entry.get("$comment", ""))[1:])
    return retired


# The checkers below are jsonschema/_format.py's, with their library imported on the first call.
def _is_host_name(instance: object) -> bool:
    if not isinstance(instance, str):
        return True
    from fqdn import FQDN

    return bool(FQDN(instance, min_labels=1).is_valid)


def _is_uri(instance: object) -> bool:
    if not isinstance(instance, str):
        return True
    return _rfc3986(instance, "URI")


def _is_uri_reference(instance: object) -> bool:
    if not isinstance(instance, str):
        return True
    return _rfc3986(instance, "URI_reference")


def _rfc3986(instance: str, rule: str) -> bool:
    from rfc3986_validator import validate_rfc3986  # type: ignore[import-untyped]

    return bool(validate_rfc3986(instance, rule=rule))


def _is_datetime(instance: object) -> bool:
    if not isinstance(instance, str):
        return True
    from rfc3339_validator import validate_rfc3339  # type: ignore[import-untyped]

    return bool(validate_rfc3339(instance.upper()))


def _is_time(instance: object) -> bool:
    if not isinstance(instance, str):
        return True
    return _is_datetime("1970-01-01T" + instance)


def _is_uri_template(instance: object) -> bool:
    if not isinstance(instance, str):
        return True
    import uri_template

    return bool(uri_template.validate(instance))


def _is_duration(instance: object) -> bool:
    if not isinstance(instance, str):
        return True
    import isoduration  # type: ignore[import-untyped]

    try:
        isoduration.parse_duration(instance)
    except isoduration.DurationParsingException as error:
        # jsonschema registers this checker with raises=DurationParsingException, which cannot be named before
        # the import: raise what FormatChecker.check raises then (same message, same cause).
        raise FormatError(f"{instance!r} is not a 'duration'", cause=error) from None
    # jsonschema's own rule on top of isoduration's parse, which accepts some strings without a designator.
    return instance.endswith(tuple("DMYWHMS"))


_Check = Callable[[object], bool]
_Raises = type[Exception] | tuple[type[Exception], ...]
# jsonschema's registrations of these checkers: library, the format's name in drafts 3, 4, 6, 7, 2019-09 and
# 2020-12 (None: not checked in that draft), the exceptions that mean "not this format", the checker.
_REGISTRATIONS: tuple[tuple[str, tuple[str | None, ...], _Raises, _Check], ...] = (
    ("fqdn", ("host-name", "hostname", "hostname", "hostname", "hostname", "hostname"), ValueError, _is_host_name),
    ("rfc3986_validator", ("uri",) * 6, (), _is_uri),
    ("rfc3986_validator", (None, None) + ("uri-reference",) * 4, ValueError, _is_uri_reference),
    ("rfc3339_validator", ("date-time",) * 6, (), _is_datetime),
    ("rfc3339_validator", (None, None, None) + ("time",) * 3, (), _is_time),
    ("uri_template", (None, None) + ("uri-template",) * 4, (), _is_uri_template),
    ("isoduration", (None,) * 4 + ("duration",) * 2, (), _is_duration),
)


def _register_deferred_checkers(
    unseen: frozenset[str], checkers: Sequence[FormatChecker], defaults: dict[str, tuple[_Check, _Raises]]
) -> None:
    """Register each checker jsonschema skipped because its (installed) library was hidden, where it would have.

    ``checkers`` are the format checkers of drafts 3, 4, 6, 7, 2019-09 and 2020-12; ``defaults`` what
    ``FormatChecker()`` starts from.
    """
    for library, names, raises, check in _REGISTRATIONS:
        if library not in unseen or find_spec(library) is None:
            continue
        for checker, name in zip(checkers, names, strict=True):
            if name is not None and name not in checker.checkers:
                checker.checks(name, raises)(check)
        # jsonschema also registers each checker for FormatChecker() under its latest name, unless a later
        # registration took that name (draft 3's "time" does): never replace one.
        latest = next(name for name in reversed(names) if name is not None)
        defaults.setdefault(latest, (check, raises))


_register_deferred_checkers(
    _UNSEEN, [validator.FORMAT_CHECKER for validator in (*_DRAFTS, Draft202012Validator)], FormatChecker.checkers
)
