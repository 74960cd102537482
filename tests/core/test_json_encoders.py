"""compact_encoder: the prebuilt C encoder answers exactly as ``json.JSONEncoder(...).encode`` does.

Token payloads, checkpoint claims and plain canonical bytes are written by
these encoders, so their text must be the stdlib's character for character,
and so must their errors: values JSON cannot write, non-finite floats, keys
``sort_keys`` cannot order, a value that contains itself (``ValueError``,
though the prebuilt encoder has no cycle check) and nesting too deep
(``RecursionError``). Each configuration is compared on random values
(hypothesis), with and without the C encoder.
"""

from __future__ import annotations

import json
import json.encoder
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rimthan_workflow_registry.canonical import member_digests, plain_json_bytes
from rimthan_workflow_registry.errors import TokenError
from rimthan_workflow_registry.json_encoders import compact_encoder
from rimthan_workflow_registry.run.checkpoint_claims import accepted_fast
from rimthan_workflow_registry.run.checkpoints import Checkpoint, HostBinding
from rimthan_workflow_registry.run.token_wire import claims_payload

CONFIGURATIONS = [(sort_keys, ensure_ascii) for sort_keys in (False, True) for ensure_ascii in (False, True)]
_TEXT = st.text(st.sampled_from('ab.-"\\/\x00\x1f\x7f é€\u2028\U0001f600\ud800'), max_size=6) | st.text(max_size=6)
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()  # NaN and infinities are refused (allow_nan=False), as the stdlib refuses them
    | _TEXT
    | st.sampled_from([b"x", {1}, (1, "a"), object()])  # a tuple is an array; the others are refused
)
_KEYS = _TEXT | st.integers(-3, 3) | st.none() | st.booleans()  # non-string keys: converted, or unsortable
VALUES = st.recursive(
    _SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS, inner, max_size=4), max_leaves=30
)


def _answer(encode: Callable[[Any], str], value: Any) -> tuple[str, str]:
    try:
        return "text", encode(value)
    except Exception as exc:  # the error itself is what is compared
        return type(exc).__name__, str(exc)


def _stdlib(sort_keys: bool, ensure_ascii: bool) -> Callable[[Any], str]:
    return json.JSONEncoder(
        sort_keys=sort_keys, ensure_ascii=ensure_ascii, separators=(",", ":"), allow_nan=False
    ).encode


def _cyclic() -> list[Any]:
    loop: dict[str, Any] = {"a": [1]}
    loop["a"].append(loop)
    nested: list[Any] = []
    nested.append(nested)
    return [loop, nested, [{"x": loop}]]


def _deep() -> list[Any]:
    value: list[Any] = []
    for _ in range(100_000):
        value = [value]
    return value


@settings(max_examples=400, deadline=None)
@given(value=VALUES, configuration=st.sampled_from(CONFIGURATIONS))
def test_the_prebuilt_encoder_answers_as_the_stdlib_encode(value: Any, configuration: tuple[bool, bool]) -> None:
    assert _answer(compact_encoder(sort_keys=configuration[0], ensure_ascii=configuration[1]), value) == _answer(
        _stdlib(*configuration), value
    )


@pytest.mark.parametrize(("sort_keys", "ensure_ascii"), CONFIGURATIONS)
def test_cycles_and_deep_nesting_raise_what_the_stdlib_raises(sort_keys: bool, ensure_ascii: bool) -> None:
    encode, stdlib = compact_encoder(sort_keys=sort_keys, ensure_ascii=ensure_ascii), _stdlib(sort_keys, ensure_ascii)
    for value in _cyclic():
        assert _answer(encode, value) == _answer(stdlib, value) == ("ValueError", "Circular reference detected")
    assert _answer(encode, _deep())[0] == _answer(stdlib, _deep())[0] == "RecursionError"
    for value in TABLE:  # nothing kept from a failed encode
        assert _answer(encode, value) == _answer(stdlib, value)


def test_one_encoder_per_configuration() -> None:
    assert compact_encoder(sort_keys=True, ensure_ascii=True) is compact_encoder(sort_keys=True, ensure_ascii=True)
    assert compact_encoder(sort_keys=True, ensure_ascii=True) is not compact_encoder(sort_keys=True, ensure_ascii=False)


TABLE: list[Any] = [
    {"b": [1, "x.y", None, True], "a": {"\u00e9": '\u2028"\\', "": -0}},
    ["\U0001f600", "\ud800", 2**64, 1.5],
    {1: "int key", "1": "same text"},
    {"a": 1, 2: "unsortable"},
    float("nan"),
    {"set": {1}},
    "plain string",
]


@pytest.mark.parametrize(("sort_keys", "ensure_ascii"), CONFIGURATIONS)
def test_without_the_c_encoder_the_stdlib_encode_is_used(
    monkeypatch: pytest.MonkeyPatch, sort_keys: bool, ensure_ascii: bool
) -> None:
    monkeypatch.setattr(json.encoder, "c_make_encoder", None)
    encode, stdlib = (
        compact_encoder.__wrapped__(sort_keys=sort_keys, ensure_ascii=ensure_ascii),
        _stdlib(sort_keys, ensure_ascii),
    )
    for value in [*TABLE, *_cyclic()]:
        assert _answer(encode, value) == _answer(stdlib, value)


def test_every_caller_refuses_a_cycle_as_before() -> None:
    for value in _cyclic():
        assert plain_json_bytes(value) is None  # rfc8785 answers for it, as before
        with pytest.raises(ValueError, match="Circular reference detected"):
            claims_payload({"iat": 1, "v": value})
    with pytest.raises(RecursionError):
        member_digests(_cyclic()[0])
    host = HostBinding.of("h", "1.0.0", ["c"], [])
    claims = Checkpoint(1, "w", "1.0.0", "r", "sha256:" + "0" * 64, "s", "sha256:" + "1" * 64, None, host=host)
    for value in _cyclic():
        cyclic = {**claims.to_claims(), "step": value}
        assert not accepted_fast(cyclic)
        with pytest.raises(TokenError, match="malformed"):
            Checkpoint.from_claims(cyclic)
