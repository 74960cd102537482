"""Forged run state: checkpoint and validation-bundle tokens attacked bit by bit and claim by claim.

All run state lives in HMAC-signed tokens (HS256 JWS with key ids and an
unencoded JSON payload, RFC 7797), so the server must refuse every token it
did not issue exactly as it issued it. Against
real tokens from a real engine over a real signed release:

* every single-bit flip of every character of a checkpoint token and of a
  validation bundle's ``validation_token`` (exhaustive), every flip of every
  bit of the decoded header and signature bytes and of the claims' bytes,
  every truncation;
* extensions, re-encodings (padding, the standard alphabet, non-canonical
  trailing bits, whitespace anywhere) and multi-point mutations (hypothesis);
* tokens signed with a retired or unknown key id, unsigned (``alg: none``),
  with other algorithms, in other serialisations, or in the earlier format
  (a base64url payload), which is refused with its own message;
* well-formed claims signed with the server's own keyring but for another
  release, workflow, step or host binding, each refused by the engine in
  context with the precise code;
* and, structurally, that the MAC comparison is ``hmac.compare_digest``.
"""

from __future__ import annotations

import base64
import hmac
import inspect
import json
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import jwt
import jwt.algorithms
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from rimthan_workflow_registry.errors import FailureCode, TokenError, WorkflowProtocolError
from rimthan_workflow_registry.run.checkpoints import (
    ISSUED,
    HostBinding,
    IssuedCheckpoint,
    issue_checkpoint,
    verify_checkpoint,
)
from rimthan_workflow_registry.run.token_wire import claims_payload
from rimthan_workflow_registry.run.tokens import BUNDLE_TYPE, CHECKPOINT_TYPE, CheckpointKeyring
from rimthan_workflow_registry.run.validation_bundle import verify_bundle
from support.engines import Engines, StepKit, TickingClock, WireEngine, example_state, examples, make_engines

F = FailureCode
CHECKPOINT_CODES = {F.CHECKPOINT_INVALID, F.CHECKPOINT_KEY_UNKNOWN}
BUNDLE_CODES = {F.VALIDATION_BUNDLE_INVALID, F.CHECKPOINT_KEY_UNKNOWN}
B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@dataclass(frozen=True)
class Run:
    """A real run of research-decision@1.2.0, stopped where validation bundles exist."""

    engines: Engines
    engine: WireEngine
    kit: StepKit
    state: dict[str, Any]
    checkpoint: str  # issued by start_workflow (setup-workspace)
    route_checkpoint: str  # at the desk-research step (gated, with validators)
    route_step: dict[str, Any]
    bundle: dict[str, Any]  # prepared at desk-research: reports required
    reports: list[dict[str, Any]]

    @property
    def keyring(self) -> CheckpointKeyring:
        return self.engines.keyring

    def continue_with(self, token: str) -> dict[str, Any]:
        return self.engine.continue_workflow({"checkpoint": token, "confirmed_state": self.state})

    def submit_with(
        self, bundle: dict[str, Any], checkpoint: str | None = None, reports: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        return self.engine.submit_step_validation(
            {
                "checkpoint": checkpoint or self.route_checkpoint,
                "confirmed_state": self.state,
                "validation_bundle": bundle,
                "reports": self.reports if reports is None else reports,
            }
        )

    def issued_route(self) -> IssuedCheckpoint:
        return verify_checkpoint(self.keyring, self.route_checkpoint)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    engines = make_engines(tmp_path_factory.mktemp("tokens"), TickingClock())
    engine, kit = engines.wire("1.2.0"), engines.harness("tokens")
    state = kit.confirm({**example_state("1.2.0"), "research_route": "desk-research"})
    started = engine.start_workflow({"workflow": "research", "confirmed_state": state, "host": kit.host()})
    assert started["status"] == "active"
    result = kit.pass_setup(engine, started, state)
    while result["step"]["id"] != "desk-research":
        result = engine.continue_workflow({"checkpoint": result["checkpoint"], "confirmed_state": state})
    ready = engine.prepare_step_validation(
        {
            "checkpoint": result["checkpoint"],
            "confirmed_state": state,
            "host": kit.host(),
            "artifacts": kit.write_outputs(result["step"], examples("1.2.0")),
        }
    )
    assert ready["status"] == "ready_for_semantic_validation" and ready["validators"]
    return Run(
        engines=engines,
        engine=engine,
        kit=kit,
        state=state,
        checkpoint=started["checkpoint"],
        route_checkpoint=result["checkpoint"],
        route_step=result["step"],
        bundle=ready["validation_bundle"],
        reports=kit.reports(ready),
    )


# --------------------------------------------------------------------------- helpers


def flip_char_bit(token: str, index: int, bit: int) -> str:
    """The token with one bit of one character's byte flipped (the result may not even be ASCII)."""
    return token[:index] + chr(ord(token[index]) ^ (1 << bit)) + token[index + 1 :]


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unb64(segment: str) -> bytes:
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))


