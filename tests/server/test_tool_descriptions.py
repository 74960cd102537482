"""Every field of the four tools' input and output schemas says what it is for.

A harness written in another language (or a model reading ``tools/list``)
learns the protocol from the schemas; a field without a description is one it
has to discover from refusals (an input) or from the server's code (a result).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from rimthan_workflow_mcp.tool_contracts import contract_documents, workflow_engine_tool_contracts

CONTRACTS = {c.name: c for c in workflow_engine_tool_contracts()}


def _properties(node: Any, where: str) -> Iterator[tuple[str, Any]]:
    """Every (pointer, property schema) under ``node``, through ``$defs`` and nested objects."""
    if isinstance(node, dict):
        for name, schema in (node.get("properties") or {}).items():
            yield f"{where}/properties/{name}", schema
        for key, value in node.items():
            yield from _properties(value, f"{where}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _properties(value, f"{where}/{index}")


@pytest.mark.parametrize("name", sorted(CONTRACTS))
def test_every_input_property_has_a_description(name: str) -> None:
    found = list(_properties(CONTRACTS[name].input_schema, "#"))
    assert len(found) > 10  # the walk reached the embedded contracts, not just the top level
    missing = [where for where, schema in found if not str(schema.get("description", "")).strip()]
    assert missing == []


@pytest.mark.parametrize("name", sorted(CONTRACTS))
def test_every_output_property_has_a_description(name: str) -> None:
    found = list(_properties(CONTRACTS[name].output_schema, "#"))
    assert len(found) > 10
    missing = [where for where, schema in found if not str(schema.get("description", "")).strip()]
    assert missing == []


@pytest.mark.parametrize("name", sorted(contract_documents()))
def test_every_served_contract_property_has_a_description(name: str) -> None:
    found = list(_properties(contract_documents()[name], "#"))
    missing = [where for where, schema in found if not str(schema.get("description", "")).strip()]
    assert missing == []


def test_the_walk_sees_a_nested_field_without_a_description() -> None:
    schema = {"properties": {"a": {"description": "x", "properties": {"b": {"type": "string"}}}}}
    assert [where for where, s in _properties(schema, "#") if "description" not in s] == ["#/properties/a/properties/b"]


@pytest.mark.parametrize("name", sorted(CONTRACTS))
def test_tool_description_says_when_to_call_it(name: str) -> None:
    assert CONTRACTS[name].description.startswith("Call ")
