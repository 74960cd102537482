"""member_digests / recurring_member_digests: a confirmed state's digests are always ``digest_value``'s.

``member_digests`` composes an object's bytes from its members' ``rfc8785``
bytes: the digests (and the refusals) must be exactly those of
``digest_value`` on the object and on each member, and the size the length of
``canonical_bytes`` of the object (what a confirmed state's bound measures). Remembered digests are
keyed by the object's exact ``marshal`` bytes and made from the value those
bytes encode, so values that only look alike (``1``, ``True``, ``1.0``,
``"1"``; an ``int`` key and a ``str`` key) never share a digest; they are
remembered only when the object's digest is the scope.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rimthan_workflow_registry import canonical
from rimthan_workflow_registry.canonical import canonical_bytes, digest_value, member_digests, recurring_member_digests
from rimthan_workflow_registry.run import ConfirmedState
from support.json_values import JSON

SCOPE = "sha256:" + "0" * 64  # the state digest of a verified checkpoint
KEYS = st.text() | st.sampled_from(["a", "b", "é", "\U0001f600", "\uff61", 'q"', "\\", "\x7f", "\n", ""])
OBJECTS = st.dictionaries(KEYS, JSON, max_size=8)


def _direct(value: dict[Any, Any]) -> tuple[str, dict[Any, str], int]:
    return digest_value(value), {k: digest_value(v) for k, v in value.items()}, len(canonical_bytes(value))


def _digests(value: dict[Any, Any], scope: str | None = None) -> tuple[str, dict[Any, str], int]:
    digest, members, size = member_digests(value) if scope is None else recurring_member_digests(value, scope)
    return digest, dict(members), size


@settings(max_examples=500, deadline=None)
@given(value=OBJECTS)
def test_composed_digests_are_the_digests_of_the_object_and_its_members(value: dict[str, Any]) -> None:
    assert _digests(value) == _direct(value)
    assert _digests(value, SCOPE) == _direct(value)
    own = digest_value(value)
    assert _digests(value, own) == _digests(value, own) == _direct(value)  # the second answer is the remembered one


_LIMIT = 2**53 - 1
_PRINTABLE = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E))
PLAIN = st.recursive(  # plain_json_bytes' subset: a confirmed state of printable ASCII text
    st.none() | st.booleans() | st.integers(min_value=-_LIMIT, max_value=_LIMIT) | _PRINTABLE,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_PRINTABLE, inner, max_size=4),
    max_leaves=20,
)
AWKWARD = JSON | st.sampled_from(
    [_LIMIT + 1, -_LIMIT - 1, 2**64, float("nan"), float("inf"), "\ud800", "é", "\x7f", 1.5, -0.0, {1}, ["\udfff"]]
)
# plain objects, and plain objects with a few members from outside the subset (some without an RFC 8785 form)
MOSTLY_PLAIN = st.dictionaries(_PRINTABLE, PLAIN, max_size=6) | st.tuples(
    st.dictionaries(_PRINTABLE, PLAIN, max_size=6), st.dictionaries(KEYS, AWKWARD, min_size=1, max_size=2)
).map(lambda parts: {**parts[0], **parts[1]})


def _answer(digests: Any, value: dict[str, Any]) -> tuple[Any, ...]:
    try:
        digest, members, size = digests(value)
    except Exception as exc:  # the error itself is what is compared
        return type(exc).__name__, str(exc)
    return digest, dict(members), size


@settings(max_examples=500, deadline=None)
@given(value=MOSTLY_PLAIN)
def test_plain_members_by_the_c_encoder_give_digest_values_digests_and_errors(value: dict[str, Any]) -> None:
    """The object's digest and each member's are ``digest_value``'s, and a refusal is its first error."""
    expected = _answer(_direct, value)
    assert _answer(member_digests, value) == expected
    assert _answer(lambda v: recurring_member_digests(v, SCOPE), value) == expected