PAYLOAD = 1  # the segment that carries the claims unencoded (RFC 7797); the header and signature are base64url


def segment_bytes(token: str, index: int) -> bytes:
    """The bytes a segment stands for: base64url-decoded, or the payload's own characters."""
    encoded = token.split(".")[index]
    return encoded.encode("ascii") if index == PAYLOAD else unb64(encoded)


def with_segment(token: str, index: int, data: bytes) -> str:
    parts = token.split(".")
    parts[index] = data.decode("latin-1") if index == PAYLOAD else b64(data)
    return ".".join(parts)


def sign_unencoded(payload: bytes, key: bytes, **headers: Any) -> str:
    """What ``CheckpointKeyring.sign_payload`` writes, any headers: PyJWT signs detached, the payload goes between."""
    header, _, signature = jwt.api_jws.encode(payload, key, algorithm="HS256", headers={**headers, "b64": False}).split(
        "."
    )
    return f"{header}.{payload.decode('ascii')}.{signature}"


def refuse_checkpoint(keyring: CheckpointKeyring, token: Any) -> TokenError:
    try:
        verify_checkpoint(keyring, token)
    except TokenError as exc:
        assert exc.code in CHECKPOINT_CODES, exc.one_line()
        return exc
    raise AssertionError(f"checkpoint token ACCEPTED: {token!r}")


def refuse_bundle(run: Run, token: Any, issued: IssuedCheckpoint | None = None) -> TokenError:
    try:
        verify_bundle(run.keyring, {**run.bundle, "validation_token": token}, issued or run.issued_route())
    except TokenError as exc:
        assert exc.code in BUNDLE_CODES, exc.one_line()
        return exc
    raise AssertionError(f"validation token ACCEPTED: {token!r}")


def target(run: Run, kind: str) -> tuple[str, Callable[[Any], TokenError]]:
    """The real token of ``kind`` and the check that refuses a mutation of it."""
    if kind == "checkpoint":
        return run.checkpoint, lambda token: refuse_checkpoint(run.keyring, token)
    issued = run.issued_route()  # verified once: each mutation then costs one bundle verification
    return run.bundle["validation_token"], lambda token: refuse_bundle(run, token, issued)


def test_the_unaltered_tokens_are_accepted(run: Run) -> None:
    """The control: the exact tokens verify, so every refusal below is the mutation's doing."""
    assert verify_checkpoint(run.keyring, run.checkpoint).checkpoint.sequence == 1
    verified = verify_bundle(run.keyring, run.bundle, run.issued_route())
    assert verified.step_id == "desk-research" and verified.validators
    assert run.continue_with(run.checkpoint)["status"] == "active"


# --------------------------------------------------------------------------- exhaustive: every bit, every prefix


