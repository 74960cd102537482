"""The building blocks every contract and tool schema is made of (closed objects, bounded strings).

One copy of each bound, shared by :mod:`contract_schemas` (the contract
documents) and :mod:`tool_schemas` (the tool input and output schemas).
Plain data, no MCP imports.
"""

from __future__ import annotations

from typing import Any

from rimthan_workflow_registry.canonical import DIGEST_PATTERN, SHA256_HEX_PATTERN
from rimthan_workflow_registry.limits import MAX_JSON_SAFE_INTEGER, MAX_LISTED_NAMES, MAX_NAME_CHARS, MAX_VERSION_CHARS
from rimthan_workflow_registry.run import MAX_TOKEN_CHARS

DRAFT = "https://json-schema.org/draft/2020-12/schema"
ID_BASE = "https://rimthan.dev/contracts/"
MAX_TEXT = 8 * 1024 * 1024
MAX_TOKEN = MAX_TOKEN_CHARS

DIGEST = {"type": "string", "pattern": f"^{DIGEST_PATTERN}$"}
SHA256_HEX = {"type": "string", "pattern": f"^{SHA256_HEX_PATTERN}$"}
NAME = {"type": "string", "minLength": 1, "maxLength": MAX_NAME_CHARS}
NAME_KEYS = {"maxLength": MAX_NAME_CHARS}  # ``propertyNames`` of an object keyed by names (ids, state fields)
COUNT = {"type": "integer", "minimum": 0, "maximum": MAX_JSON_SAFE_INTEGER}  # a size or time JSON carries exactly
NAMES = {"type": "array", "items": NAME, "uniqueItems": True, "maxItems": MAX_LISTED_NAMES}
VERSION = {"type": "string", "minLength": 1, "maxLength": MAX_VERSION_CHARS}
SHORT_TEXT = {"type": "string", "maxLength": MAX_NAME_CHARS}
TOKEN = {"type": "string", "minLength": 1, "maxLength": MAX_TOKEN}
GLOBS = {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 128}, "maxItems": 32}


def closed(properties: dict[str, Any], required: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    schema.update(extra)
    return schema


def every_field_required(properties: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A closed object whose every field is required (the result contracts' usual shape)."""
    return closed(properties, list(properties), **extra)


def about(text: str, schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with a ``description``: every input field says what it is for, so a harness
    author (or a model reading ``tools/list``) never has to guess from a refusal."""
    return {**schema, "description": text}


def document(name: str, title: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"$schema": DRAFT, "$id": contract_id(name), "title": title, **body}


def contract_id(name: str) -> str:
    return f"{ID_BASE}{name}.schema.json"


def uses(document: dict[str, Any]) -> dict[str, Any]:
    """Another contract, inside one that uses it: its body inline, without its ``$id`` and ``$schema``.

    Same meaning as a ``$ref`` to the other's ``$id``, and every document stays
    standalone: a client needs no other document to validate against it, and
    resolves no URI while it does. (Python ``referencing``, the Python MCP SDK
    client's resolver, re-crawled the whole tool schema for every value it
    reached through such a ``$ref``.) ``$comment`` names the contract it copies.
    """
    body = {k: v for k, v in document.items() if k not in ("$schema", "$id")}
    return {"$comment": f"inline copy of {document['$id']}", **body}
