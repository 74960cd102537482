"""The closed shape of a checkpoint's claims, checked after the token's MAC verifies.

``CLAIMS_SCHEMA`` (plus the receipt entry shapes of :func:`_receipt_problem`)
is the definition. A checkpoint carries every receipt of its run, so the
check a call makes runs in C: the claims other than the receipts, written as
sorted, compact, ASCII JSON, must match one regular expression
(:data:`_CLAIMS_TEXT`), and each receipt column (names sorted and unique,
one string of hex digits per table, sizes) is checked in one pass with
``map``, ``set``, ``min`` and ``bytes.translate``, never a Python loop per
receipt. A checkpoint being issued has its claims' shape read from the
payload just written for it (:func:`issued_text_accepted`: the same
patterns, in ``to_claims`` order, built from one table), not re-encoded.
Claims the fast check does not accept, which a
server never issues, go through the definition itself (jsonschema and a
loop over the receipts), which decides and names the problem: the fast
check only ever accepts what the definition accepts, so it changes speed,
never answers.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping
from functools import cache
from typing import TYPE_CHECKING, Any

from rimthan_workflow_registry.canonical import DIGEST_PATTERN, SHA256_HEX_PATTERN
from rimthan_workflow_registry.json_encoders import compact_encoder

if TYPE_CHECKING:
    from rimthan_workflow_registry.jsonschema_formats import Draft202012Validator

_DIGEST = {"type": "string", "pattern": f"^{DIGEST_PATTERN}$"}
_STR = {"type": "string", "minLength": 1, "maxLength": 128}
_STRS = {"type": "array", "items": _STR, "uniqueItems": True}

CLAIMS_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["seq", "workflow", "release", "step", "state", "parent", "artifacts", "validators", "host", "iat"],
    "properties": {
        "seq": {"type": "integer", "minimum": 1},
        "workflow": {
            "type": "object",
            "additionalProperties": False,
            "required": ["id", "version"],
            "properties": {"id": _STR, "version": _STR},
        },
        "release": {
            "type": "object",
            "additionalProperties": False,
            "required": ["id", "manifest_digest"],
            "properties": {"id": _STR, "manifest_digest": _DIGEST},
        },
        "step": _STR,
        "state": _DIGEST,
        "parent": {"oneOf": [{"type": "null"}, _DIGEST]},
        # receipts grow with the run: their columns are checked by _receipt_problem, not jsonschema
        "artifacts": {"type": "object"},
        "validators": {"type": "object"},
        "host": {
            "type": "object",
            "additionalProperties": False,
            "required": ["harness", "adapter_version", "capabilities", "validator_capabilities"],
            "properties": {
                "harness": _STR,
                "adapter_version": _STR,
                "capabilities": _STRS,
                "validator_capabilities": _STRS,
            },
        },
        "iat": {"type": "integer", "minimum": 0},
        # only on a checkpoint a failed validation round issued: how many findings the reports gave
        "findings": {"type": "integer", "minimum": 0},
    },
}


@cache
def _claims_validator() -> Draft202012Validator:
    """jsonschema's validator of ``CLAIMS_SCHEMA``, built (and jsonschema imported) when a claim needs it."""
    from rimthan_workflow_registry.jsonschema_formats import Draft202012Validator

    return Draft202012Validator(CLAIMS_SCHEMA)


_HEX64 = re.compile(SHA256_HEX_PATTERN)
# The receipt tables' columns (see ``receipts``): names, one digest string, and for artifacts the sizes.
ARTIFACT_COLUMNS = ("names", "sha256", "sizes")
VALIDATOR_COLUMNS = ("names", "input_sha256")
_DIGEST_CHARS = 64


_UNIT = r'(?:[^"\\]|\\u[0-9a-f]{4}|\\["\\/bfnrt])'
_TEXT_BY_UNITS = f'"{_UNIT}{{1,128}}"'
# A string without escapes is matched first by one character class repeated (a loop in C, no alternation tried
# per character); such a string is also one of 1..128 units, so the two match exactly the same texts.
_TEXT = f'"(?:[^"\\\\]{{1,128}}|{_UNIT}{{1,128}})"'


_NATURAL = "(?:0|[1-9][0-9]*)"
_DIGEST_TEXT = f'"{DIGEST_PATTERN}"'
_EMPTY_OBJECT = "\\{\\}"  # a receipt table as the patterns see it: the fast check empties both tables
_OPTIONAL = frozenset({"findings"})  # members a claim set may leave out (never the first in either order)
_Fields = dict[str, "str | _Fields"]


