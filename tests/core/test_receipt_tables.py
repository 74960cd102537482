"""Receipts kept in the token's columns: no per-receipt Python work, and a closed claim shape.

A checkpoint carries every receipt of its run. These tests pin what keeps a
call late in a long run as cheap as one early on, without giving up a check:

* verifying, resuming and re-issuing a checkpoint runs the same Python code
  (the same function calls, counted by the profiler) with 64 receipts or with
  6,000: everything that scales with the receipts runs in C;
* the fast claim check never accepts what the definition (jsonschema plus
  the receipt shapes) refuses, for near misses in every claim (hypothesis),
  and accepts every checkpoint a real run issues;
* receipt tables read, merge and drop receipts without changing the
  verified checkpoint they came from, and hold what a dictionary of the same
  receipts holds, whatever the changes (hypothesis);
* a token verified once is verified again only with another keyring.
"""

from __future__ import annotations

import cProfile
import gc
import json
import pstats
import re
import threading
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rimthan_workflow_registry.errors import FailureCode, TokenError
from rimthan_workflow_registry.release.catalogue import OutputDeclaration, StepDefinition
from rimthan_workflow_registry.run import (
    ArtifactReceipt,
    Checkpoint,
    HostBinding,
    ValidatorReceipt,
    issue_checkpoint,
    receipts_on_entry,
    verify_checkpoint,
)
from rimthan_workflow_registry.run.checkpoint_claims import (
    _CLAIMS_TEXT,
    _TEXT,
    _TEXT_BY_UNITS,
    _claims_text_pattern,
    accepted_fast,
    definition_problem,
)
from rimthan_workflow_registry.run.checkpoints import _COMPOSED_FROM as COMPOSED_FROM
from rimthan_workflow_registry.run.checkpoints import _exact_types, _issued_accepted
from rimthan_workflow_registry.run.key_file import KEY_BYTES
from rimthan_workflow_registry.run.receipts import ArtifactTable, ValidatorTable
from rimthan_workflow_registry.run.token_wire import claims_payload, peek_claims
from rimthan_workflow_registry.run.tokens import CHECKPOINT_TYPE, CheckpointKeyring
from support.engines import TickingClock, drive, make_engines

HEX = "0123456789abcdef"
DIGEST = "sha256:" + "1" * 64
NOTE, CHECK = "note-9999", "check-9999@1.0.0"
NEXT_STEP = StepDefinition(
    "step-9999",
    "t",
    "i.md",
    None,
    (),
    None,
    (OutputDeclaration(NOTE, "notes/n.md", "text/markdown", 1024, None, "create"),),
    (CHECK,),
    (),
    (),
    None,
    {},
)


def _checkpoint(receipts: int, **changes: Any) -> Checkpoint:
    fields: dict[str, Any] = {
        "sequence": 2 * receipts + 1,
        "workflow_id": "long",
        "workflow_version": "1.0.0",
        "release_id": "bench@1.0.0",
        "manifest_digest": "sha256:" + "0" * 64,
        "step_id": f"step-{receipts + 1:04d}",
        "state_digest": DIGEST,
        "parent_digest": DIGEST,
        "artifacts": {f"note-{i:04d}": ArtifactReceipt(f"{i:064x}", 100 + i) for i in range(receipts)},
        "validators": {f"check-{i:04d}@1.0.0": ValidatorReceipt("pass", f"sha256:{i:064x}") for i in range(receipts)},
        "host": HostBinding.of("claude-code", "1.0.0", ["read", "write"], ["subagents"]),
        "issued_at": 1_700_000_000,
    }
    return Checkpoint(**{**fields, **changes})


def _forget_verified() -> None:
    """Clear the one-slot memo and the issued checkpoints, so the next verify does the whole work (as on a
    replica that did not issue the token; the issuing process's cache answers in constant Python work)."""
    from rimthan_workflow_registry.run import checkpoints

    checkpoints._last_verified.entry = None
    checkpoints.ISSUED.clear()


_FIXED_KEY_ID = "ck-0123456789abcdef"