@pytest.mark.parametrize("kind", ["checkpoint", "bundle"])
def test_every_single_bit_flip_of_every_character_is_refused(run: Run, kind: str) -> None:
    token, refuse = target(run, kind)
    tried = 0
    for index in range(len(token)):
        for bit in range(8):
            refuse(flip_char_bit(token, index, bit))
            tried += 1
    assert tried == 8 * len(token)


@pytest.mark.parametrize("kind", ["checkpoint", pytest.param("bundle", marks=pytest.mark.long)])
def test_every_bit_flip_of_the_decoded_header_claims_and_signature_is_refused(run: Run, kind: str) -> None:
    """Flip each bit of the raw bytes, re-encode canonically: the MAC (or the header rules) must catch it."""
    token, refuse = target(run, kind)
    for segment in range(3):
        raw = segment_bytes(token, segment)
        for index in range(len(raw)):
            for bit in range(8):
                mutated = bytearray(raw)
                mutated[index] ^= 1 << bit
                refuse(with_segment(token, segment, bytes(mutated)))


@pytest.mark.parametrize("kind", ["checkpoint", "bundle"])
def test_every_truncation_is_refused(run: Run, kind: str) -> None:
    token, refuse = target(run, kind)
    for length in range(len(token)):
        refuse(token[:length])
    for cut in range(1, len(token)):  # and every suffix (the front cut off)
        refuse(token[cut:])


def test_every_non_canonical_trailing_bit_encoding_is_refused(run: Run) -> None:
    """The last character of a base64url segment has unused low bits: same bytes, different token."""
    refusers: list[tuple[str, Callable[[str], TokenError]]] = [
        (run.checkpoint, lambda t: refuse_checkpoint(run.keyring, t)),
        (run.bundle["validation_token"], lambda t: refuse_bundle(run, t)),
    ]
    for token, refuse in refusers:
        parts = token.split(".")
        twins = 0
        for segment in (0, 2):  # the base64url segments (the payload is carried as it is)
            encoded = parts[segment]
            raw = unb64(encoded)
            last = B64URL.index(encoded[-1])
            unused = {2: 4, 3: 2}.get(len(encoded) % 4, 0)  # 2 chars -> 4 spare bits, 3 chars -> 2
            for spare in range(1, 1 << unused):
                twin = encoded[:-1] + B64URL[last ^ spare]
                assert unb64(twin) == raw  # decodes to the very same bytes ...
                refuse(".".join(parts[:segment] + [twin] + parts[segment + 1 :]))  # ... and is still refused
                twins += 1
        assert twins > 0


def test_padding_and_alphabet_re_encodings_are_refused(run: Run) -> None:
    token = run.checkpoint
    header, payload, signature = token.split(".")
    variants = [
        ".".join(p + "=" * (-len(p) % 4) for p in (header, payload, signature)),  # standard padding
        ".".join(p + "==" for p in (header, payload, signature)),
        f"{header}=.{payload}.{signature}",
        token + "=",
        token.replace("-", "+").replace("_", "/") if ("-" in token or "_" in token) else token + "/",
        ".".join(base64.b64encode(unb64(p)).decode().rstrip("=") if p != payload else p for p in token.split(".")),
        f"{header}.{b64(payload.encode())}.{signature}",  # the payload base64url-encoded after all
        token.replace(".", ". ", 1),
        f" {token}",
        f"{token}\n",
        f"{token}\r\n",
        token.replace(".", "\t.", 1),
        token.upper(),
        token.lower(),
        "\ufeff" + token,
        token.replace(".", "\u2024", 1),  # ONE DOT LEADER, a look-alike separator
    ]
    different = [v for v in variants if v != token]  # a token without '-'/'_' has no alphabet variant
    assert len(different) >= len(variants) - 2
    for variant in different:
        refuse_checkpoint(run.keyring, variant)


@pytest.mark.parametrize(
    "value", [None, 42, b"bytes", ["a", "b"], {"token": "x"}, "", ".", "..", "a.b.c", "x" * 70_000]
)
def test_tokens_of_the_wrong_type_or_shape_are_refused(run: Run, value: Any) -> None:
    refuse_checkpoint(run.keyring, value)
    refuse_bundle(run, value)


