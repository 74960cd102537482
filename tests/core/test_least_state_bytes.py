"""The floors the catalogue bounds put on a confirmed state: never more than a valid value takes.

``least_value_bytes`` and ``least_object_bytes`` (release.catalogue_bounds)
refuse a state schema, a question's choice or a branch's value when the least
state a client could send is past MAX_CONFIRMED_STATE_BYTES. A floor above
what some valid value takes would refuse a runnable catalogue, so each case
here names a value the schema accepts (checked by jsonschema) whose canonical
bytes are the floor exactly, or more where the keywords left out allow less
than the floor cannot see.
"""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft202012Validator
from rimthan_workflow_registry.canonical import canonical_bytes
from rimthan_workflow_registry.release.catalogue_bounds import least_object_bytes, least_value_bytes

STRING = {"type": "string", "minLength": 3}
CASES: dict[str, tuple[dict[str, Any], Any]] = {
    "string": (STRING, "abc"),
    "string, one type in a list": ({"type": ["string"], "minLength": 2}, "ab"),
    "string or integer: the integer is shorter": ({"type": ["string", "integer"], "minLength": 9}, 0),
    "minLength without a type": ({"minLength": 9}, 0),
    "array of strings": ({"type": "array", "items": STRING, "minItems": 2}, ["abc", "abc"]),
    "empty array": ({"type": "array", "items": STRING}, []),
    "array with prefixItems": ({"type": "array", "prefixItems": [{"type": "integer"}], "minItems": 2}, [0, 0]),
    "object with required members": (
        {"type": "object", "properties": {"a": STRING}, "required": ["a", "b"]},
        {"a": "abc", "b": 0},
    ),
    "object with minProperties": ({"type": "object", "minProperties": 2}, {"": 0, "b": 0}),
    "boolean": ({"type": "boolean"}, True),
    "null": ({"type": "null"}, None),
    "a $ref": ({"$ref": "#/$defs/x", "$defs": {"x": {"type": "integer"}}}, 0),
    "a fractional minLength reads as its integer": ({"type": "string", "minLength": 2.0}, "ab"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_floor_is_never_more_than_a_valid_value_takes(case: str) -> None:
    schema, witness = CASES[case]
    assert Draft202012Validator(schema).is_valid(witness), case
    assert least_value_bytes(schema) <= len(canonical_bytes(witness))


def test_the_floor_is_exact_for_the_least_values_of_plain_keywords() -> None:
    exact = [c for c in CASES if c not in ("object with minProperties", "array with prefixItems")]
    for case in exact:
        schema, witness = CASES[case]
        assert least_value_bytes(schema) == len(canonical_bytes(witness)), case


def test_an_object_holding_a_member_counts_it_in_place_of_its_least() -> None:
    schema = {"type": "object", "properties": {"a": STRING}, "required": ["a"]}
    value = {"a": "abcdef", "route": "x" * 10}
    assert least_object_bytes(schema, {"a": 8, "route": 12}) == len(canonical_bytes(value))