def _python_calls(receipts: int, *, issued_here: bool = False) -> dict[str, int]:
    """Python-level calls per function of: verify, resume a step, issue its successor, enter the next step.

    A fixed key, so the token bytes, and with them the paths inside the
    standard library's JSON and codec code, are the same in every run.
    ``issued_here``: the token is in this process's cache of issued
    checkpoints (its only entry), as on the server that issued it.
    """
    from rimthan_workflow_registry.run import checkpoints

    keyring = CheckpointKeyring(signing_key_id=_FIXED_KEY_ID, keys={_FIXED_KEY_ID: b"\x5a" * KEY_BYTES})
    checkpoints.ISSUED.clear()
    token = issue_checkpoint(keyring, _checkpoint(receipts)).token
    if issued_here:
        checkpoints._last_verified.entry = None
    else:
        _forget_verified()
    gc.collect()
    gc.disable()  # a collection mid-profile would run gc callbacks (hypothesis installs one) into the counts
    try:
        profile = cProfile.Profile()
        profile.enable()
        issued = verify_checkpoint(keyring, token)
        cp = issued.checkpoint
        _ = (NOTE in cp.artifacts, cp.validators.get(CHECK), cp.artifacts.get("note-0001"))
        artifacts = cp.artifacts.merged({NOTE: ArtifactReceipt("a" * 64, 7)})
        validators = cp.validators.without([CHECK]).merged({CHECK: ValidatorReceipt("pass", DIGEST)})
        successor = cp.successor(token, issued_at=1_700_000_001, artifacts=artifacts, validators=validators)
        issue_checkpoint(keyring, successor)
        receipts_on_entry(NEXT_STEP, artifacts, validators)
        profile.disable()
    finally:
        gc.enable()
    counts: dict[str, int] = {}
    for (path, line, name), row in pstats.Stats(profile).stats.items():  # type: ignore[attr-defined]
        counts[f"{path}:{line}({name})"] = row[1]
    return counts


@pytest.mark.parametrize("issued_here", [False, True], ids=["issued-elsewhere", "issued-here"])
def test_a_checkpoint_with_thousands_of_receipts_runs_the_same_python_code_as_one_with_dozens(
    issued_here: bool,
) -> None:
    _python_calls(3)  # first use: PyJWT's HS256 is built once per process (lazily), outside the comparison
    # From _COMPOSED_FROM receipts on, a payload is written table by table (checkpoints._payload): a fixed
    # number of Python calls, taken from there on, which these two sizes both are.
    small, large = _python_calls(COMPOSED_FROM, issued_here=issued_here), _python_calls(3_000, issued_here=issued_here)
    assert small == large


def test_verifying_a_checkpoint_this_process_issued_does_not_parse_its_payload_again() -> None:
    _python_calls(3)
    elsewhere, here = _python_calls(3_000), _python_calls(3_000, issued_here=True)
    loads = next(name for name in elsewhere if name.endswith("(loads)"))  # json.loads
    checks = next(name for name in elsewhere if name.endswith("(claims_problem)"))
    assert here.get(loads, 0) == elsewhere[loads] - 1 and here.get(checks, 0) == elsewhere[checks] - 1


def test_verify_and_reissue_keep_the_claims_and_the_token_bytes() -> None:
    keyring = CheckpointKeyring.generate()
    checkpoint = _checkpoint(40)
    token = issue_checkpoint(keyring, checkpoint).token
    claims = peek_claims(token)
    assert claims is not None
    artifacts, validators = claims["artifacts"], claims["validators"]
    assert artifacts["names"] == sorted(artifacts["names"]) and artifacts["names"][3] == "note-0003"
    assert artifacts["sha256"][3 * 64 : 4 * 64] == f"{3:064x}" and artifacts["sizes"][3] == 103
    assert validators["names"][3] == "check-0003@1.0.0" and validators["input_sha256"][3 * 64 : 4 * 64] == f"{3:064x}"
    _forget_verified()
    verified = verify_checkpoint(keyring, token).checkpoint
    assert verified == checkpoint
    assert dict(verified.artifacts) == dict(checkpoint.artifacts)
    assert issue_checkpoint(keyring, verified).token == token


def test_tables_change_by_copy_never_the_verified_checkpoint() -> None:
    keyring = CheckpointKeyring.generate()
    token = issue_checkpoint(keyring, _checkpoint(5)).token
    _forget_verified()
    cp = verify_checkpoint(keyring, token).checkpoint
    before = (cp.artifacts.claims(), cp.validators.claims())
    merged = cp.artifacts.merged({"note-0000": ArtifactReceipt("f" * 64, 1), "new": ArtifactReceipt("e" * 64, 2)})
    dropped = cp.validators.without(["check-0001@1.0.0", "absent@1.0.0"])
    assert merged["note-0000"] == ArtifactReceipt("f" * 64, 1) and merged["new"].size == 2 and len(merged) == 6
    assert "check-0001@1.0.0" not in dropped and len(dropped) == 4
    assert dropped["check-0002@1.0.0"] == ValidatorReceipt("pass", f"sha256:{2:064x}")
    assert (cp.artifacts.claims(), cp.validators.claims()) == before
    assert verify_checkpoint(keyring, token).checkpoint.artifacts == cp.artifacts
    assert ArtifactTable.of(dict(merged)) == merged and ValidatorTable.of(dict(dropped)) == dropped
    assert cp.artifacts.get("absent") is None and "note-0004" in cp.artifacts


