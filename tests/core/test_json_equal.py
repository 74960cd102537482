"""``json_equal`` compares JSON values as the verifier's schema checks do (JSON Schema's ``enum`` and ``const``).

Each pair's verdict is checked against Python jsonschema's own (``const``), the library the verifier checks a
confirmed state with, so the host's comparison of a fact with a field's choices agrees with what the verifier takes.
"""

from __future__ import annotations

from typing import Any

import pytest
from rimthan_workflow_registry.canonical import json_equal
from rimthan_workflow_registry.jsonschema_formats import Draft202012Validator

BIG = 2**53 + 1
PAIRS: list[tuple[Any, Any, bool]] = [
    (1, 1.0, True),
    (5.0, 5, True),
    (0, -0.0, True),
    (1, True, False),
    (0, False, False),
    (1.0, True, False),
    (True, True, True),
    (None, False, False),
    (None, None, True),
    ("1", 1, False),
    ("a", "a", True),
    (BIG, BIG, True),
    (BIG, BIG + 1, False),  # both round to the same float: never equal by rounding
    (BIG, float(2**53), False),
    (2**53, float(2**53), True),
    ([1, {"a": 2.0}], [1.0, {"a": 2}], True),
    ([1, 2], [2, 1], False),
    ([1], [1, 1], False),
    ([True], [1], False),
    ({"a": 1, "b": [True]}, {"b": [True], "a": 1.0}, True),
    ({"a": 1}, {"a": 1, "b": 1}, False),
    ({"a": True}, {"a": 1}, False),
    ([], {}, False),
]


@pytest.mark.parametrize(("one", "other", "equal"), PAIRS, ids=[repr(p[:2]) for p in PAIRS])
def test_json_equal_agrees_with_json_schema_const(one: Any, other: Any, equal: bool) -> None:
    assert json_equal(one, other) is equal
    assert json_equal(other, one) is equal
    assert Draft202012Validator({"const": one}).is_valid(other) is equal
    assert Draft202012Validator({"enum": [other]}).is_valid(one) is equal
