"""recurring_digest: a confirmed state's digest, remembered per scope and exact value, is always ``digest_value``.

The key is the value's exact ``marshal`` bytes and the remembered digest is
made from the value those bytes encode, so values that only look alike
(``1``, ``True``, ``1.0``, ``"1"``; an ``int`` key and a ``str`` key) never
share a digest, and a value with no RFC 8785 form is refused every time
with ``rfc8785``'s own error.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from rimthan_workflow_registry import canonical
from rimthan_workflow_registry.canonical import digest_value, recurring_digest
from rimthan_workflow_registry.run import ConfirmedState
from support.json_values import JSON

SCOPE = "sha256:" + "0" * 64  # the state digest of a verified checkpoint


@settings(max_examples=300, deadline=None)
@given(value=JSON)
def test_a_remembered_digest_is_the_digest_of_the_value(value: Any) -> None:
    assert recurring_digest(value, SCOPE) == digest_value(value)
    assert recurring_digest(value, SCOPE) == digest_value(value)  # the second answer is the remembered one


def test_values_that_only_look_alike_never_share_a_digest() -> None:
    look_alike: list[Any] = [1, True, 1.0, "1", [1], (1,), {"a": 1}, {"a": True}, {"a": 1.0}, -0.0, 0, False]
    for value in look_alike:
        recurring_digest(value, SCOPE)  # all remembered, in turn
    for value in look_alike:
        assert recurring_digest(value, SCOPE) == digest_value(value)
    recurring_digest({"1": "x"}, SCOPE)
    with pytest.raises(Exception) as direct:
        digest_value({1: "x"})
    with pytest.raises(type(direct.value), match="object keys must be strings"):
        recurring_digest({1: "x"}, SCOPE)


class _Text(str):
    pass


def test_subclasses_and_large_values_are_digested_directly() -> None:
    for value in (_Text("a"), {"k": _Text("a")}, {"big": "x" * (128 * 1024)}):
        assert recurring_digest(value, SCOPE) == digest_value(value)


@pytest.mark.parametrize("bad", [2**60, {"n": 2**60}, float("nan"), "\ud800", {"s": {1, 2}}])
def test_a_value_without_canonical_form_is_refused_every_time(bad: Any) -> None:
    with pytest.raises(Exception) as direct:
        digest_value(bad)
    for _ in range(2):
        with pytest.raises(type(direct.value)) as got:
            recurring_digest(bad, SCOPE)
        assert str(got.value) == str(direct.value)


def test_a_confirmed_state_digests_its_exact_values() -> None:
    sent = {"state": {"objective": "x", "options": ["a", "b"], "n": 1}, "confirmations": {}}
    first = ConfirmedState.from_json(sent)
    assert first.digest == digest_value(sent["state"])
    assert first.field_digest("options") == digest_value(["a", "b"])
    changed = ConfirmedState.from_json({"state": {"objective": "x", "options": ["a", "b"], "n": True}})
    assert changed.digest == digest_value({"objective": "x", "options": ["a", "b"], "n": True}) != first.digest
    assert changed.field_digest("n") != first.field_digest("n")


def _remembered() -> int:
    return canonical._digest_of_marshalled.cache_info().currsize


def test_a_value_is_remembered_only_within_its_scope() -> None:
    value = {"objective": "scoped", "n": 7}
    before = canonical._digest_of_marshalled.cache_info()
    assert recurring_digest(value, SCOPE) == digest_value(value)
    assert recurring_digest(value, SCOPE) == digest_value(value)
    other = "sha256:" + "1" * 64
    assert recurring_digest(value, other) == digest_value(value)
    after = canonical._digest_of_marshalled.cache_info()
    assert after.hits - before.hits == 1  # the second call in SCOPE; the other scope computed its own
    assert after.misses - before.misses == 2


def test_a_state_sent_without_a_verified_checkpoint_is_never_remembered() -> None:
    before = _remembered(), canonical._digest_of_marshalled.cache_info().hits
    state = ConfirmedState.from_json({"state": {"objective": "a start's state"}, "confirmations": {}})
    assert state.digest == digest_value({"objective": "a start's state"})
    assert state.field_digest("objective") == digest_value("a start's state")
    assert (_remembered(), canonical._digest_of_marshalled.cache_info().hits) == before
    asked = canonical._digest_of_marshalled.cache_info()
    scoped = ConfirmedState.from_json({"state": {"objective": "a start's state"}}, memo_scope=SCOPE)
    assert scoped.digest == state.digest and scoped.field_digest("objective") == state.field_digest("objective")
    now = canonical._digest_of_marshalled.cache_info()
    assert (now.hits + now.misses) - (asked.hits + asked.misses) == 2  # the whole state and the one field