def test_a_verified_token_is_verified_again_under_another_keyring() -> None:
    keyring = CheckpointKeyring.generate()
    token = issue_checkpoint(keyring, _checkpoint(2)).token
    first = verify_checkpoint(keyring, token)
    assert verify_checkpoint(keyring, token) is first
    rotated = keyring.rotated()
    assert verify_checkpoint(rotated, token) == first  # the old key still verifies after a rotation
    retired = rotated.retiring(keyring.signing_key_id)
    with pytest.raises(TokenError) as err:
        verify_checkpoint(retired, token)
    assert err.value.code is FailureCode.CHECKPOINT_KEY_UNKNOWN
    with pytest.raises(TokenError) as err:
        verify_checkpoint(CheckpointKeyring.generate(), token)
    assert err.value.code is FailureCode.CHECKPOINT_KEY_UNKNOWN
    tampered = token[:-2] + ("A" if token[-2] != "A" else "B") + token[-1]
    with pytest.raises(TokenError):
        verify_checkpoint(keyring, tampered)


def test_each_thread_remembers_its_own_last_verified_token() -> None:
    keyring = CheckpointKeyring.generate()
    mine, theirs = (issue_checkpoint(keyring, _checkpoint(n)).token for n in (2, 3))
    first = verify_checkpoint(keyring, mine)
    other = threading.Thread(target=verify_checkpoint, args=(keyring, theirs))
    other.start()
    other.join()
    assert verify_checkpoint(keyring, mine) is first


def test_a_validly_signed_token_of_the_wrong_shape_is_refused_after_one_of_the_right_shape() -> None:
    keyring = CheckpointKeyring.generate()
    good = _checkpoint(3).to_claims()
    verify_checkpoint(keyring, keyring.sign(good, CHECKPOINT_TYPE))
    bad = {**good, "artifacts": {**good["artifacts"], "sizes": [100, -1, 102]}}
    with pytest.raises(TokenError) as err:
        verify_checkpoint(keyring, keyring.sign(bad, CHECKPOINT_TYPE))
    assert err.value.code is FailureCode.CHECKPOINT_INVALID and "note-0001" in err.value.message


# --------------------------------------------------------------------------- the fast check against the definition

_BASE = _checkpoint(2).to_claims()
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-2, max_value=2**40),
    st.floats(allow_nan=True),
    st.text(max_size=3),
    st.just(""),
    st.just("x" * 129),
    st.just("\U0001f600" * 65),
    st.just(DIGEST + "\n"),
    st.just(DIGEST.upper()),
    st.lists(st.text(max_size=2), max_size=3),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
)