# --------------------------------------------------------------------------- property-based mutations


@FUZZ
@given(data=st.data())
def test_extensions_are_refused(run: Run, data: st.DataObject) -> None:
    token = data.draw(st.sampled_from([run.checkpoint, run.bundle["validation_token"]]))
    suffix = data.draw(st.text(min_size=1, max_size=64) | st.text(alphabet=B64URL + ".=", min_size=1, max_size=8))
    prefix = data.draw(st.sampled_from(["", "", "Bearer ", "eyJ", "."]))
    mutated = prefix + token + suffix
    if token == run.checkpoint:
        refuse_checkpoint(run.keyring, mutated)
    else:
        refuse_bundle(run, mutated)


@FUZZ
@given(data=st.data())
def test_whitespace_anywhere_is_refused(run: Run, data: st.DataObject) -> None:
    token = run.checkpoint
    position = data.draw(st.integers(0, len(token)))
    space = data.draw(st.sampled_from([" ", "\t", "\n", "\r", "\u00a0", "\u2028", "\u200b"]))
    refuse_checkpoint(run.keyring, token[:position] + space + token[position:])


@FUZZ
@given(data=st.data())
def test_multi_point_mutations_are_refused_by_the_engine(run: Run, data: st.DataObject) -> None:
    """Random character substitutions (1-4 of them) through the engine's own continue and submit."""
    kind = data.draw(st.sampled_from(["checkpoint", "bundle"]))
    token = run.checkpoint if kind == "checkpoint" else run.bundle["validation_token"]
    chars = list(token)
    for _ in range(data.draw(st.integers(1, 4))):
        index = data.draw(st.integers(0, len(chars) - 1))
        chars[index] = data.draw(st.sampled_from([c for c in B64URL + "." if c != chars[index]]))
    mutated = "".join(chars)
    assume(mutated != token)  # two substitutions at one index can restore the original character
    with pytest.raises(TokenError) as info:
        if kind == "checkpoint":
            run.continue_with(mutated)
        else:
            run.submit_with({**run.bundle, "validation_token": mutated})
    assert info.value.code in (CHECKPOINT_CODES if kind == "checkpoint" else BUNDLE_CODES)


@FUZZ
@given(claims=st.dictionaries(st.text(max_size=12), st.integers() | st.text(max_size=20) | st.none(), max_size=6))
def test_arbitrary_claims_signed_with_the_real_key_still_fail_the_closed_shape(
    run: Run, claims: dict[str, Any]
) -> None:
    """Even a correctly MACed token is refused unless its claims have the exact checkpoint shape."""
    token = run.keyring.sign({**claims, "iat": 1}, CHECKPOINT_TYPE)
    assert refuse_checkpoint(run.keyring, token).code is F.CHECKPOINT_INVALID


# --------------------------------------------------------------------------- keys, algorithms, serialisations


def test_retired_and_unknown_key_ids_are_refused(run: Run) -> None:
    token = run.checkpoint
    rotated = run.keyring.rotated()
    assert verify_checkpoint(rotated, token).checkpoint.sequence == 1  # rotation alone keeps old tokens working
    retired = rotated.retiring(run.keyring.signing_key_id)
    error = refuse_checkpoint(retired, token)
    assert error.code is F.CHECKPOINT_KEY_UNKNOWN and "retired" in error.message
    assert refuse_checkpoint(CheckpointKeyring.generate(), token).code is F.CHECKPOINT_KEY_UNKNOWN
    # a token the retired key signs after retirement (a leaked key) is refused too
    leaked = CheckpointKeyring(signing_key_id=run.keyring.signing_key_id, keys=dict(run.keyring.keys))
    fresh = leaked.sign(verify_checkpoint(run.keyring, token).checkpoint.to_claims(), CHECKPOINT_TYPE)
    assert refuse_checkpoint(retired, fresh).code is F.CHECKPOINT_KEY_UNKNOWN
    # bundles follow the same key rules
    with pytest.raises(TokenError) as info:
        verify_bundle(retired, run.bundle, run.issued_route())
    assert info.value.code is F.CHECKPOINT_KEY_UNKNOWN