def _claim_fields(text: str = _TEXT) -> _Fields:
    """Each claim (in ``Checkpoint.to_claims`` order) with the pattern of its value's JSON; an object's as a table.

    Both patterns of the claims' text are built from this one table: :data:`_CLAIMS_TEXT` (keys sorted) and
    the issued payload's head and tail (:data:`_ISSUED_HEAD`, :data:`_ISSUED_TAIL`: the table's order).
    """
    strings = rf"\[(?:{text}(?:,{text})*)?\]"
    return {
        "seq": "[1-9][0-9]*",
        "workflow": {"id": text, "version": text},
        "release": {"id": text, "manifest_digest": _DIGEST_TEXT},
        "step": text,
        "state": _DIGEST_TEXT,
        "parent": f"(?:null|{_DIGEST_TEXT})",
        "artifacts": _EMPTY_OBJECT,
        "validators": _EMPTY_OBJECT,
        "host": {"harness": text, "adapter_version": text, "capabilities": strings, "validator_capabilities": strings},
        "iat": _NATURAL,
        "findings": _NATURAL,
    }


def _members(fields: _Fields, keys: list[str], order: Callable[[_Fields], list[str]]) -> str:
    """The pattern of members ``keys`` of ``fields`` written in that order (an optional one may be absent)."""
    out = ""
    for key in keys:
        value = fields[key]
        member = f'"{key}":' + (value if isinstance(value, str) else f"\\{{{_members(value, order(value), order)}\\}}")
        out += f"(?:,{member})?" if key in _OPTIONAL else ("," if out else "") + member
    return out


def _claims_text_pattern(text: str = _TEXT) -> re.Pattern[str]:
    """Claims with empty receipt tables as ``json.dumps(sort_keys=True, separators=(",", ":"))`` writes them.

    A JSON string unit (:data:`_UNIT`) is a character, an escape ``\\uXXXX`` or a short
    escape; units decode to at most as many characters (a surrogate pair is
    two units, one character) and never to none, so ``{1,128}`` units bound a
    string to 1..128 characters (``text``: :data:`_TEXT`, or the plainer :data:`_TEXT_BY_UNITS`).
    """
    fields = _claim_fields(text)
    return re.compile(f"\\{{{_members(fields, sorted(fields), sorted)}\\}}")


def _issued_patterns(fields: _Fields) -> tuple[re.Pattern[str], str, re.Pattern[str]]:
    """The issued payload's head (the claims before the receipts), the tail's first characters, and its tail.

    The head pattern ends with the artifacts key, the tail (the claims after the receipts) with the closing brace.
    """
    keys = list(fields)
    head, tail = keys[: keys.index("artifacts")], keys[keys.index("validators") + 1 :]
    head_text = f'\\{{{_members(fields, head, list)},"artifacts":'
    return re.compile(head_text), f',"{tail[0]}":', re.compile(f",{_members(fields, tail, list)}\\}}")


_CLAIMS_TEXT = _claims_text_pattern()
_ISSUED_FIELDS = _claim_fields()
_ISSUED_HEAD, _ISSUED_TAIL_START, _ISSUED_TAIL = _issued_patterns(_ISSUED_FIELDS)
# The claims' keys in Checkpoint.to_claims order, with and without the optional ones.
_ISSUED_KEYS = frozenset({tuple(_ISSUED_FIELDS), tuple(k for k in _ISSUED_FIELDS if k not in _OPTIONAL)})
# ``json.dumps(sort_keys=True, separators=(",", ":"), allow_nan=False)``, its C encoder built once.
_SORTED_COMPACT = compact_encoder(sort_keys=True, ensure_ascii=True)
_HEX_DIGITS = b"0123456789abcdef"


def claims_problem(claims: Mapping[str, Any]) -> str | None:
    """``None`` when ``claims`` has the closed checkpoint shape, else what is wrong with it."""
    return None if accepted_fast(claims) else definition_problem(claims)


def definition_problem(claims: Mapping[str, Any]) -> str | None:
    """What the definition (jsonschema, then every receipt's shape) finds wrong with ``claims``, if anything."""
    error = next(_claims_validator().iter_errors(dict(claims)), None)
    return error.message if error is not None else _receipt_problem(claims)


def accepted_fast(claims: Mapping[str, Any]) -> bool:
    """The fast check: every step in C, one pass over each receipt column at most.

    ``True`` only for claims :func:`definition_problem` accepts; ``False``
    means "ask the definition", not "malformed".
    """
    if type(claims) is not dict:
        return False
    artifacts, validators = claims.get("artifacts"), claims.get("validators")
    if type(artifacts) is not dict or type(validators) is not dict:
        return False
    rest = {**claims, "artifacts": {}, "validators": {}}
    try:
        text = _SORTED_COMPACT(rest)
    except (TypeError, ValueError):
        return False
    return _CLAIMS_TEXT.fullmatch(text) is not None and receipts_and_host_accepted(claims)