def _mostly(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Valid values 19 times as often as near misses: a generated claim set has about one thing wrong."""
    return st.sampled_from(range(20)).flatmap(lambda i: scalars if i == 19 else valid)


texts = _mostly(st.sampled_from(["a", "x" * 128, "é" * 128, 'h"\\\n\u0000', "\U0001f600" * 64, "1.0.0-rc.1"]))
naturals = _mostly(st.integers(min_value=0, max_value=2**40))
digests = _mostly(st.sampled_from([DIGEST, "sha256:" + "a" * 64]))
hex64 = _mostly(st.text(alphabet=HEX, min_size=64, max_size=64)) | st.sampled_from(["A" * 64, "0" * 63, "0" * 63 + "g"])


def _artifact_columns(table: dict[str, Any]) -> dict[str, Any]:
    names = sorted(table)
    return {
        "names": names,
        "sha256": "".join(str(table[n][0]) for n in names),
        "sizes": [table[n][1] for n in names],
    }


def _validator_columns(table: dict[str, Any]) -> dict[str, Any]:
    names = sorted(table)
    return {"names": names, "input_sha256": "".join(str(table[n][1]) for n in names)}


artifact_tables = st.dictionaries(st.text(max_size=3), st.tuples(hex64, naturals), max_size=4).map(_artifact_columns)
validator_tables = st.dictionaries(st.text(max_size=3), st.tuples(st.just("pass"), hex64), max_size=4).map(
    _validator_columns
)
capabilities = _mostly(st.lists(texts, max_size=3))
claims_strategy = st.fixed_dictionaries(
    {
        "seq": _mostly(st.integers(min_value=1, max_value=2**40)),
        "workflow": _mostly(st.fixed_dictionaries({"id": texts, "version": texts})),
        "release": _mostly(st.fixed_dictionaries({"id": texts, "manifest_digest": digests})),
        "step": texts,
        "state": digests,
        "parent": st.none() | digests,
        "artifacts": _mostly(artifact_tables),
        "validators": _mostly(validator_tables),
        "host": _mostly(
            st.fixed_dictionaries(
                {
                    "harness": texts,
                    "adapter_version": texts,
                    "capabilities": capabilities,
                    "validator_capabilities": capabilities,
                }
            )
        ),
        "iat": naturals,
    },
    optional={"findings": naturals},
)
# now and then one member too many (at the top or in an object) or one required member missing
_added = st.tuples(st.sampled_from(["", "host", "workflow", "release"]), st.just("extra"))
_removed = st.tuples(st.sampled_from(sorted(_BASE)), st.just("-"))
edits = st.sampled_from(range(10)).flatmap(lambda i: _added if i == 8 else _removed if i == 9 else st.just(("", "")))


@settings(max_examples=1000, deadline=None)
@given(claims_strategy, edits)
def test_the_fast_claim_check_never_accepts_what_the_definition_refuses(
    claims: dict[str, Any], edit: tuple[str, str]
) -> None:
    claims = _edited(claims, edit)
    if accepted_fast(claims):
        assert definition_problem(claims) is None


def _edited(claims: dict[str, Any], edit: tuple[str, str]) -> dict[str, Any]:
    where, what = edit
    if what == "-":
        claims.pop(where)
    elif what == "extra":
        target = claims if not where else claims[where]
        if isinstance(target, dict):
            target["extra"] = 1
    return claims


_TO_CLAIMS = _checkpoint(0, failed_findings=1).to_claims()


def _in_order(value: Any, model: Any) -> Any:
    """``value`` with the keys of each object ``model`` has in ``model``'s order (``to_claims``'), then the rest."""
    if type(value) is not dict or type(model) is not dict:
        return value
    ordered = {k: _in_order(value[k], model[k]) for k in model if k in value}
    return {**ordered, **{k: item for k, item in value.items() if k not in model}}


@settings(max_examples=1000, deadline=None)
@given(claims_strategy, edits, st.booleans())
def test_the_check_of_an_issued_payload_answers_as_the_fast_check(
    claims: dict[str, Any], edit: tuple[str, str], reordered: bool
) -> None:
    """Read from the claims' payload (``to_claims`` order, periods escaped) or re-encoded sorted: one verdict.

    Claims in another key order are not read from the payload (the sorted check answers for them).
    """
    claims = _edited(claims, edit)
    claims = _in_order(claims, _TO_CLAIMS)
    if reordered:
        claims = dict(reversed(claims.items()))
    try:
        payload = claims_payload(claims)
    except (TypeError, ValueError):
        return
    assert _issued_accepted(claims, payload) == (accepted_fast(claims) and _exact_types(claims) and not reordered)


@pytest.mark.parametrize("receipts", [0, 3, COMPOSED_FROM + 8])
def test_a_checkpoint_is_issued_without_re_encoding_its_claims(receipts: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issuing reads the claims' shape from the payload just written, whatever the receipt names hold."""
    from rimthan_workflow_registry.run import checkpoints

    awkward = {',"host":{': ArtifactReceipt("a" * 64, 1), '}},"iat":1}': ArtifactReceipt("b" * 64, 2)}
    checkpoint = _checkpoint(receipts, failed_findings=receipts or None)
    checkpoint = replace(checkpoint, artifacts=ArtifactTable.of({**dict(checkpoint.artifacts), **awkward}))
    keyring = CheckpointKeyring.generate()
    monkeypatch.setattr(checkpoints, "accepted_fast", None)  # the sorted re-encode is never reached
    issued = issue_checkpoint(keyring, checkpoint)
    assert issued.checkpoint == checkpoint and checkpoints.ISSUED.recall(issued.token, keyring.signing_key) is issued
    monkeypatch.undo()
    _forget_verified()
    assert verify_checkpoint(keyring, issued.token).checkpoint == checkpoint


_BY_UNITS = _claims_text_pattern(_TEXT_BY_UNITS)
_json_strings = st.text(min_size=0, max_size=130).flatmap(
    lambda t: st.sampled_from([json.dumps(t), json.dumps(t, ensure_ascii=False), f'"{t}"', t])
)


