"""CanonicalParts: RFC 8785 text composed from kept parts is byte-identical to ``rfc8785.dumps`` of the whole.

Every byte still comes from ``rfc8785``; these tests hold the composition to
the library's own output on arbitrary JSON values with arbitrary kept parts,
and on values that try to pass for a placeholder.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st
from rimthan_workflow_registry.canonical import CanonicalParts, printable_ascii_string_bytes
from support.json_values import JSON, SCALARS


def _nodes(value: Any) -> list[Any]:
    """Every value in ``value`` (itself included), parents before children."""
    found = [value]
    children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    for child in children:
        found += _nodes(child)
    return found


@settings(max_examples=200, deadline=None)
@given(value=JSON, picks=st.lists(st.integers(min_value=0), max_size=6), data=st.data())
def test_composed_text_is_rfc8785_of_the_whole(value: Any, picks: list[int], data: st.DataObject) -> None:
    parts = CanonicalParts()
    nodes = _nodes(value)
    for pick in picks:
        parts.keep(nodes[pick % len(nodes)])
    assert parts.dumps(value) == rfc8785.dumps(value)
    # the same parts inside a larger value (a result envelope around them)
    envelope = {"status": "active", "step": value, "more": {"again": value, "other": data.draw(JSON)}}
    assert parts.dumps(envelope) == rfc8785.dumps(envelope)


def test_kept_parts_are_used_and_shared_values_compose() -> None:
    parts = CanonicalParts()
    asset = parts.keep({"text": '# Step\n\n"quoted" \u2028 \U0001f600 \x01', "path": "assets/a.md"})
    listed = parts.keep([asset, {"b": 1.5e-7, "a": [True, None]}])
    value: Any = {"z": asset, "a": {"list": listed, "asset": asset}, "\u00e9": "x", "inputs": []}
    assert parts.bytes_of(asset) == rfc8785.dumps(asset)
    assert parts.dumps(value) == rfc8785.dumps(value)


def test_a_string_that_looks_like_a_placeholder_falls_back_to_the_whole() -> None:
    parts = CanonicalParts()
    kept = parts.keep({"k": "v"})
    tag = parts._tag  # what a placeholder is made of; a value can only hold it by reading this process's memory
    for forged in (f"{tag}:0", f"{tag}:1", f"{tag}:", f"{tag}:00", f'{tag}:0"'):
        value: Any = {"a": kept, "b": forged, "c": [forged]}
        assert parts.dumps(value) == rfc8785.dumps(value)
        assert parts.dumps({"b": forged}) == rfc8785.dumps({"b": forged})


def test_errors_are_rfc8785s_own() -> None:
    parts = CanonicalParts()
    kept = parts.keep({"k": 1})
    bad_values: list[Any] = [{"a": kept, "n": 2**60}, {"a": kept, "f": float("nan")}, {"a": kept, 1: "x"}]
    for bad in bad_values:
        try:
            rfc8785.dumps(bad)
        except Exception as expected:
            try:
                parts.dumps(bad)
            except Exception as got:
                assert type(got) is type(expected)
            else:
                raise AssertionError(f"{bad!r} was serialised")


_PRINTABLE_ASCII = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E))
_QUOTED = st.text(alphabet=st.sampled_from('"\\.{}:,ab\\u002e'), min_size=1)  # a token payload's characters, dense
TOKEN_LIKE = st.builds(lambda a, b, c: f"{a}.{b}.{c}", _PRINTABLE_ASCII, _QUOTED, _PRINTABLE_ASCII)


@settings(max_examples=500, deadline=None)
@given(text=_PRINTABLE_ASCII | TOKEN_LIKE)
def test_printable_ascii_strings_take_the_c_encoder_with_rfc8785s_bytes(text: str) -> None:
    assert printable_ascii_string_bytes(text) == rfc8785.dumps(text)


def test_a_tokens_escapes_are_replaced_without_an_encoder_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkpoint-like token (a JSON payload between two dots) is quoted with its ``"`` and ``\\`` replaced:
    ``json.dumps``, which reads every character twice, is not called; the bytes are ``rfc8785``'s."""
    payload = json.dumps({"seq": 1, "release": {"id": "w@1\\u002e2", "note": 'a "b" \\ c'}}, separators=(",", ":"))
    token = f"eyJhbGciOiJIUzI1NiJ9.{payload}.c2lnbmF0dXJl"
    expected = rfc8785.dumps(token)

    def refused(*args: Any, **kwargs: Any) -> str:
        raise AssertionError("json.dumps was called")

    monkeypatch.setattr(json, "dumps", refused)
    assert printable_ascii_string_bytes(token) == expected


@settings(max_examples=300, deadline=None)
@given(text=st.text())
def test_any_other_string_is_left_to_rfc8785(text: str) -> None:
    data = printable_ascii_string_bytes(text)
    if all(0x20 <= ord(c) <= 0x7E for c in text):
        assert data == rfc8785.dumps(text)
    else:
        assert data is None


def test_control_delete_non_ascii_and_subclasses_are_left_to_rfc8785() -> None:
    class Text(str):
        pass

    for text in ('a"\x7f', 'a"\x1f', 'a"\t', 'a"\u00e9', 'a"\u2028', 'a"\U0001f600', Text('a"b')):
        assert printable_ascii_string_bytes(text) is None
    parts = CanonicalParts()
    for text in ('a"\x7f', 'a"\x01\\', 'x\\"\u2028', Text('a"b')):
        value: Any = {"t": text, "n": {"t": text}}
        assert parts.dumps(value) == rfc8785.dumps(value)


@settings(max_examples=200, deadline=None)
@given(value=st.recursive(SCALARS | TOKEN_LIKE, lambda inner: st.dictionaries(st.text(), inner, max_size=5)))
def test_token_like_strings_compose_to_rfc8785_of_the_whole(value: Any) -> None:
    parts = CanonicalParts()
    parts.keep({"kept": "part"})
    envelope = {"checkpoint": value, "step": {"kept": "part"}, "bundle": {"validation_token": value}}
    assert parts.dumps(envelope) == rfc8785.dumps(envelope)
    assert parts.dumps(value) == rfc8785.dumps(value)
