"""A step's ``requires_confirmed`` names confirmed-state fields the schema declares, on a step ``continue`` moves.

research-decision 1.3.1's interview requires the options and success criteria (tests/host/
test_bridge_interview_facts.py drives it). A field the schema does not declare could never be confirmed, so
the step could never move on; on a gated step the key would say something validation never checks. Both are
refused at build (and load), naming the workflow file, the step and the field; the real packager builds the
1.3.1 source, and copies of it with each slip.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.pack_cli import edit_text, pack
from support.refusals import refusal
from support.releases import KeyPair, make_keypair, packaged_source

WORKFLOW = "workflows/research-decision.toml"
REQUIRES = 'requires_confirmed = ["options", "success_criteria"]'
SLIPS = {
    "undeclared": (
        REQUIRES,
        'requires_confirmed = ["option", "success_criteria"]',
        "error: reference_unresolved: {where}: step interview requires confirmed field 'option', which the "
        "confirmed-state schema schemas/confirmed-state.schema.json does not declare (did you mean 'options'?)",
    ),
    "gated": (
        'instruction = "assets/instructions/desk-research.md"',
        f'instruction = "assets/instructions/desk-research.md"\n{REQUIRES}',
        "error: catalogue_invalid: {where}: step desk-research: requires_confirmed is for a step without "
        "outputs or validators (a gated step moves on by validation, which checks its files, not the confirmed "
        "state)",
    ),
}


@pytest.fixture(scope="module")
def signer(tmp_path_factory: pytest.TempPathFactory) -> KeyPair:
    return make_keypair(tmp_path_factory.mktemp("keys"), "author")


def test_the_1_3_1_interview_requires_its_facts_and_builds(signer: KeyPair, tmp_path: Path) -> None:
    source = packaged_source("1.3.1")
    assert REQUIRES in (source / WORKFLOW).read_text("utf-8")
    built = pack("build", source, "--key", signer.private_path, "--out", tmp_path / "out")
    assert built.returncode == 0, built.stderr


@pytest.mark.parametrize("slip", sorted(SLIPS))
def test_a_slip_in_requires_confirmed_is_refused(signer: KeyPair, tmp_path: Path, slip: str) -> None:
    source = tmp_path / "1.3.1"
    shutil.copytree(packaged_source("1.3.1"), source)
    before, after, said = SLIPS[slip]
    edit_text(source / WORKFLOW, before, after)
    built = pack("build", source, "--key", signer.private_path, "--out", tmp_path / "out")
    assert built.returncode == 1, built.stdout
    assert refusal(built.stderr).error == said.format(where=source / WORKFLOW)


def test_an_example_state_without_a_required_field_is_refused(signer: KeyPair, tmp_path: Path) -> None:
    """The worked example's confirmed state must hold what the interview requires: a scripted harness confirming
    it would otherwise be blocked at the interview on every run (before, the build accepted it)."""
    source = tmp_path / "1.3.1"
    shutil.copytree(packaged_source("1.3.1"), source)
    example = source / "examples" / "confirmed-state.json"
    state = json.loads(example.read_text("utf-8"))
    del state["options"]
    example.write_text(json.dumps(state, indent=2) + "\n", "utf-8")
    out = tmp_path / "out"
    built = pack("build", source, "--key", signer.private_path, "--out", out)
    assert built.returncode == 1, built.stdout
    said = refusal(built.stderr)
    assert said.error == (
        f"error: confirmed_field_missing: {example}: lacks options, which step interview requires confirmed "
        "(workflow research-decision@1.3.1): a harness confirming it would be blocked at interview"
    )
    assert said.next == (
        "add options to examples/confirmed-state.json (as schemas/confirmed-state.schema.json declares), or drop "
        "it from the step's requires_confirmed in workflows/research-decision.toml"
    )
    assert not (out / "research-decision-1.3.1").exists()