def _header(token: str) -> dict[str, Any]:
    header: dict[str, Any] = json.loads(unb64(token.split(".")[0]))
    return header


def _reheader(token: str, **changes: Any) -> str:
    header = {**_header(token), **changes}
    header = {k: v for k, v in header.items() if v is not None}
    return with_segment(token, 0, json.dumps(header, separators=(",", ":")).encode())


def test_key_id_games_are_refused(run: Run) -> None:
    token = run.checkpoint
    kid = run.keyring.signing_key_id
    impostor = CheckpointKeyring(signing_key_id=kid, keys={kid: b"k" * 32})  # same key id, another secret
    forged = impostor.sign(verify_checkpoint(run.keyring, token).checkpoint.to_claims(), CHECKPOINT_TYPE)
    assert refuse_checkpoint(run.keyring, forged).code is F.CHECKPOINT_INVALID
    for changes in (
        {"kid": None},
        {"kid": 7},
        {"kid": [kid]},
        {"kid": kid.upper()},
        {"kid": kid + " "},
        {"kid": "../" + kid},
    ):
        refuse_checkpoint(run.keyring, _reheader(token, **changes))


def _other_alg(payload: dict[str, Any], key: bytes, kid: str, alg: str) -> str:
    """The same claims MACed with the server's own key under another algorithm."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PyJWT warns that 32 bytes is short for HS384/HS512
        return jwt.encode(payload, key, algorithm=alg, headers={"kid": kid, "typ": CHECKPOINT_TYPE})


def test_missing_signature_and_other_algorithms_are_refused(run: Run) -> None:
    token = run.checkpoint
    header, claims, signature = token.split(".")
    key = run.keyring.keys[run.keyring.signing_key_id]
    payload = json.loads(claims)
    none_header = _reheader(token, alg="none").split(".")[0]
    forms = [
        f"{header}.{claims}.",  # signature stripped
        f"{header}.{claims}",  # two segments
        f"{none_header}.{claims}.",  # alg none, unsigned
        f"{none_header}.{claims}.{signature}",  # alg none, original signature kept
        _reheader(token, alg="HS512"),
        _reheader(token, alg="hs256"),
        _reheader(token, typ=BUNDLE_TYPE),  # a checkpoint posing as a bundle token's kind
        _reheader(token, typ=None),
        _reheader(token, crit=["exp"]),
        _reheader(token, crit=None),  # b64 false, but not declared critical
        _reheader(token, crit=["b64", "exp"]),
        _reheader(token, b64=True),
        _reheader(token, b64=None, crit=None),  # read as the earlier format: the payload is not base64url
        f"{header}..{signature}",  # the detached form PyJWT writes, payload left out
        *(_other_alg(payload, key, run.keyring.signing_key_id, alg) for alg in ("HS384", "HS512")),
        json.dumps({"protected": header, "payload": claims, "signature": signature}),  # JWS JSON serialisation
        f"{header}.{claims}.{signature}.{signature}",
    ]
    for form in forms:
        refuse_checkpoint(run.keyring, form)
    # the bundle type is pinned the same way: a checkpoint token is never accepted as a bundle token
    refuse_bundle(run, run.route_checkpoint)
    with pytest.raises(TokenError):
        verify_checkpoint(run.keyring, run.bundle["validation_token"])


def test_a_token_issued_in_the_future_is_refused(run: Run) -> None:
    claims = verify_checkpoint(run.keyring, run.checkpoint).checkpoint
    future = issue_checkpoint(run.keyring, replace(claims, issued_at=claims.issued_at + 10 * 365 * 86_400)).token
    assert refuse_checkpoint(run.keyring, future).code is F.CHECKPOINT_INVALID


def test_tokens_signed_with_the_real_key_but_outside_the_token_rules_are_refused(run: Run) -> None:
    """The checks jwt.decode made before verification moved to one C pass: an insider's token still fails them."""
    key = run.keyring.keys[run.keyring.signing_key_id]
    kid = run.keyring.signing_key_id
    claims = json.loads(run.checkpoint.split(".")[1])
    headers = {"kid": kid, "typ": CHECKPOINT_TYPE}

    def signed(payload: Any, **extra: Any) -> str:
        return sign_unencoded(claims_payload(payload), key, **headers, **extra)

    assert verify_checkpoint(run.keyring, signed(claims)).checkpoint  # the control: the same route accepts
    forms = [
        signed(claims, cty="JWT"),  # a header member sign() never writes
        signed({k: v for k, v in claims.items() if k != "iat"}),
        signed({**claims, "iat": str(claims["iat"])}),
        signed({**claims, "iat": True}),
        signed({**claims, "iat": float(claims["iat"])}),
        signed([claims]),  # a payload that is not a JSON object
    ]
    for form in forms:
        assert refuse_checkpoint(run.keyring, form).code is F.CHECKPOINT_INVALID


