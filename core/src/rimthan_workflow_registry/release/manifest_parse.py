"""The closed manifest schema and the strict parser of ``manifest.json``.

Split from :mod:`.format` (the records and path rules) because reading is
where a release is attacked: everything here refuses rather than repairs.
The per-file entries, which grow with the release, are checked by
``file_entry_problem`` (the schema's rules without jsonschema's per-keyword
cost); the rest of the manifest by :func:`conforms`, a plain walk of the
schema's own keywords. jsonschema is imported only to explain a manifest
that the plain checks do not accept (a verify or a build never loads it otherwise).
"""

from __future__ import annotations

import operator
import re
from functools import cache
from typing import TYPE_CHECKING, Any

from rimthan_workflow_registry.canonical import SHA256_HEX_PATTERN, canonical_bytes, canonicalization_error
from rimthan_workflow_registry.errors import FailureCode, RegistryError, ReleaseVerificationError
from rimthan_workflow_registry.limits import MAX_JSON_DEPTH, depth_exceeds, too_deep_message
from rimthan_workflow_registry.release.catalogue import ID_PATTERN
from rimthan_workflow_registry.release.format import (
    DEFAULT_MEDIA_TYPE,
    MANIFEST_FORMAT,
    MANIFEST_NAME,
    MEDIA_TYPES_BY_SUFFIX,
    Manifest,
)
from rimthan_workflow_registry.release.paths import MAX_PATH_LENGTH
from rimthan_workflow_registry.release.schema_checks import SCHEMA_CHECKS, canonical_form_version
from rimthan_workflow_registry.strict_json import find_float, parse_strict_json

if TYPE_CHECKING:
    from rimthan_workflow_registry.jsonschema_formats import Draft202012Validator

_HEX64 = f"^{SHA256_HEX_PATTERN}$"
_ID = f"^{ID_PATTERN}$"
_TEXT = {"type": "string", "minLength": 1, "maxLength": 256}
_LONG_TEXT = {"type": "string", "maxLength": 4096}


