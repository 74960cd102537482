"""A token's header is parsed once per distinct header text, and shared read-only.

A server writes one header per key id and token kind, so every checkpoint and
validation bundle it verifies carries one of a few headers: the parse of a
header segment is remembered by its exact characters (``token_wire._header``).
The same characters always decode to the same object, so nothing a
verification decides can change; a segment that is not the canonical
base64url of a JSON object is refused as before, and a segment longer than any
header a server writes is parsed every time (the memory stays bounded).
Real tokens signed with a real keyring, through ``split_token`` and ``verify``.
"""

from __future__ import annotations

import base64
import json

import pytest
from rimthan_workflow_registry.errors import FailureCode, TokenError
from rimthan_workflow_registry.run import token_wire
from rimthan_workflow_registry.run.token_wire import claims_payload, split_token
from rimthan_workflow_registry.run.tokens import BUNDLE_TYPE, CHECKPOINT_TYPE, CheckpointKeyring


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def test_tokens_of_one_key_and_kind_share_one_parsed_header() -> None:
    keyring = CheckpointKeyring.generate()
    first = keyring.sign_payload(claims_payload({"iat": 1, "a": "x"}), CHECKPOINT_TYPE)
    second = keyring.sign_payload(claims_payload({"iat": 2, "b": [1]}), CHECKPOINT_TYPE)
    bundle = keyring.sign_payload(claims_payload({"iat": 3}), BUNDLE_TYPE)
    one, two, other = (split_token(t) for t in (first, second, bundle))
    assert one is not None and two is not None and other is not None
    assert one.header is two.header  # parsed once
    assert other.header is not one.header and other.header["typ"] != one.header["typ"]
    assert keyring.verify(second, CHECKPOINT_TYPE, FailureCode.CHECKPOINT_INVALID)["b"] == [1]


def test_a_shared_header_cannot_be_changed() -> None:
    keyring = CheckpointKeyring.generate()
    segments = split_token(keyring.sign_payload(claims_payload({"iat": 1}), CHECKPOINT_TYPE))
    assert segments is not None
    with pytest.raises(TypeError):
        segments.header["kid"] = "another"  # type: ignore[index]
    again = split_token(keyring.sign_payload(claims_payload({"iat": 2}), CHECKPOINT_TYPE))
    assert again is not None and again.header["kid"] == keyring.signing_key_id


def test_a_header_seen_before_in_another_encoding_is_still_refused() -> None:
    keyring = CheckpointKeyring.generate()
    token = keyring.sign_payload(claims_payload({"iat": 1}), CHECKPOINT_TYPE)
    assert split_token(token) is not None and split_token(token) is not None  # remembered now
    header, rest = token.split(".", 1)
    for segment in (header + "=", header + "==", " " + header, header + "\n"):
        assert split_token(f"{segment}.{rest}") is None
        with pytest.raises(TokenError):
            keyring.verify(f"{segment}.{rest}", CHECKPOINT_TYPE, FailureCode.CHECKPOINT_INVALID)


def test_a_header_longer_than_any_server_writes_is_parsed_and_not_remembered() -> None:
    keyring = CheckpointKeyring.generate()
    token = keyring.sign_payload(claims_payload({"iat": 1}), CHECKPOINT_TYPE)
    header = json.loads(base64.urlsafe_b64decode(token.split(".")[0] + "=="))
    long_segment = _b64(json.dumps({**header, "x": "y" * 300}, separators=(",", ":")).encode())
    assert len(long_segment) > token_wire._REMEMBERED_HEADER_CHARS
    remembered = token_wire._remembered_header.cache_info()
    long_token = f"{long_segment}.{token.split('.', 1)[1]}"
    parsed = split_token(long_token)
    assert parsed is not None and parsed.header["x"] == "y" * 300
    assert token_wire._remembered_header.cache_info() == remembered
    with pytest.raises(TokenError):  # a member no header of ours has, and a MAC over other characters
        keyring.verify(long_token, CHECKPOINT_TYPE, FailureCode.CHECKPOINT_INVALID)