def test_tokens_of_the_earlier_format_are_refused_with_their_own_message(run: Run) -> None:
    """A base64url payload (what servers wrote before), signed with the real key: refused, saying why."""
    key = run.keyring.keys[run.keyring.signing_key_id]
    kid = run.keyring.signing_key_id
    claims = verify_checkpoint(run.keyring, run.checkpoint).checkpoint.to_claims()
    earlier = jwt.encode(claims, key, algorithm="HS256", headers={"kid": kid, "typ": CHECKPOINT_TYPE})
    error = refuse_checkpoint(run.keyring, earlier)
    assert error.code is F.CHECKPOINT_INVALID and "earlier server version" in error.message
    bundle_claims = {k: v for k, v in run.bundle.items() if k != "validation_token"}
    earlier_bundle = jwt.encode(
        {**bundle_claims, "iat": bundle_claims["issued_at"]},
        key,
        algorithm="HS256",
        headers={"kid": kid, "typ": BUNDLE_TYPE},
    )
    error = refuse_bundle(run, earlier_bundle)
    assert error.code is F.VALIDATION_BUNDLE_INVALID and "earlier server version" in error.message


# --------------------------------------------------------------------------- validly signed, wrong context


def _forge(run: Run, token: str, **changes: Any) -> str:
    """Well-formed claims signed by the server's real keyring, with ``changes`` (an insider's forgery)."""
    return issue_checkpoint(run.keyring, replace(verify_checkpoint(run.keyring, token).checkpoint, **changes)).token


def _engine_refuses(call: Any, code: FailureCode) -> None:
    with pytest.raises(WorkflowProtocolError) as info:
        call()
    assert info.value.code is code, info.value.one_line()


def test_a_checkpoint_for_another_release_is_refused(run: Run) -> None:
    newer = run.engines.releases["1.3.0"]
    for changes in (
        {"release_id": newer.release_id, "manifest_digest": newer.manifest_digest},
        {"manifest_digest": newer.manifest_digest},  # right name, other bytes (a rebuilt release)
        {"release_id": newer.release_id},
    ):  # right bytes, other name
        forged = _forge(run, run.checkpoint, **changes)
        _engine_refuses(lambda t=forged: run.continue_with(t), F.PINNED_RELEASE_UNAVAILABLE)
    # and the genuine 1.2.0 checkpoint is refused by the 1.3.0 release's engine
    _engine_refuses(
        lambda: run.engines.module("1.3.0").continue_workflow(
            {"checkpoint": run.checkpoint, "confirmed_state": run.state}
        ),
        F.PINNED_RELEASE_UNAVAILABLE,
    )