def test_a_plain_object_is_composed_from_its_members_each_encoded_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A confirmed state of printable ASCII: each member written by the C encoder once, the object never again.

    The object's bytes are composed from its members' (keys in code-point order, a key holding a quote or a
    backslash escaped), the same bytes the encoder writes for the whole object: the digests are ``digest_value``'s.
    """
    value: dict[str, Any] = {"z": ["x", 1, None], "a": {"k": 'q"', "b": True}, 'c"\\': "v", "A": -3, "m": {}}
    expected = _direct(value)
    encoded: list[Any] = []
    encode = canonical._C_ENCODE

    def counted(item: Any) -> str:
        encoded.append(item)
        return encode(item)

    monkeypatch.setattr(canonical, "_C_ENCODE", counted)
    assert _digests(value) == expected
    written = [item for item in encoded if not isinstance(item, str) or item in value.values()]
    assert all(item is not value for item in encoded)  # the whole object is not encoded again
    assert sorted(map(id, written)) == sorted(map(id, value.values()))  # each member once


def test_keys_sort_by_utf16_code_units() -> None:
    value = {"\U0001f600": 1, "\uff61": 2, "a": 3, "é": 4, "": 5, "aa": 6}  # U+1F600 sorts before U+FF61 in UTF-16
    assert _digests(value) == _direct(value)


def test_values_that_only_look_alike_never_share_a_digest() -> None:
    look_alike: list[Any] = [1, True, 1.0, "1", [1], (1,), {"a": 1}, {"a": True}, {"a": 1.0}, -0.0, 0, False]
    for value in look_alike:
        _digests({"x": value}, digest_value({"x": value}))  # all remembered, in turn
    for value in look_alike:
        assert _digests({"x": value}, digest_value({"x": value})) == _direct({"x": value})
    with pytest.raises(Exception) as direct:
        digest_value({1: "x"})
    for scope in (None, SCOPE):
        with pytest.raises(type(direct.value), match="object keys must be strings"):
            _digests({1: "x"}, scope)


class _Text(str):
    pass


def test_subclasses_and_large_values_are_digested_directly() -> None:
    for value in ({"k": _Text("a")}, {_Text("k"): "a"}, {"big": "x" * (128 * 1024)}):
        assert _digests(value) == _digests(value, digest_value(value)) == _direct(value)


BAD: list[Any] = [
    {"n": 2**60},
    {"f": float("nan")},
    {"s": "\ud800"},
    {"\ud800": 1},
    {"s": {1, 2}},
    {"a": 2**60, "b": "\ud800"},
]


@pytest.mark.parametrize("bad", [*BAD, {"z": 1, **BAD[0], "b": {"c": float("inf")}}])
def test_a_value_without_canonical_form_is_refused_every_time_with_the_same_error(bad: Any) -> None:
    with pytest.raises(Exception) as direct:
        digest_value(bad)
    for scope in (None, SCOPE, SCOPE):
        with pytest.raises(type(direct.value)) as got:
            _digests(bad, scope)
        assert str(got.value) == str(direct.value)


def test_a_confirmed_state_digests_its_exact_values() -> None:
    sent = {"state": {"objective": "x", "options": ["a", "b"], "n": 1}, "confirmations": {}}
    first = ConfirmedState.from_json(sent)
    assert first.digest == digest_value(sent["state"])
    assert first.field_digest("options") == digest_value(["a", "b"])
    changed = ConfirmedState.from_json({"state": {"objective": "x", "options": ["a", "b"], "n": True}})
    assert changed.digest == digest_value({"objective": "x", "options": ["a", "b"], "n": True}) != first.digest
    assert changed.field_digest("n") != first.field_digest("n")
    with pytest.raises(KeyError):
        first.field_digest("absent")


def _remembered() -> int:
    return canonical._digests_of_marshalled.cache_info().currsize


def test_a_value_is_remembered_only_within_its_scope() -> None:
    value = {"objective": "scoped", "n": 7}
    own = digest_value(value)
    before = canonical._digests_of_marshalled.cache_info()
    assert _digests(value, own) == _digests(value, own) == _direct(value)
    other = "sha256:" + "1" * 64
    assert _digests(value, other) == _direct(value)
    after = canonical._digests_of_marshalled.cache_info()
    assert after.hits - before.hits == 1  # the second call in its scope; the other scope computed its own
    assert after.misses - before.misses == 2
    hits = after.hits
    assert _digests(value, other) == _direct(value)  # not its digest: never kept in that scope
    assert canonical._digests_of_marshalled.cache_info().hits == hits


def test_a_state_sent_without_a_verified_checkpoint_is_never_remembered() -> None:
    before = _remembered(), canonical._digests_of_marshalled.cache_info().hits
    state = ConfirmedState.from_json({"state": {"objective": "a start's state"}, "confirmations": {}})
    assert state.digest == digest_value({"objective": "a start's state"})
    assert state.field_digest("objective") == digest_value("a start's state")
    assert (_remembered(), canonical._digests_of_marshalled.cache_info().hits) == before
    asked = canonical._digests_of_marshalled.cache_info()
    own = digest_value({"objective": "a start's state"})  # the scope a checkpoint of this state would give
    scoped = ConfirmedState.from_json({"state": {"objective": "a start's state"}}, memo_scope=own)
    assert scoped.digest == state.digest and scoped.field_digest("objective") == state.field_digest("objective")
    now = canonical._digests_of_marshalled.cache_info()
    assert (now.hits + now.misses) - (asked.hits + asked.misses) == 1  # the whole state, its fields with it


def test_a_state_that_is_not_the_checkpoints_is_never_remembered() -> None:
    """Sent with a checkpoint of another state (a call then refused): neither the state nor its fields are kept."""
    sent = {"objective": "not the checkpoint's state", "n": 11}
    state = ConfirmedState.from_json({"state": sent}, memo_scope=SCOPE)
    assert state.digest == digest_value(sent) != SCOPE
    assert state.field_digest("objective") == digest_value(sent["objective"])
    hits = canonical._digests_of_marshalled.cache_info().hits
    assert _digests(sent, SCOPE) == _direct(sent)
    assert canonical._digests_of_marshalled.cache_info().hits == hits


def test_the_checkpoints_own_state_is_remembered() -> None:
    sent = {"objective": "the checkpoint's state", "n": 12}
    scope = digest_value(sent)
    first = ConfirmedState.from_json({"state": sent}, memo_scope=scope)
    assert first.field_digest("objective") == digest_value(sent["objective"])
    hits = canonical._digests_of_marshalled.cache_info().hits
    again = ConfirmedState.from_json({"state": dict(sent)}, memo_scope=scope)
    assert again.digest == scope and again.field_digest("objective") == digest_value(sent["objective"])
    assert canonical._digests_of_marshalled.cache_info().hits == hits + 1


def test_a_confirmation_is_built_without_the_generated_init_and_is_the_same_frozen_record() -> None:
    """A state's confirmations (one per field, every call that carries a state) are built by ``Confirmation``'s own
    ``__init__``, not the frozen dataclass's generated one: the same fields, in order, equality and frozenness."""
    from rimthan_workflow_registry.run.confirmed_state import Confirmation

    assert Confirmation.__init__.__code__.co_filename.endswith("confirmed_state.py")  # generated: "<string>"
    assert list(inspect.signature(Confirmation).parameters) == [f.name for f in dataclasses.fields(Confirmation)]
    digest = digest_value("yes")
    state = ConfirmedState.from_json(
        {
            "state": {"a": "yes"},
            "confirmations": {"a": {"value_digest": digest, "confirmed_at": 7, "confirmed_by": "u"}},
        }
    )
    (made,) = state.confirmations.values()
    assert made == Confirmation(digest, 7) == Confirmation(value_digest=digest, confirmed_at=7)
    assert (made.value_digest, made.confirmed_at) == (digest, 7) and made != Confirmation(digest, 8)
    assert hash(made) == hash(Confirmation(digest, 7))
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.confirmed_at = 8  # type: ignore[misc]
