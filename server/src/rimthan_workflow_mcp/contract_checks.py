"""The tool contracts' own schemas, checked once at start-up (``create_mcp_application`` fails closed on one).

Each contract document and each tool's input and output schema must be a valid
Draft 2020-12 schema and, where it is an object, closed. A pass is remembered
like a catalogue schema's (``SCHEMA_CHECKS``), and the contract documents the
tool schemas embed are checked once, on their own (:func:`without_checked`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from rimthan_workflow_registry.errors import FailureCode, RegistryError
from rimthan_workflow_registry.release import SCHEMA_CHECKS

from .schema_parts import uses


def without_checked(schema: Mapping[str, Any], documents: Mapping[str, Any]) -> Mapping[str, Any]:
    """``schema`` minus the embedded contract documents already checked on their own.

    Each input schema embeds contracts under ``$defs``, each output schema
    holds them inline (``uses``); checking them again in all eight schemas
    was a third of start-up. A ``$defs`` entry or inline copy that is not
    exactly a checked document is kept, so it is still checked here.
    """
    defs = schema.get("$defs", {})
    rest = {k: v for k, v in defs.items() if documents.get(k) != v}
    copies = {uses(doc)["$comment"]: uses(doc) for doc in documents.values()}
    checked: Mapping[str, Any] = _without_copies({**schema, "$defs": rest} if "$defs" in schema else schema, copies)
    return checked


def _without_copies(node: Any, copies: Mapping[str, Any]) -> Any:
    """``node`` with each inline copy that equals its checked document's body replaced by ``{}``."""
    if isinstance(node, list):
        return [_without_copies(v, copies) for v in node]
    if not isinstance(node, dict):
        return node
    if copies.get(str(node.get("$comment"))) == node:
        return {}
    return {k: _without_copies(v, copies) for k, v in node.items()}


def check_contract_schema(schema: Mapping[str, Any], what: str) -> None:
    """``Draft202012Validator.check_schema`` plus the closed-object rule, as a ``RegistryError``.

    A pass is remembered like a catalogue schema's (``SCHEMA_CHECKS``, by the
    digest of the schema's JSON with sorted keys and the validator version; a
    serving server keeps it in its state directory), so a restart of the same
    server version does not repeat about twenty metaschema checks. Any
    deterministic encoding names the same schema; ``json.dumps`` (in C) costs a
    start a tenth of RFC 8785's Python serialiser.
    """
    data = json.dumps(schema, sort_keys=True, separators=(",", ":")).encode()
    if not SCHEMA_CHECKS.passed(data):
        from rimthan_workflow_registry.jsonschema_formats import Draft202012Validator, SchemaError

        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            raise RegistryError(
                FailureCode.SCHEMA_INVALID, f"{what} is not a valid Draft 2020-12 schema: {exc.message}"
            ) from None
        SCHEMA_CHECKS.remember([data])
    if schema.get("type") == "object" and schema.get("additionalProperties") is not False:
        raise RegistryError(FailureCode.SCHEMA_INVALID, f"{what} is not closed (additionalProperties: false)")