@pytest.mark.parametrize(
    "changes",
    [
        {"workflow_id": "astrology"},
        {"workflow_version": "9.9.9"},
        {"step_id": "nowhere"},
        {"step_id": "SETUP-WORKSPACE"},
    ],
    ids=["other-workflow", "other-workflow-version", "unknown-step", "step-case-variant"],
)
def test_a_checkpoint_for_another_workflow_or_step_is_refused(run: Run, changes: dict[str, Any]) -> None:
    forged = _forge(run, run.checkpoint, **changes)
    _engine_refuses(lambda: run.continue_with(forged), F.CHECKPOINT_INVALID)


def test_a_checkpoint_with_another_confirmed_state_digest_is_refused(run: Run) -> None:
    forged = _forge(run, run.checkpoint, state_digest="sha256:" + "0" * 64)
    _engine_refuses(lambda: run.continue_with(forged), F.CONFIRMED_STATE_MISMATCH)


def test_a_bundle_for_another_step_checkpoint_or_release_is_refused(run: Run) -> None:
    # a bundle issued at desk-research, submitted with the run's setup-workspace checkpoint
    _engine_refuses(lambda: run.submit_with(run.bundle, checkpoint=run.checkpoint), F.VALIDATION_BUNDLE_INVALID)
    claims = {k: v for k, v in run.bundle.items() if k not in ("key_id", "validation_token")}
    newer = run.engines.releases["1.3.0"]
    for changes in (
        {"step_id": "experiment"},
        {"checkpoint_digest": "sha256:" + "1" * 64},
        {
            "manifest_digest": newer.manifest_digest,
            "release": {"id": newer.release_id, "manifest_digest": newer.manifest_digest},
        },
    ):
        forged_claims = {**claims, **changes}
        token = run.keyring.sign({**forged_claims, "iat": forged_claims["issued_at"]}, BUNDLE_TYPE)
        forged = {**forged_claims, "key_id": run.keyring.signing_key_id, "validation_token": token}
        _engine_refuses(lambda b=forged: run.submit_with(b), F.VALIDATION_BUNDLE_INVALID)
    # the signed token unchanged but a visible field edited (say, a validator marked as already passed)
    edited = {**run.bundle, "validators": [dict(v, report_required=False) for v in run.bundle["validators"]]}
    _engine_refuses(lambda: run.submit_with(edited), F.VALIDATION_BUNDLE_INVALID)


def _opencode_binding(run: Run) -> HostBinding:
    bound = verify_checkpoint(run.keyring, run.route_checkpoint).checkpoint.host
    return replace(bound, harness="opencode")


def test_a_checkpoint_bound_to_another_host_is_refused_at_prepare(run: Run) -> None:
    """A checkpoint bound to another harness: this host's prepare gets host_mismatch, no bundle."""
    forged = _forge(run, run.route_checkpoint, host=_opencode_binding(run))
    result = run.engine.prepare_step_validation(
        {
            "checkpoint": forged,
            "confirmed_state": run.state,
            "host": run.kit.host(),
            "artifacts": run.kit.write_outputs(run.route_step, examples("1.2.0")),
        }
    )
    assert result["status"] == "deterministic_validation_failed" and result["validation_bundle"] is None
    assert "host_mismatch" in {f["code"] for f in result["failures"]}


def test_reports_from_another_host_are_refused_at_submit(run: Run) -> None:
    """The run is bound to opencode; reports validated by claude-code are report_host_mismatch."""
    opencode = run.kit.with_host(harness="opencode", adapter_id="opencode")
    forged = _forge(run, run.route_checkpoint, host=_opencode_binding(run))
    ready = run.engine.prepare_step_validation(
        {
            "checkpoint": forged,
            "confirmed_state": run.state,
            "host": opencode.host(),
            "artifacts": run.kit.write_outputs(run.route_step, examples("1.2.0")),
        }
    )
    assert ready["status"] == "ready_for_semantic_validation", ready["failures"]
    claude_reports = run.kit.reports(ready)  # validated_by claude-code
    _engine_refuses(
        lambda: run.engine.submit_step_validation(
            {
                "checkpoint": forged,
                "confirmed_state": run.state,
                "validation_bundle": ready["validation_bundle"],
                "reports": claude_reports,
            }
        ),
        F.REPORT_HOST_MISMATCH,
    )
    # the same reports from the bound host are accepted: the refusal was the binding, nothing else
    accepted = run.engine.submit_step_validation(
        {
            "checkpoint": forged,
            "confirmed_state": run.state,
            "validation_bundle": ready["validation_bundle"],
            "reports": opencode.reports(ready),
        }
    )
    assert accepted["status"] in ("advanced", "completed")


