"""The closed shape of a checkpoint's claims, checked after the token's MAC verifies.

``CLAIMS_SCHEMA`` (plus the receipt entry shapes of :func:`_receipt_problem`)
is the definition. A checkpoint carries every receipt of its run, so the
check a call makes runs in C: the claims other than the receipts, written as
sorted, compact, ASCII JSON, must match one regular expression
(:data:`_CLAIMS_TEXT`), and each receipt column (types, lengths, hex digits,
sizes) is checked in one pass with ``map``, ``set`` and ``min``, never a
Python loop per receipt. Claims the fast check does not accept, which a
server never issues, go through the definition itself (jsonschema and a
loop over the receipts), which decides and names the problem: the fast
check only ever accepts what the definition accepts, so it changes speed,
never answers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rimthan_workflow_registry.jsonschema_formats import Draft202012Validator

_DIGEST = {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"}
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
        # receipts grow with the run: their entries are checked by _receipt_problem, not jsonschema
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


_HEX64 = re.compile(r"[0-9a-f]{64}")


def _claims_text_pattern() -> re.Pattern[str]:
    """Claims with empty receipt tables as ``json.dumps(sort_keys=True, separators=(",", ":"))`` writes them.

    A JSON string unit is a character, an escape ``\\uXXXX`` or a short
    escape; units decode to at most as many characters (a surrogate pair is
    two units, one character) and never to none, so ``{1,128}`` units bound a
    string to 1..128 characters.
    """
    unit = r'(?:[^"\\]|\\u[0-9a-f]{4}|\\["\\/bfnrt])'
    text = f'"{unit}{{1,128}}"'
    strings = rf"\[(?:{text}(?:,{text})*)?\]"
    digest, natural = '"sha256:[0-9a-f]{64}"', "(?:0|[1-9][0-9]*)"
    return re.compile(
        '\\{"artifacts":\\{\\},'
        f'(?:"findings":{natural},)?'
        f'"host":\\{{"adapter_version":{text},"capabilities":{strings},"harness":{text},'
        f'"validator_capabilities":{strings}\\}},'
        f'"iat":{natural},"parent":(?:null|{digest}),'
        f'"release":\\{{"id":{text},"manifest_digest":{digest}\\}},'
        f'"seq":[1-9][0-9]*,"state":{digest},"step":{text},'
        '"validators":\\{\\},'
        f'"workflow":\\{{"id":{text},"version":{text}\\}}'
        "\\}"
    )


_CLAIMS_TEXT = _claims_text_pattern()
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
        text = json.dumps(rest, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        return False
    if _CLAIMS_TEXT.fullmatch(text) is None:
        return False
    host = claims["host"]
    unique = all(len(set(host[k])) == len(host[k]) for k in ("capabilities", "validator_capabilities"))
    return unique and _artifacts_well_formed(artifacts) and _validators_well_formed(validators)


def _artifacts_well_formed(table: dict[str, Any]) -> bool:
    """Every value ``[64 lowercase hex digits, int >= 0]``."""
    columns = _columns(table)
    if columns is None:
        return False
    digests, sizes = columns
    return not digests or (_hex64(digests) and set(map(type, sizes)) == {int} and min(sizes) >= 0)


def _validators_well_formed(table: dict[str, Any]) -> bool:
    """Every value ``["pass", 64 lowercase hex digits]``."""
    columns = _columns(table)
    if columns is None:
        return False
    outcomes, digests = columns
    return not digests or (outcomes.count("pass") == len(outcomes) and _hex64(digests))


def _columns(table: dict[str, Any]) -> tuple[tuple[Any, ...], tuple[Any, ...]] | None:
    """The two columns of a table whose every value is a list of two items (empty for no values), else ``None``."""
    entries = table.values()
    if not entries:
        return (), ()
    if set(map(type, entries)) != {list} or set(map(len, entries)) != {2}:
        return None
    first, second = zip(*entries, strict=True)
    return first, second


def _hex64(values: tuple[Any, ...]) -> bool:
    """Every value a string of exactly 64 lowercase hex digits (one ``bytes.translate`` over them all, joined)."""
    if set(map(type, values)) != {str} or set(map(len, values)) != {64}:
        return False
    try:
        joined = "".join(values).encode("ascii")
    except UnicodeEncodeError:
        return False
    return not joined.translate(None, _HEX_DIGITS)


def _receipt_problem(claims: Mapping[str, Any]) -> str | None:
    """Shape of every receipt: artifacts ``[sha256-hex, size>=0]``, validators ``["pass", sha256-hex]``."""
    for name, receipt in claims["artifacts"].items():
        if not (
            isinstance(receipt, list)
            and len(receipt) == 2
            and isinstance(receipt[0], str)
            and _HEX64.fullmatch(receipt[0])
            and type(receipt[1]) is int
            and receipt[1] >= 0
        ):
            return f"artifact receipt {name!r} is malformed"
    for name, receipt in claims["validators"].items():
        if not (
            isinstance(receipt, list)
            and len(receipt) == 2
            and receipt[0] == "pass"
            and isinstance(receipt[1], str)
            and _HEX64.fullmatch(receipt[1])
        ):
            return f"validator receipt {name!r} is malformed"
    return None
