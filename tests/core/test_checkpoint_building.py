"""A checkpoint built from verified claims or as a successor is the one the generated ``__init__`` builds.

``Checkpoint._of_fields`` fills a new checkpoint's dictionary at once (and
runs ``__post_init__``) instead of the frozen dataclass's ``__init__``, which
sets each field through ``object.__setattr__``: every issue, every successor
and every full verification builds one. The checkpoint must be the same one:
equal, the same attributes in the same order, each of the same type; a change
naming no field is refused as before, and a subclass keeps its own fields.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rimthan_workflow_registry.run.checkpoints import (
    ISSUED,
    ArtifactReceipt,
    Checkpoint,
    HostBinding,
    ValidatorReceipt,
    issue_checkpoint,
    verify_checkpoint,
)
from rimthan_workflow_registry.run.receipts import ArtifactTable, ValidatorTable
from rimthan_workflow_registry.run.tokens import CheckpointKeyring

DIGEST = "sha256:" + "ab" * 32
HEX = "cd" * 32
_NAMES = st.text(alphabet="abcdefghij-", min_size=1, max_size=12)
_ARTIFACTS = st.dictionaries(_NAMES, st.builds(ArtifactReceipt, st.just(HEX), st.integers(0, 10**9)), max_size=5)
_VALIDATORS = st.dictionaries(_NAMES, st.just(ValidatorReceipt("pass", DIGEST)), max_size=5)


def _checkpoint(artifacts: dict[str, ArtifactReceipt], validators: dict[str, ValidatorReceipt]) -> Checkpoint:
    host = HostBinding.of("claude-code", "1.0.0", ["fs.read", "fs.write"], ["subagent"])
    return Checkpoint(
        4, "wf", "1.2.0", "rel", DIGEST, "draft", DIGEST, DIGEST, ArtifactTable.of(artifacts),
        ValidatorTable.of(validators), host=host, issued_at=17,
    )  # fmt: skip


def _same(built: Checkpoint, expected: Checkpoint) -> None:
    """Equal, and the same attributes in the same order, each of the same type."""
    assert type(built) is type(expected)
    assert built == expected
    assert list(vars(built)) == list(vars(expected))
    assert [type(v) for v in vars(built).values()] == [type(v) for v in vars(expected).values()]


@settings(max_examples=60, deadline=None)
@given(_ARTIFACTS, _VALIDATORS, st.booleans())
def test_a_checkpoint_of_claims_is_the_one_init_builds(
    artifacts: dict[str, ArtifactReceipt], validators: dict[str, ValidatorReceipt], findings: bool
) -> None:
    cp = dataclasses.replace(_checkpoint(artifacts, validators), failed_findings=2 if findings else None)
    built = Checkpoint._of_claims(cp.to_claims())
    _same(built, Checkpoint(**{f.name: getattr(built, f.name) for f in dataclasses.fields(Checkpoint)}))
    _same(built, cp)


@settings(max_examples=60, deadline=None)
@given(_ARTIFACTS, _VALIDATORS, st.sampled_from(["draft", "review"]))
def test_a_successor_is_the_one_replace_builds(
    artifacts: dict[str, ArtifactReceipt], validators: dict[str, ValidatorReceipt], step: str
) -> None:
    cp = dataclasses.replace(_checkpoint({}, {}), failed_findings=3)
    changes: dict[str, Any] = {"step_id": step, "artifacts": artifacts, "validators": validators}
    built = cp.successor("a.b.c", issued_at=99, **changes)
    expected = dataclasses.replace(
        cp, sequence=5, parent_digest=built.parent_digest, issued_at=99, failed_findings=None, **changes
    )
    _same(built, expected)
    assert built.failed_findings is None and built.sequence == 5
    kept: dict[str, Any] = {"step_id": "draft", "artifacts": cp.artifacts, "validators": cp.validators}
    _same(
        cp.successor("a.b.c", issued_at=99, failed_findings=1), dataclasses.replace(expected, **kept, failed_findings=1)
    )


def test_a_change_naming_no_field_is_refused_as_before() -> None:
    with pytest.raises(TypeError):
        _checkpoint({}, {}).successor("a.b.c", issued_at=1, not_a_field=1)


def test_a_subclass_keeps_its_own_fields() -> None:
    @dataclasses.dataclass(frozen=True)
    class Noted(Checkpoint):
        note: str = ""

    cp = Noted(**{f.name: getattr(_checkpoint({}, {}), f.name) for f in dataclasses.fields(Checkpoint)}, note="kept")
    nxt = cp.successor("a.b.c", issued_at=1, step_id="review")
    assert type(nxt) is Noted and nxt.note == "kept" and nxt.step_id == "review" and nxt.sequence == 5
    assert type(Noted._of_claims(cp.to_claims())) is Noted


def test_issuing_and_verifying_build_no_checkpoint_through_init(monkeypatch: pytest.MonkeyPatch) -> None:
    """A real keyring issues a successor, then verifies the token the full way (MAC, parse, closed shape)."""
    keyring = CheckpointKeyring.generate()
    first = issue_checkpoint(keyring, _checkpoint({"draft": ArtifactReceipt(HEX, 12)}, {}))
    generated = Checkpoint.__init__
    built: list[Checkpoint] = []

    def counted(self: Checkpoint, *args: Any, **kwargs: Any) -> None:
        built.append(self)
        generated(self, *args, **kwargs)

    monkeypatch.setattr(Checkpoint, "__init__", counted)
    nxt = issue_checkpoint(keyring, first.checkpoint.successor(first, issued_at=18, step_id="review"))
    ISSUED.clear()  # the full path, as for a token another replica issued
    verified = verify_checkpoint(CheckpointKeyring(keyring.signing_key_id, dict(keyring.keys)), nxt.token)
    assert verified.checkpoint == nxt.checkpoint and verified.checkpoint.step_id == "review"
    assert built == []