def issued_text_accepted(claims: dict[str, Any], payload: str) -> bool:
    """Whether ``payload``, the JSON of ``claims`` as a token carries it, shows :func:`accepted_fast`'s pattern.

    For claims a checkpoint is issued with, whose payload (``claims_payload``:
    compact, ASCII, keys in insertion order, every period escaped) was just
    written: only the claims before and after the receipt tables are read
    (:data:`_ISSUED_HEAD`, :data:`_ISSUED_TAIL`), not re-encoded sorted. The
    patterns are built from the sorted pattern's own table (:func:`_claim_fields`).

    ``True`` implies ``accepted_fast(claims)`` for claims whose nodes (receipts
    aside) are exact ``dict``, ``list``, ``str``, ``int`` and ``None`` (the
    caller checks that: ``checkpoints._exact_types``): the keys are exact
    strings in ``to_claims`` order, so sorted they are the sorted pattern's
    order; each value's text is the same in both encodings but for periods,
    and ``\\u002e`` is one string unit where ``.`` was one (the string bound
    counts units); a digest or a number never holds a period. The tail is
    found by its first key from the end: ``,"`` never occurs inside a JSON
    string (a quote in one is escaped), and a nested ``"host"`` member would
    leave its outer objects' closing braces after it, which the tail pattern
    does not allow. The caller then checks the host's lists and the receipts
    as :func:`accepted_fast` does (:func:`receipts_and_host_accepted`).
    """
    if type(claims) is not dict or tuple(claims) not in _ISSUED_KEYS or set(map(type, claims)) != {str}:
        return False
    head = _ISSUED_HEAD.match(payload)
    if head is None:
        return False
    tail = payload.rfind(_ISSUED_TAIL_START, head.end())
    return tail >= 0 and _ISSUED_TAIL.fullmatch(payload, tail) is not None


def receipts_and_host_accepted(claims: dict[str, Any]) -> bool:
    """:func:`accepted_fast`'s steps after its pattern: the host's lists unique, both receipt tables well-formed."""
    host = claims["host"]
    unique = all(len(set(host[k])) == len(host[k]) for k in ("capabilities", "validator_capabilities"))
    return unique and _artifacts_well_formed(claims["artifacts"]) and _validators_well_formed(claims["validators"])


def _artifacts_well_formed(table: dict[str, Any]) -> bool:
    """``{"names": sorted unique strings, "sha256": 64 hex digits per name, "sizes": an int >= 0 per name}``."""
    if type(table) is not dict or table.keys() != set(ARTIFACT_COLUMNS):
        return False
    names, sizes = table["names"], table["sizes"]
    if not (_names_well_formed(names) and _hex_column(table["sha256"], len(names))):
        return False
    if type(sizes) is not list or len(sizes) != len(names):
        return False
    return not sizes or (set(map(type, sizes)) == {int} and min(sizes) >= 0)


def _validators_well_formed(table: dict[str, Any]) -> bool:
    """``{"names": sorted unique strings, "input_sha256": 64 hex digits per name}``."""
    if type(table) is not dict or table.keys() != set(VALIDATOR_COLUMNS):
        return False
    names = table["names"]
    return _names_well_formed(names) and _hex_column(table["input_sha256"], len(names))


def _names_well_formed(names: Any) -> bool:
    """A list of strings in strictly increasing order (so sorted and unique)."""
    if type(names) is not list:
        return False
    return not names or (set(map(type, names)) == {str} and all(map(operator.lt, names, names[1:])))


def _hex_column(column: Any, count: int) -> bool:
    """A string of exactly ``count`` x 64 lowercase hex digits (one ``bytes.translate`` over it)."""
    if type(column) is not str or len(column) != count * _DIGEST_CHARS or not column.isascii():
        return False
    return not column.encode("ascii").translate(None, _HEX_DIGITS)


def _receipt_problem(claims: Mapping[str, Any]) -> str | None:
    """The receipt columns, receipt by receipt: artifacts ``(name, hex, size >= 0)``, validators ``(name, hex)``."""
    for table, columns, what in (
        (claims["artifacts"], ARTIFACT_COLUMNS, "artifact"),
        (claims["validators"], VALIDATOR_COLUMNS, "validator"),
    ):
        if table.keys() != set(columns):
            return f"{what} receipts must be exactly the columns {', '.join(columns)}"
        names, digests = table["names"], table[columns[1]]
        if not isinstance(names, list) or not isinstance(digests, str):
            return f"{what} receipts: names must be a list and {columns[1]} a string"
        sizes = table["sizes"] if what == "artifact" else [0] * len(names)
        if not isinstance(sizes, list) or len(sizes) != len(names) or len(digests) != _DIGEST_CHARS * len(names):
            return f"{what} receipts: the columns differ in length"
        for at, name in enumerate(names):
            digest, size = digests[at * _DIGEST_CHARS : (at + 1) * _DIGEST_CHARS], sizes[at]
            if not isinstance(name, str) or (at and not (isinstance(names[at - 1], str) and names[at - 1] < name)):
                return f"{what} receipt names must be sorted and unique strings (at {name!r})"
            if not _HEX64.fullmatch(digest) or type(size) is not int or size < 0:
                return f"{what} receipt {name!r} is malformed"
    return None