@settings(max_examples=1000, deadline=None)
@given(_json_strings, st.sampled_from(["a" * 127, 'a"', "\\u00e9", "\\"]))
def test_the_string_pattern_matches_what_one_of_units_matches(text: str, tail: str) -> None:
    for candidate in (text, text[:-1] + tail + '"'):
        assert bool(re.fullmatch(_TEXT, candidate)) == bool(re.fullmatch(_TEXT_BY_UNITS, candidate)), candidate


@settings(max_examples=500, deadline=None)
@given(claims_strategy)
def test_the_claims_pattern_matches_what_the_pattern_of_units_matches(claims: dict[str, Any]) -> None:
    try:
        text = json.dumps({**claims, "artifacts": {}, "validators": {}}, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        return
    assert bool(_CLAIMS_TEXT.fullmatch(text)) == bool(_BY_UNITS.fullmatch(text)), text


def test_every_checkpoint_a_real_run_issues_passes_the_fast_check(tmp_path: Any) -> None:
    engines = make_engines(tmp_path, TickingClock())
    tokens = drive(
        engines, "1.2.0", "desk-research", name="fast-check", fail_once=frozenset({"evidence-auditor@1.0.0"})
    ).checkpoints
    assert len(tokens) > 5
    for token in tokens:
        claims = peek_claims(token)
        assert claims is not None and accepted_fast(claims), claims
    edge = _checkpoint(
        1,
        step_id="é" * 128,
        host=HostBinding.of('h"\\', "1.0.0-rc.1+b", ["\U0001f600" * 64], []),
        failed_findings=0,
        parent_digest=None,
    ).to_claims()
    assert accepted_fast(edge) and definition_problem(edge) is None


# --------------------------------------------------------------------------- changed by slicing


_names = st.sampled_from(["a", "note-0001", "note-0002", "check-0001@1.0.0", "z/9", 'q"', "é", "x y", "artifacts"])
_receipts = st.tuples(st.text(alphabet=HEX, min_size=64, max_size=64), st.integers(0, 2**40)).map(
    lambda e: ArtifactReceipt(*e)
)
_changes = st.lists(
    st.one_of(
        st.dictionaries(_names, _receipts, max_size=12).map(lambda d: ("merged", d)),
        st.lists(_names, max_size=3).map(lambda n: ("without", n)),
    ),
    max_size=5,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_names, _receipts, max_size=6), _changes)
def test_a_changed_table_holds_what_a_dictionary_of_its_receipts_holds(
    table: dict[str, ArtifactReceipt], changes: list[Any]
) -> None:
    """Sliced (a few changes) or rebuilt (many): the columns are always those of the same receipts, sorted."""
    current, model = ArtifactTable.of(table), dict(table)
    for op, argument in changes:
        if op == "merged":
            current, model = current.merged(argument), {**model, **argument}
        else:
            current, model = current.without(argument), {k: v for k, v in model.items() if k not in argument}
        assert current == ArtifactTable.of(model) and dict(current) == model and list(current) == sorted(model)
        assert all(name in current for name in model) and "absent" not in current


def test_a_re_issued_checkpoint_is_the_token_its_claims_sign_to() -> None:
    """Verified, changed by a step, re-issued: the bytes ``sign`` writes for the claims the checkpoint holds."""
    keyring = CheckpointKeyring.generate()
    token = issue_checkpoint(keyring, _checkpoint(30)).token
    _forget_verified()
    cp = verify_checkpoint(keyring, token).checkpoint
    artifacts = cp.artifacts.merged({NOTE: ArtifactReceipt("a" * 64, 7), "note-0003": ArtifactReceipt("b" * 64, 1)})
    validators = cp.validators.without(["check-0001@1.0.0"]).merged({CHECK: ValidatorReceipt("pass", DIGEST)})
    entered = receipts_on_entry(NEXT_STEP, artifacts, validators)
    successor = cp.successor(token, issued_at=1_700_000_001, **entered)
    issued = issue_checkpoint(keyring, successor)
    assert issued.token == keyring.sign(successor.to_claims(), CHECKPOINT_TYPE)
    _forget_verified()
    assert verify_checkpoint(keyring, issued.token).checkpoint == successor


def test_a_table_refuses_a_receipt_its_columns_cannot_hold() -> None:
    with pytest.raises(ValueError):
        ArtifactTable.of({"a": ArtifactReceipt("a" * 63, 1)})
    with pytest.raises(ValueError):
        ValidatorTable.of({"v@1": ValidatorReceipt("fail", DIGEST)})
