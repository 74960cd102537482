"""first_non_json_value: the first value with no exact JSON form, named by its path; no path written for the rest.

A build runs it over every catalogue TOML document, whose values are all fine:
each value's path is written out only for the value found wrong.
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from rimthan_workflow_registry.limits import first_non_json_value


class _CountedKey:
    """A dict key that counts how often it is shown (``str``), as a path names it."""

    shown = 0

    def __init__(self, name: str) -> None:
        self.name = name

    def __str__(self) -> str:
        _CountedKey.shown += 1
        return self.name


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"a": {"b": [1, {"c": 2**53}]}}, "a.b[1].c = 9007199254740992 is past what JSON carries exactly"),
        ({"t": [1, "x\udfffy"]}, "t[1] holds a lone surrogate"),
        ({"\ud800": 1}, "the key \\ud800 holds a lone surrogate"),
        ({"a": {"\udbff": 1}}, "the key a.\\udbff holds a lone surrogate"),
        ([[float("nan")]], "[0][0] = nan is not a finite number"),
        ({"": {"d": datetime.date(2026, 12, 7)}}, "d is a TOML date or time"),
        ({"n": -(10**40)}, "n = an integer of 41 digits is past what JSON carries"),
        ("\ud800", " holds a lone surrogate"),
        ({1: {"x": float("inf")}}, "1.x = inf is not a finite number"),
    ],
)
def test_the_first_value_without_a_json_form_is_named_by_its_path(value: Any, message: str) -> None:
    problem = first_non_json_value(value)
    assert problem is not None
    assert problem.startswith(message)


def test_no_path_is_written_for_values_json_carries() -> None:
    keys = [_CountedKey(f"k{number}") for number in range(50)]
    value = {key: {"inner": [1, "text", 2.5, None, True]} for key in keys}
    _CountedKey.shown = 0
    assert first_non_json_value(value) is None
    assert _CountedKey.shown == 0


def test_only_the_path_of_the_value_found_wrong_is_written() -> None:
    keys = [_CountedKey(f"k{number}") for number in range(50)]
    value: dict[Any, Any] = {key: 1 for key in keys}
    value[keys[-1]] = {"deep": float("nan")}
    _CountedKey.shown = 0
    assert first_non_json_value(value) == "k49.deep = nan is not a finite number (JSON has no inf or nan)"
    assert _CountedKey.shown == 1
