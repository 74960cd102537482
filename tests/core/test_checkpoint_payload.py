"""A long run's checkpoint payload, written table by table, is the payload ``json.dumps`` writes.

From ``_COMPOSED_FROM`` receipts on, a checkpoint's payload is written member
by member, the receipt tables writing their own columns
(``ArtifactTable.claims_json``), because the encoder's scan of every digest
character was most of a late call's token work (P4). A token's bytes are what
its MAC covers and what another replica parses, so they must be exactly the
bytes of ``claims_payload``. Columns JSON writes as they are (hex digests,
printable names) and columns it escapes (quotes, backslashes, control and
non-ASCII characters, periods) are both compared, on random tables
(hypothesis) and on issued tokens.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from rimthan_workflow_registry.run import ArtifactReceipt, Checkpoint, HostBinding, ValidatorReceipt, issue_checkpoint
from rimthan_workflow_registry.run.checkpoints import _COMPOSED_FROM
from rimthan_workflow_registry.run.receipts import ArtifactTable, ValidatorTable
from rimthan_workflow_registry.run.token_wire import claim_json, claims_payload
from rimthan_workflow_registry.run.tokens import CheckpointKeyring

# Characters JSON writes as they are; ASCII ones it escapes (or a payload escapes: the period); non-ASCII ones.
PLAIN = "0123456789abcdefXYZ-_@/ "
ASCII_AWKWARD = '."\\\x00\x1f\x7f'
ALPHABETS = {
    "hex": st.sampled_from("0123456789abcdef"),
    "plain": st.sampled_from(PLAIN),
    "ascii": st.sampled_from(PLAIN + ASCII_AWKWARD),
    "any": st.sampled_from(PLAIN + ASCII_AWKWARD + "é€\U0001f600"),
}
KINDS = st.sampled_from(sorted(ALPHABETS))


@st.composite
def tables(draw: st.DrawFn) -> ArtifactTable | ValidatorTable:
    names_alphabet, digests_alphabet = ALPHABETS[draw(KINDS)], ALPHABETS[draw(KINDS)]
    names = sorted(draw(st.lists(st.text(names_alphabet, min_size=1, max_size=12), max_size=40, unique=True)))
    digests = draw(st.text(digests_alphabet, min_size=64 * len(names), max_size=64 * len(names)))
    if draw(st.booleans()):
        return ValidatorTable(names, digests, [0] * len(names))
    sizes = draw(st.lists(st.integers(0, 2**40), min_size=len(names), max_size=len(names)))
    return ArtifactTable(names, digests, sizes)


@settings(max_examples=400, deadline=None)
@given(tables())
def test_a_table_writes_its_claim_form_as_json_dumps_does(table: ArtifactTable | ValidatorTable) -> None:
    assert table.claims_json() == claim_json(table.claims())


def _checkpoint(artifacts: dict[str, ArtifactReceipt], validators: dict[str, ValidatorReceipt]) -> Checkpoint:
    return Checkpoint(
        sequence=len(artifacts) + 1,
        workflow_id="long.run",
        workflow_version="1.0.0",
        release_id="bench@1.0.0",
        manifest_digest="sha256:" + "0" * 64,
        step_id="step-0001",
        state_digest="sha256:" + "1" * 64,
        parent_digest=None,
        artifacts=ArtifactTable.of(artifacts),
        validators=ValidatorTable.of(validators),
        host=HostBinding.of("claude-code", "1.0.0", ["read", "write"], ["subagents"]),
        issued_at=1_700_000_000,
    )


def _payload(token: str) -> bytes:
    return token.split(".")[1].encode("ascii")


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.text(ALPHABETS["any"], min_size=1, max_size=10), min_size=_COMPOSED_FROM, max_size=80, unique=True),
    st.sampled_from(["ab" * 32, ('a."\\' * 16)[:64], ("a.é" * 22)[:64]]),
)
def test_a_long_checkpoints_token_carries_the_payload_of_its_claims(names: list[str], digest: str) -> None:
    keyring = CheckpointKeyring.generate()
    artifacts = {name: ArtifactReceipt(digest, len(name)) for name in names}
    validators = {f"{name}@1.0.0": ValidatorReceipt("pass", "sha256:" + digest) for name in names[:5]}
    checkpoint = _checkpoint(artifacts, validators)
    assert len(checkpoint.artifacts) + len(checkpoint.validators) >= _COMPOSED_FROM  # the composed path
    issued = issue_checkpoint(keyring, checkpoint)
    assert _payload(issued.token) == claims_payload(checkpoint.to_claims())


def test_a_long_runs_payload_is_byte_identical_and_verifies() -> None:
    """A run's shape (hex digests, ``note-0001``/``check-0001@1.0.0`` names) at 400 receipts: the composed
    payload, its MAC over the exact bytes, and the claims another replica reads back from it."""
    from rimthan_workflow_registry.run import checkpoints, verify_checkpoint

    keyring = CheckpointKeyring.generate()
    artifacts = {f"note-{i:04d}": ArtifactReceipt(f"{i:064x}", 100 + i) for i in range(200)}
    validators = {f"check-{i:04d}@1.0.0": ValidatorReceipt("pass", f"sha256:{i:064x}") for i in range(200)}
    checkpoint = _checkpoint(artifacts, validators)
    token = issue_checkpoint(keyring, checkpoint).token
    assert _payload(token) == claims_payload(checkpoint.to_claims())
    checkpoints.ISSUED.clear()  # read back as a replica that did not issue it: the payload parsed and checked
    checkpoints._last_verified.entry = None
    assert verify_checkpoint(keyring, token).checkpoint == checkpoint
