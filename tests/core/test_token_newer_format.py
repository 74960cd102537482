"""A checkpoint or validation-bundle token of a later token format is refused as such, from its ``typ`` alone.

A later format types its tokens ``<kind>-<N>+jwt`` (``token_wire.NUMBERED_TYPE``, N >= 2); this version issues
and reads format 1 (``TOKEN_FORMAT``, types without a number). ``admit()`` meets such a header (its members
exactly this version's) with the token kind's code, saying a newer version issued it and to send the run to a
replica of that version or finish the upgrade: an operator in a rolling upgrade learns what happened. Anything
else about the number - 1, 0, a leading zero, a sign, extra text, another kind - stays "not a ... token", and so
does a numbered ``typ`` in a header of other members. Real tokens of a real keyring, their headers forged.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from rimthan_workflow_registry.errors import FailureCode, TokenError
from rimthan_workflow_registry.run.token_wire import TOKEN_FORMAT, claims_payload
from rimthan_workflow_registry.run.tokens import BUNDLE_TYPE, CHECKPOINT_TYPE, NEWER_TOKEN_NEXT, CheckpointKeyring

KINDS = {
    CHECKPOINT_TYPE: (FailureCode.CHECKPOINT_INVALID, "checkpoint"),
    BUNDLE_TYPE: (FailureCode.VALIDATION_BUNDLE_INVALID, "validation bundle"),
}


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _header(token: str) -> dict[str, Any]:
    segment = token.split(".")[0]
    header: dict[str, Any] = json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))
    return header


def _with_header(token: str, **changes: Any) -> str:
    """``token`` with its header's members changed (``None`` drops one); payload and signature as they were."""
    header = {k: v for k, v in {**_header(token), **changes}.items() if v is not None}
    return ".".join([_b64(json.dumps(header, separators=(",", ":")).encode()), *token.split(".")[1:]])


def _refusal(keyring: CheckpointKeyring, token: str, token_type: str) -> TokenError:
    code = KINDS[token_type][0]
    with pytest.raises(TokenError) as refused:
        keyring.admit(token, token_type, code)
    assert refused.value.code is code
    return refused.value


@pytest.mark.parametrize("token_type", sorted(KINDS))
@pytest.mark.parametrize("number", [2, 3, 17, 999_999_999])
def test_a_numbered_type_above_this_format_is_refused_as_issued_by_a_newer_version(
    token_type: str, number: int
) -> None:
    keyring = CheckpointKeyring.generate()
    token = keyring.sign_payload(claims_payload({"iat": 1, "run": "r"}), token_type)
    newer = token_type.replace("+jwt", f"-{number}+jwt")
    error = _refusal(keyring, _with_header(token, typ=newer), token_type)
    assert error.message == (
        f"the {KINDS[token_type][1]} token was issued by a newer Rimthan version "
        f"(format {number}; this one reads format {TOKEN_FORMAT})"
    )
    assert error.next_step == NEWER_TOKEN_NEXT and "replica" in NEWER_TOKEN_NEXT and "upgrade" in NEWER_TOKEN_NEXT
    assert keyring.admit(token, token_type, KINDS[token_type][0]).authentic().claims()["run"] == "r"  # issued as ever
    assert _header(token)["typ"] == token_type


def test_the_refusal_reads_nothing_but_typ_not_the_key_id_nor_any_claim() -> None:
    """A key id this keyring never held, a payload that is no JSON: still the newer-version refusal (before the MAC,
    nothing but ``typ`` is read, and the key id is not consulted for it)."""
    keyring = CheckpointKeyring.generate()
    token = keyring.sign_payload(claims_payload({"iat": 1}), CHECKPOINT_TYPE)
    forged = _with_header(token, typ="rimthan-checkpoint-2+jwt", kid="ck-elsewhere")
    header, _, signature = forged.split(".")
    for candidate in (forged, f"{header}.not-json-at-all.{signature}"):
        assert "newer Rimthan version (format 2;" in _refusal(keyring, candidate, CHECKPOINT_TYPE).message


@pytest.mark.parametrize(
    "typ",
    [
        "rimthan-checkpoint-1+jwt",  # this format, numbered: never written
        "rimthan-checkpoint-0+jwt",
        "rimthan-checkpoint-02+jwt",  # a leading zero
        "rimthan-checkpoint-+2+jwt",
        "rimthan-checkpoint--2+jwt",
        "rimthan-checkpoint-2.0+jwt",
        "rimthan-checkpoint-2x+jwt",
        "rimthan-checkpoint-x2+jwt",
        "rimthan-checkpoint-2+jwt ",  # extra text
        " rimthan-checkpoint-2+jwt",
        "rimthan-checkpoint-2+jwt\n",
        "rimthan-checkpoint-2+jws",
        "rimthan-checkpoint-2",
        "rimthan-checkpoint-2-3+jwt",
        "rimthan-checkpoint-\u0662+jwt",  # an Arabic-Indic two
        "rimthan-checkpoint-1234567890+jwt",  # more digits than any format number
        "Rimthan-Checkpoint-2+jwt",
        "rimthan-validation-bundle-2+jwt",  # another kind's newer format
        "rimthan-checkpoints-2+jwt",
    ],
)
def test_any_other_numbered_type_stays_not_a_checkpoint_token(typ: str) -> None:
    keyring = CheckpointKeyring.generate()
    token = keyring.sign_payload(claims_payload({"iat": 1}), CHECKPOINT_TYPE)
    assert (
        _refusal(keyring, _with_header(token, typ=typ), CHECKPOINT_TYPE).message
        == "the token is not a checkpoint token"
    )


def test_a_checkpoint_type_in_a_bundle_slot_stays_not_a_bundle_token() -> None:
    keyring = CheckpointKeyring.generate()
    token = keyring.sign_payload(claims_payload({"iat": 1}), BUNDLE_TYPE)
    error = _refusal(keyring, _with_header(token, typ="rimthan-checkpoint-2+jwt"), BUNDLE_TYPE)
    assert error.message == "the token is not a validation bundle token"


@pytest.mark.parametrize(
    "changes",
    [{"extra": "member"}, {"crit": None}, {"b64": None}, {"alg": None}, {"kid": None}],
    ids=["a member added", "no crit", "no b64", "no alg", "no kid"],
)
def test_the_header_members_are_still_checked_for_a_numbered_type(changes: dict[str, Any]) -> None:
    keyring = CheckpointKeyring.generate()
    token = keyring.sign_payload(claims_payload({"iat": 1}), CHECKPOINT_TYPE)
    forged = _with_header(token, typ="rimthan-checkpoint-2+jwt", **changes)
    assert _refusal(keyring, forged, CHECKPOINT_TYPE).message == "the token is not a checkpoint token"
