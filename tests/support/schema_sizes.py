"""The largest JSON text a value valid against a tool's input schema can take on the wire.

Walks a served input schema (``$ref`` into ``$defs``, ``anyOf``/``oneOf`` as
their largest branch, ``enum``) adding each part's worst case: a string's
``maxLength`` characters at :data:`JSON_BYTES_PER_STRING_CHAR` each (a digest
or hex SHA-256, whose pattern admits only its fixed ASCII form, at its length),
an integer's ``maximum`` digits, an array's ``maxItems`` items, an object's
declared keys and ``maxProperties`` extra keys of ``propertyNames.maxLength``.
A part the schema does not bound is named in :attr:`WorstCase.unbounded`.

The parts bounded by code rather than by the schema (:data:`BOUNDED_ELSEWHERE`:
tokens, confirmed states' values, artifact contents, validator reports) count
as their limits constant at worst-case escaping, once per place they occur
(artifact contents once for the whole call: their bound is the step's total).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rimthan_workflow_registry.canonical import DIGEST_PATTERN, SHA256_HEX_PATTERN
from rimthan_workflow_registry.limits import (
    JSON_BYTES_PER_STRING_BYTE,
    JSON_BYTES_PER_STRING_CHAR,
    JSON_BYTES_PER_TOKEN_CHAR,
    MAX_CONFIRMED_STATE_BYTES,
    MAX_STEP_ARTIFACT_BYTES,
    MAX_TOKEN_CHARS,
    MAX_VALIDATOR_REPORTS_BYTES,
)

_FIXED_ASCII = {f"^{DIGEST_PATTERN}$": len("sha256:") + 64, f"^{SHA256_HEX_PATTERN}$": 64}
_TOKEN = JSON_BYTES_PER_TOKEN_CHAR * MAX_TOKEN_CHARS + 2
_COPY = "inline copy of https://rimthan.dev/contracts/"

BOUNDED_ELSEWHERE: dict[str, int] = {
    "properties/checkpoint": _TOKEN,
    "validation-bundle/properties/validation_token": _TOKEN,
    "confirmed-state-projection/properties/state": JSON_BYTES_PER_STRING_BYTE * MAX_CONFIRMED_STATE_BYTES,
    "artifact/properties/content": 2,  # the step's total is added once per call (ARTIFACT_CONTENTS)
    "properties/reports": JSON_BYTES_PER_STRING_BYTE * MAX_VALIDATOR_REPORTS_BYTES,
}
"""Schema locations (a contract's name, then its path) bounded by a limits constant, with their wire bytes."""

ARTIFACT_CONTENTS = JSON_BYTES_PER_STRING_BYTE * MAX_STEP_ARTIFACT_BYTES


@dataclass
class WorstCase:
    root: Mapping[str, Any]
    unbounded: list[str] = field(default_factory=list)
    elsewhere: list[str] = field(default_factory=list)

    def bytes(self) -> int:
        """The whole schema's worst case, artifact contents added once if the call carries any."""
        size = self.of(self.root, "")
        return size + (ARTIFACT_CONTENTS if "artifact/properties/content" in self.elsewhere else 0)

    def of(self, schema: Mapping[str, Any], at: str) -> int:
        comment = str(schema.get("$comment", ""))
        if comment.startswith(_COPY):  # an inline contract: located by its name, as under $defs
            at = comment.removeprefix(_COPY).removesuffix(".schema.json")
        for where, size in BOUNDED_ELSEWHERE.items():
            if at == where or at.endswith("/" + where):
                self.elsewhere.append(where)
                return size
        if "$ref" in schema:
            name = str(schema["$ref"]).removeprefix("#/$defs/")
            return self.of(self.root["$defs"][name], name)
        for keyword in ("anyOf", "oneOf"):
            if keyword in schema:
                return max(self.of(branch, f"{at}/{keyword}/{i}") for i, branch in enumerate(schema[keyword]))
        if "enum" in schema:
            return max(len(json.dumps(value)) for value in schema["enum"])
        return self._typed(schema, at)

    def _typed(self, schema: Mapping[str, Any], at: str) -> int:
        kind = schema.get("type")
        if kind == "string":
            fixed = _FIXED_ASCII.get(str(schema.get("pattern")))
            if fixed is not None:
                return fixed + 2
            return self._needs(schema, "maxLength", at, 0) * JSON_BYTES_PER_STRING_CHAR + 2
        if kind == "integer":
            return len(str(self._needs(schema, "maximum", at, 0))) + 1
        if kind in ("boolean", "null"):
            return 5
        if kind == "array":
            return 2 + self._needs(schema, "maxItems", at, 0) * (self.of(schema.get("items", {}), f"{at}/items") + 1)
        if kind == "object":
            return self._object(schema, at)
        self.unbounded.append(f"{at} (no type)")
        return 0

    def _object(self, schema: Mapping[str, Any], at: str) -> int:
        properties: Mapping[str, Any] = schema.get("properties", {})
        size = 2 + sum(len(json.dumps(k)) + 2 + self.of(v, f"{at}/properties/{k}") for k, v in properties.items())
        extra = schema.get("additionalProperties", True)
        if extra is False:
            return size
        if extra is True:
            self.unbounded.append(f"{at} (any additional property)")
            return size
        count = self._needs(schema, "maxProperties", at, 0)
        key = self._needs(schema.get("propertyNames", {}), "maxLength", f"{at}/propertyNames", 0)
        return size + count * (key * JSON_BYTES_PER_STRING_CHAR + 4 + self.of(extra, f"{at}/additionalProperties"))

    def _needs(self, schema: Mapping[str, Any], keyword: str, at: str, default: int) -> int:
        if keyword not in schema:
            self.unbounded.append(f"{at or '/'} (no {keyword})")
            return default
        return int(schema[keyword])
