"""plain_json_bytes: the stdlib's C encoder writes RFC 8785's bytes on its subset, and declines everything else.

The result envelope's skeleton goes through ``plain_json_bytes`` first; these
tests hold it (and ``CanonicalParts.dumps`` over it) to ``rfc8785.dumps`` byte
for byte, and hold every value outside the subset to ``rfc8785``'s own answer
or error.
"""

from __future__ import annotations

import enum
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st
from rimthan_workflow_registry.canonical import CanonicalParts, canonical_bytes, plain_json_bytes
from support.json_values import JSON

_LIMIT = 2**53 - 1
_PRINTABLE = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E))
PLAIN = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-_LIMIT, max_value=_LIMIT) | _PRINTABLE,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(_PRINTABLE, inner, max_size=5),
    max_leaves=40,
)


def _answer(encode: Any, value: Any) -> tuple[str, Any]:
    try:
        return "bytes", encode(value)
    except Exception as exc:  # the error itself is what is compared
        return type(exc).__name__, str(exc)


def _same_as_rfc8785(value: Any) -> None:
    """``plain_json_bytes`` is rfc8785's bytes or declines; ``CanonicalParts.dumps`` answers as rfc8785 does."""
    plain = plain_json_bytes(value)
    expected = _answer(rfc8785.dumps, value)
    if plain is not None:
        assert ("bytes", plain) == expected
    assert _answer(canonical_bytes, value) == expected
    assert _answer(CanonicalParts().dumps, value) == expected
    assert _answer(CanonicalParts().dumps, {"status": "active", "value": value, "n": [value]}) == _answer(
        rfc8785.dumps, {"status": "active", "value": value, "n": [value]}
    )


@settings(max_examples=300, deadline=None)
@given(value=PLAIN)
def test_every_value_of_the_subset_is_encoded_in_c_as_rfc8785_does(value: Any) -> None:
    plain = plain_json_bytes(value)
    assert plain is not None
    assert plain == rfc8785.dumps(value)
    assert canonical_bytes(value) == plain
    assert CanonicalParts().dumps(value) == plain


@settings(max_examples=300, deadline=None)
@given(value=JSON)
def test_arbitrary_json_values_give_rfc8785_bytes(value: Any) -> None:
    _same_as_rfc8785(value)


@pytest.mark.parametrize("code", range(0x80))
def test_every_ascii_character_in_keys_and_strings(code: int) -> None:
    char = chr(code)
    for value in (char, f'a{char}"', {char: char}, {f"k{char}": [f"\\{char}"], "k": 1}, [{"x": char}]):
        _same_as_rfc8785(value)
        assert (plain_json_bytes(value) is None) == (not 0x20 <= code <= 0x7E)


@pytest.mark.parametrize("text", ["\u00e9", "\u2028", "\ufeff", "\U0001f600", "\ud800", "\udfff", "a\x7f"])
def test_non_ascii_and_surrogates_go_to_rfc8785(text: str) -> None:
    for value in (text, {text: 1}, {"k": [text]}):
        assert plain_json_bytes(value) is None
        _same_as_rfc8785(value)


def test_integers_at_the_boundary() -> None:
    for n in (_LIMIT, -_LIMIT, 0, -1):
        assert plain_json_bytes({"n": [n]}) == rfc8785.dumps({"n": [n]})
    for n in (_LIMIT + 1, -_LIMIT - 1, 2**64, -(2**64)):
        assert plain_json_bytes({"n": [n]}) is None
        _same_as_rfc8785(n)  # rfc8785's own IntegerDomainError


class _Int(int):
    pass


class _Float(float):
    pass


class _Str(str):
    pass


class _Dict(dict[str, Any]):
    pass


class _List(list[Any]):
    pass


class _Level(enum.IntEnum):
    LOW = 1


@pytest.mark.parametrize(
    "value",
    [_Int(3), _Float(1.5), _Str("a"), _Dict(a=1), _List([1]), _Level.LOW, -0.0, 1.0, 0.5, 1e21, float("nan"), (1, 2)],
    ids=repr,
)
def test_floats_subclasses_and_other_types_go_to_rfc8785(value: Any) -> None:
    for wrapped in (value, {"k": value}, [value], {"k": {"j": [value]}}):
        assert plain_json_bytes(wrapped) is None
        _same_as_rfc8785(wrapped)


def test_keys_that_are_not_plain_strings_go_to_rfc8785() -> None:
    for value in ({1: "a"}, {None: 1}, {_Str("a"): 1}, {"a": {True: 1}}):
        assert plain_json_bytes(value) is None
        _same_as_rfc8785(value)


def test_a_cycle_or_deep_nesting_is_left_to_rfc8785() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    assert plain_json_bytes(cycle) is None
    assert plain_json_bytes({"k": cycle}) is None
    deep: Any = "x"
    for _ in range(100_000):
        deep = [deep]
    assert plain_json_bytes(deep) is None


def test_canonical_bytes_writes_a_plain_manifest_without_rfc8785(monkeypatch: pytest.MonkeyPatch) -> None:
    """A release manifest lies in the subset: ``canonical_bytes`` writes it by the C encoder, never calling rfc8785."""
    files = [
        {"media_type": "text/markdown", "path": f"docs/{n:05d}.md", "sha256": f"{n:064x}", "size": n} for n in range(50)
    ]
    manifest: dict[str, Any] = {"files": files, "format": "rimthan-release/1", "name": "demo", "version": "1.0.0"}
    expected = rfc8785.dumps(manifest)

    def refused(value: Any) -> bytes:
        raise AssertionError("rfc8785 was called for a plain value")

    monkeypatch.setattr(rfc8785, "dumps", refused)  # the module canonical calls it through
    assert canonical_bytes(manifest) == expected
    with pytest.raises(AssertionError, match="rfc8785 was called"):
        canonical_bytes({"price": 1.5})  # a float is outside the subset: rfc8785 answers for it