def _closed(required: list[str], properties: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A JSON object schema that allows exactly ``properties`` and requires ``required``."""
    return {"type": "object", "additionalProperties": False, "required": required, "properties": properties, **extra}


def _array(items: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "array", "items": items, **extra}


_SCOPE = _closed(["name", "profile"], {"name": _TEXT, "profile": _TEXT})
_RELEASE = _closed(
    ["catalogue", "version", "id", "title", "scope"],
    {
        "catalogue": {"type": "string", "pattern": _ID},
        "version": _TEXT,
        "id": _TEXT,
        "title": _LONG_TEXT,
        "scope": _SCOPE,
        "created": {"type": "integer", "minimum": 0},
    },
)
_WORKFLOW = _closed(
    ["id", "version", "owner", "entry_aliases", "title"],
    {
        "id": {"type": "string", "pattern": _ID},
        "version": _TEXT,
        "owner": _TEXT,
        "entry_aliases": _array({"type": "string", "pattern": _ID}, uniqueItems=True),
        "title": _LONG_TEXT,
    },
)
_HOST_ADAPTER = _closed(
    ["id", "version", "harness"], {"id": {"type": "string", "pattern": _ID}, "version": _TEXT, "harness": _TEXT}
)
_FILE_ENTRY = _closed(
    ["path", "sha256", "size", "media_type"],
    {
        "path": {"type": "string", "minLength": 1, "maxLength": MAX_PATH_LENGTH},
        "sha256": {"type": "string", "pattern": _HEX64},
        "size": {"type": "integer", "minimum": 0},
        "media_type": {"enum": sorted({*MEDIA_TYPES_BY_SUFFIX.values(), DEFAULT_MEDIA_TYPE})},
    },
)
MANIFEST_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "urn:rimthan:release-manifest:1",
    **_closed(
        ["format", "release", "workflows", "host_adapters", "files"],
        {
            "format": {"const": MANIFEST_FORMAT},
            "release": _RELEASE,
            "workflows": _array(_WORKFLOW, minItems=1),
            "host_adapters": _array(_HOST_ADAPTER),
            "files": _array(_FILE_ENTRY, minItems=1),
        },
    ),
}
FILE_ENTRY_SCHEMA: dict[str, Any] = MANIFEST_SCHEMA["properties"]["files"]["items"]
# The manifest minus its per-file entries, which grow with the release: those are checked by
# file_entry_problem (the same rules, without jsonschema's per-keyword overhead on 10,000 entries).
_SKELETON_SCHEMA: dict[str, Any] = {
    **MANIFEST_SCHEMA,
    "properties": {**MANIFEST_SCHEMA["properties"], "files": {"type": "array", "minItems": 1}},
}
_FILE_ENTRY_KEYS = frozenset(FILE_ENTRY_SCHEMA["required"])
_MEDIA_TYPES = frozenset(FILE_ENTRY_SCHEMA["properties"]["media_type"]["enum"])
_HEX64_RE = re.compile(SHA256_HEX_PATTERN)  # fullmatch: unlike "$", refuses a trailing newline
_LOWERCASE_HEX = b"0123456789abcdef"
_ENTRY_COLUMNS = operator.itemgetter("path", "sha256", "size", "media_type")


def file_entry_problem(entry: Any) -> str | None:
    """Why ``entry`` breaks ``FILE_ENTRY_SCHEMA`` (jsonschema's message), or ``None`` if it conforms."""
    if _entry_conforms(entry):
        return None
    error = next(_validator("entry").iter_errors(entry), None)
    return error.message if error is not None else "does not match the file entry schema"


def _entry_conforms(entry: Any) -> bool:
    """``FILE_ENTRY_SCHEMA``'s rules in plain Python: a flat object of two strings, an integer and a media type."""
    return bool(
        type(entry) is dict
        and entry.keys() == _FILE_ENTRY_KEYS
        and type(entry["path"]) is str
        and 1 <= len(entry["path"]) <= MAX_PATH_LENGTH
        and type(entry["sha256"]) is str
        and _HEX64_RE.fullmatch(entry["sha256"])
        and type(entry["size"]) is int
        and entry["size"] >= 0
        and type(entry["media_type"]) is str
        and entry["media_type"] in _MEDIA_TYPES
    )


@cache
def _validator(which: str) -> Draft202012Validator:
    """jsonschema's validator of the skeleton or of one file entry, built when a refusal needs its words."""
    from rimthan_workflow_registry.jsonschema_formats import Draft202012Validator

    return Draft202012Validator(_SKELETON_SCHEMA if which == "skeleton" else FILE_ENTRY_SCHEMA)


_JSON_TYPES: dict[str, type] = {"object": dict, "array": list, "string": str, "integer": int}
_ANNOTATIONS = frozenset({"$schema", "$id"})


def conforms(value: Any, schema: dict[str, Any]) -> bool:
    """Whether ``value`` passes ``schema``, for the few keywords the manifest schema uses, in plain Python.

    Never looser than jsonschema (tests/core/test_fast_shape_checks.py): a
    keyword it does not know, a type it does not expect (a float, a bool for an
    integer) or any doubt answers ``False``, and jsonschema decides. What it
    accepts, jsonschema accepts too.
    """
    return all(keyword in _ANNOTATIONS or _holds(value, keyword, rule, schema) for keyword, rule in schema.items())


def _holds(value: Any, keyword: str, rule: Any, schema: dict[str, Any]) -> bool:  # noqa: PLR0911 (one per keyword)
    kind = type(value)
    if keyword == "type":
        return kind is _JSON_TYPES.get(rule)
    if keyword == "properties":
        return kind is dict and all(k not in value or conforms(value[k], sub) for k, sub in rule.items())
    if keyword == "additionalProperties":  # only the closed form: every key is one of "properties"
        return rule is False and kind is dict and value.keys() <= schema.get("properties", {}).keys()
    if keyword == "required":
        return kind is dict and all(k in value for k in rule)
    if keyword == "items":
        return kind is list and all(conforms(item, rule) for item in value)
    if keyword in ("minLength", "minItems"):
        return kind is (str if keyword == "minLength" else list) and len(value) >= rule
    if keyword == "maxLength":
        return kind is str and len(value) <= rule
    if keyword == "pattern":
        return kind is str and re.search(rule, value) is not None
    if keyword == "minimum":
        return kind is int and value >= rule
    if keyword == "const":
        return kind is type(rule) is str and value == rule
    if keyword == "uniqueItems":
        return rule is True and kind is list and all(type(i) is str for i in value) and len(set(value)) == len(value)
    return False


def _invalid(where: str, message: str, code: FailureCode = FailureCode.MANIFEST_INVALID) -> ReleaseVerificationError:
    return ReleaseVerificationError(code, message, path=where)


def parse_manifest(data: bytes, *, where: str = MANIFEST_NAME, sha256: str | None = None) -> Manifest:
    """Parse manifest bytes strictly; the bytes must already be canonical.

    Refuses duplicate keys, anything the closed schema does not allow, floats
    (``5.0`` is not an integer here), unsorted or repeated entries, and bytes
    that differ from their own RFC 8785 form (bytes already seen to be in that
    form, by digest, are not re-serialised, nor searched for repeated keys,
    which that form cannot hold: see ``schema_checks``). The file is
    never re-serialised and accepted: what was signed is exactly what is read.
    ``sha256``: the hex SHA-256 of ``data`` when the caller has it (not recomputed).
    """
    canonical = SCHEMA_CHECKS.passed(data, canonical_form_version(), sha256=sha256)
    try:
        value = parse_strict_json(
            data, where=where, code=FailureCode.MANIFEST_INVALID, depth_checked=False, known_canonical=canonical
        )
    except RegistryError as exc:
        raise _invalid(where, exc.message, exc.code) from None
    if not _well_formed(value):  # something below fails: the checks, in their order, say what
        _check_shape(value, where)
    if not canonical:
        _check_canonical(data, value, where)
    manifest = Manifest.from_json(value, adopt_files=True)  # value is ours alone, its entries checked above
    if value["release"]["id"] != manifest.release.id:
        raise _invalid(where, f"release.id {value['release']['id']!r} is not {manifest.release.id}")
    _check_manifest_order(manifest, where)
    return manifest


def _well_formed(value: Any) -> bool:
    """Whether :func:`_check_shape` would pass, decided in one pass that builds nothing.

    Conforming file entries are flat objects of strings and integers, so only
    the rest of the manifest (small) needs the generic walks for nesting depth
    and floats; the skeleton validator does not descend into the entries.
    """
    if type(value) is not dict or type(value.get("files")) is not list:
        return False
    rest = {**value, "files": []}
    return (
        not depth_exceeds(rest, MAX_JSON_DEPTH)
        and find_float(rest) is None
        and conforms(value, _SKELETON_SCHEMA)
        and _entries_conform(value["files"])
    )


def _entries_conform(entries: list[Any]) -> bool:
    """``all(map(_entry_conforms, entries))``, decided a rule at a time over all entries at C speed.

    Each rule is checked on a column (every entry's path, digest, size or
    media type) with ``map``/``set``/``min``/``max`` instead of one Python
    call per entry, about a fifth of the time for 10,000 entries.
    """
    if not entries:
        return True
    if set(map(type, entries)) != {dict} or set(map(len, entries)) != {len(_FILE_ENTRY_KEYS)}:
        return False
    try:  # an object with exactly as many keys as an entry, all of them an entry's keys: exactly those keys
        paths, digests, sizes, media_types = zip(*map(_ENTRY_COLUMNS, entries), strict=True)
    except KeyError:
        return False
    return (
        set(map(type, paths)) == {str}
        and min(map(len, paths)) >= 1
        and max(map(len, paths)) <= MAX_PATH_LENGTH
        and set(map(type, digests)) == {str}
        and set(map(len, digests)) == {64}
        and _all_lowercase_hex("".join(digests))
        and set(map(type, sizes)) == {int}
        and min(sizes) >= 0
        and set(map(type, media_types)) == {str}
        and set(media_types) <= _MEDIA_TYPES
    )


def _all_lowercase_hex(text: str) -> bool:
    """Whether every character of ``text`` is one of ``0-9a-f`` (what ``_HEX64_RE`` allows)."""
    return text.isascii() and not text.encode("ascii").translate(None, _LOWERCASE_HEX)


def _check_shape(value: Any, where: str) -> None:
    """Nesting depth, no floats, the closed schema: raise the first failure, in that order."""
    if depth_exceeds(value, MAX_JSON_DEPTH):
        raise _invalid(where, too_deep_message("the JSON", MAX_JSON_DEPTH))
    pointer = find_float(value)
    if pointer is not None:
        raise _invalid(where, f"number at {pointer} is not an integer (floats are not allowed)")
    error = next(iter(sorted(_validator("skeleton").iter_errors(value), key=lambda e: list(e.absolute_path))), None)
    if error is not None:
        at = "/" + "/".join(str(p) for p in error.absolute_path)
        raise _invalid(where, f"does not match the manifest schema at {at}: {error.message}")
    for index, entry in enumerate(value["files"]):
        problem = file_entry_problem(entry)
        if problem is not None:
            raise _invalid(where, f"does not match the manifest schema at /files/{index}: {problem}")


def _check_canonical(data: bytes, value: Any, where: str) -> None:
    """The bytes are exactly the RFC 8785 form of what they parse to."""
    try:
        canonical = canonical_bytes(value)
    except canonicalization_error() as exc:  # lone surrogates, integers beyond 2**53: no canonical form
        raise _invalid(where, f"holds a value RFC 8785 cannot represent ({exc})") from None
    if canonical != data:
        raise _invalid(where, "bytes are not canonical RFC 8785 JSON", FailureCode.MANIFEST_NOT_CANONICAL)


def _check_manifest_order(manifest: Manifest, where: str) -> None:
    keyed: list[tuple[str, list[Any]]] = [
        ("files", list(manifest.paths)),
        ("workflows", [w.sort_key for w in manifest.workflows]),
        ("host_adapters", [a.sort_key for a in manifest.host_adapters]),
    ]
    for name, keys in keyed:
        if keys != sorted(keys) or len(set(keys)) != len(keys):
            raise _invalid(where, f"{name} must be sorted and unique")