# --------------------------------------------------------------------------- constant-time comparison


def test_hmac_comparison_is_constant_time_by_construction() -> None:
    """Structural, not timing: PyJWT's HS256 verify compares MACs with ``hmac.compare_digest`` only."""
    source = inspect.getsource(jwt.algorithms.HMACAlgorithm.verify)
    assert "hmac.compare_digest(" in source
    assert "==" not in source.replace("hmac.compare_digest(", "")
    assert vars(jwt.algorithms)["hmac"] is hmac  # the stdlib module, not a shadow
    # and our verifier never compares signatures itself: it hands the MAC check to PyJWT's HS256 algorithm
    from rimthan_workflow_registry.run import token_mac, tokens

    assert type(token_mac._hs256()) is jwt.algorithms.HMACAlgorithm  # PyJWT's HS256, built on first use
    assert token_mac._hs256().hash_alg is jwt.algorithms.HMACAlgorithm.SHA256
    verify_source = "".join(
        inspect.getsource(part)
        for part in (tokens.CheckpointKeyring.verify, tokens.CheckpointKeyring.authenticate, token_mac.AdmittedToken)
    )
    assert "_hs256().verify(" in verify_source
    assert "compare_digest" not in verify_source
    assert "signature ==" not in verify_source and "== segments.signature" not in verify_source
    module_source = inspect.getsource(tokens) + inspect.getsource(token_mac)
    assert "import hmac" not in module_source and "hashlib" not in module_source


def test_verification_reaches_compare_digest_with_the_token_mac(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    """At run time, verifying a real token calls ``hmac.compare_digest`` on the token's own MAC bytes."""
    seen: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: Any, b: Any) -> bool:
        seen.append((bytes(a), bytes(b)))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    ISSUED.clear()  # as on a replica that did not issue it (the issuer recognises its own token: no MAC to compare)
    verify_checkpoint(run.keyring, run.checkpoint)
    mac = unb64(run.checkpoint.split(".")[2])
    assert (mac, mac) in seen
    index = len(run.checkpoint) - 10  # inside the MAC segment, away from its spare trailing bits
    other = B64URL[(B64URL.index(run.checkpoint[index]) + 1) % 64]
    bad = run.checkpoint[:index] + other + run.checkpoint[index + 1 :]
    seen.clear()
    with pytest.raises(TokenError):
        verify_checkpoint(run.keyring, bad)
    assert seen and all(a != b for a, b in seen)  # the forged MAC was compared, and compared unequal


@pytest.mark.parametrize("token_type", [CHECKPOINT_TYPE, BUNDLE_TYPE])
def test_sign_payload_writes_exactly_what_pyjwt_encodes_before_and_after_rotation(token_type: str) -> None:
    """The header written once per key id and the MAC over ``header.payload`` equal PyJWT's own ``encode``."""
    keyring = CheckpointKeyring.generate()
    for ring in (keyring, keyring.rotated()):
        kid = ring.signing_key_id
        for claims in ({"iat": 1}, {"iat": 2, "a": "x.y", "b": [1, {"c": "\u00e9"}]}):
            payload = claims_payload(claims)
            expected = sign_unencoded(payload, ring.keys[kid], kid=kid, typ=token_type)
            assert ring.sign_payload(payload, token_type) == expected
