"""The scanner that reads a JSON-RPC line's outermost keys without parsing it: its verdicts, and its work.

``top_level_keys`` skips each string whole (``str.find``); the scan it
replaced, which read strings character by character too, is kept here as the
reference, and every line (random text, JSON messages whole and cut anywhere,
the edge cases below) must get the same answer from both.
"""

from __future__ import annotations

import json
import sys
from types import FrameType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rimthan_workflow_mcp.message_shape import (
    _MAX_SCAN,
    has_top_level_id,
    top_level_keys,
    top_level_method,
    top_level_request_id,
    top_level_response_id,
)
from support.json_values import JSON


def reference_keys(raw: str, *, whole: bool = True) -> dict[str, int] | None:
    """The same rules read one character at a time, strings included (as the scan before ``str.find`` read them),
    written as a state machine of its own so that it checks the scan rather than repeats it; a key is read as
    ``json.loads`` reads it (its escapes read; given twice, the last)."""
    if len(raw) > _MAX_SCAN or not raw.lstrip().startswith("{"):
        return None
    keys: dict[str, int] = {}
    depth, expecting_key, opened, escaped = 0, False, -1, False  # opened: where the string being read began
    for index, char in enumerate(raw):
        if opened >= 0:
            if escaped or char == "\\":
                escaped = not escaped
            elif char == '"':
                if depth == 1 and expecting_key:
                    key = raw[opened + 1 : index]  # read as json.loads reads it (escapes read), the last kept
                    if "\\" in key:
                        try:
                            key = json.loads(raw[opened : index + 1])
                        except ValueError:
                            return None
                    keys[key] = index + 1
                    expecting_key = False
                opened = -1
        elif char == '"':
            opened = index
        elif char in "{[":
            depth, expecting_key = depth + 1, char == "{" and depth == 0
        elif char in "}]":
            depth -= 1
        elif char == ",":
            expecting_key = expecting_key or depth == 1
    if opened >= 0:
        return None if whole else keys
    return keys


def assert_same_verdicts(raw: str) -> None:
    for whole in (True, False):
        assert top_level_keys(raw, whole=whole) == reference_keys(raw, whole=whole), (raw, whole)


STRUCTURAL_TEXT = st.text(alphabet='{}[],:"\\ \n\t\x00ab1-', max_size=80)


@settings(max_examples=600, deadline=None)
@given(body=STRUCTURAL_TEXT, opening=st.sampled_from(["{", " {", "", "["]))
def test_random_text_gets_the_reference_scan_s_keys_whole_and_cut(body: str, opening: str) -> None:
    assert_same_verdicts(opening + body)


@settings(max_examples=100, deadline=None)
@given(members=st.dictionaries(st.text(max_size=8), JSON, max_size=6), cut=st.integers(min_value=0))
def test_json_messages_whole_and_cut_anywhere_get_the_reference_scan_s_keys(members: dict[str, Any], cut: int) -> None:
    for text in (json.dumps(members), json.dumps(members, ensure_ascii=False, separators=(",", ":"))):
        assert_same_verdicts(text)
        assert_same_verdicts(text[: cut % (len(text) + 1)])


@pytest.mark.parametrize(
    "raw",
    [
        '{"a":1,"b":{"c":2,"d":[3,{"e":4}]},"f":"x"}',
        r'{"a\"b":1,"c\\":2,"d":"\\\"","e":3}',  # escaped quotes and backslashes in keys and values
        '{"a":"open',  # a string the line leaves open
        '{"a":"ends in a backslash\\',  # the backslash escapes the end: still open
        '{"a":"\\\n","b":1}',  # a backslash escapes a newline too
        '{"id":1,"id":2}',  # a repeated key: the first one's place
        '{"a":1}}],"b":2,{"c":3}',  # stray closings, then a second object at depth 1
        '{{[{"a":1}]},"b":2}',  # a run of openings ending below depth 1
        '{"a" "b":1, "c" : 2 , , "d":3}',  # not JSON, scanned the same way
        '{"a":{"b":"}{,","c":[1,"]\\"]"]},"d":2}',  # brackets, commas and quotes inside nested strings
        '{"a":[{"b":"open',  # a string left open below depth 1
        '{}}{"a":1},{"b":2}',  # back to depth 1 from below
        '{"a":[1,2],"b":[[[]]],"c":{}}',
        "{ }",
        '  {"method":"x","id":"7"}',
        '["not an object"]',
        "",
    ],
)
def test_edge_cases_get_the_reference_scan_s_keys(raw: str) -> None:
    assert_same_verdicts(raw)


def test_the_readers_built_on_it_answer_as_before() -> None:
    request = '{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"id":"inner","method":"no"}}'
    assert top_level_request_id(request) == 42
    assert top_level_method(request) == "tools/call"
    assert has_top_level_id(request)
    assert top_level_response_id(request) is None
    assert top_level_response_id('{"jsonrpc":"2.0","id":"r-1","result":{"id":9}}') == "r-1"
    assert top_level_request_id('{"method":"x","params":{"deep":"' + "[" * 5000 + '"},"id":"abc"}') == "abc"
    assert top_level_request_id('{"method":"x","id":12', whole=False) is None  # the cut may shorten the id
    assert top_level_request_id('{"method":"x","id":12,"params":"ope', whole=False) == 12
    assert top_level_request_id('{"method":"x","id":12,"params":"ope') is None
    assert not has_top_level_id('{"jsonrpc":"2.0","method":"notifications/initialized","params":{"id":1}}')


def _lines_run(raw: str) -> int:
    """How many lines of ``message_shape``'s code Python runs to scan ``raw`` (counted by a trace hook)."""
    source, count = top_level_keys.__code__.co_filename, 0

    def trace(frame: FrameType, event: str, arg: object) -> Any:
        nonlocal count
        if frame.f_code.co_filename != source:
            return None
        if event == "line":
            count += 1
        return trace

    previous = sys.gettrace()
    sys.settrace(trace)
    try:
        top_level_keys(raw)
    finally:
        sys.settrace(previous)
    return count


LONG = 200_000


@pytest.mark.parametrize(
    "raw",
    [
        '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"a":"' + "x" * LONG + '"}}',
        '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"a":"' + "x" * LONG + '\\"' + "y" * LONG + '"}}',
        '{"' + "k" * LONG + '":1,"id":"x","method":"m"}',
        '{"id":1,"params":"' + "\\" * LONG,  # a string the line leaves open, after many escapes
    ],
    ids=["long-value", "escaped-quote-inside", "long-key", "open-after-escapes"],
)
def test_a_long_string_is_skipped_whole_not_character_by_character(raw: str) -> None:
    assert top_level_keys(raw) == reference_keys(raw)
    assert top_level_keys(raw, whole=False) == reference_keys(raw, whole=False)
    assert _lines_run(raw) < 300  # the characters of a string are str.find's (C), never a Python loop's
