"""A newcomer's week with the installed ``rimthan-pack``: the slips a first catalogue and key rotation make.

Each test types what a release engineer new to Rimthan types (a subprocess of the console script), on a
source ``rimthan-pack init`` scaffolded and real keys, and checks that the refusal says where and what to fix:
a ``next:`` line that fits the slip, not the generic one of its code.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rimthan_workflow_registry.limits import MAX_CATALOGUE_FILE_BYTES
from support.pack_cli import asks_audience, edit_text, init_scaffold, pack
from support.refusals import refusal, refusals
from support.releases import KeyPair, make_keypair, trust_file


@pytest.fixture(scope="module")
def signer(tmp_path_factory: pytest.TempPathFactory) -> KeyPair:
    return make_keypair(tmp_path_factory.mktemp("signer"), "alice")


def test_a_schema_that_is_not_utf8_says_to_save_it_as_utf8_and_where(tmp_path: Path) -> None:
    """Before, the next step was "fix the JSON Schema at the reported pointer", and no pointer was reported."""
    source = init_scaffold(tmp_path)
    schema = source / "schemas" / "summary.schema.json"
    text = schema.read_text("utf-8")
    schema.write_bytes(
        text.replace('"type": "object"', '"type": "object", "description": "Caf\u00e9"', 1).encode("latin-1")
    )
    line = text[: text.index('"type": "object"')].count("\n") + 1
    checked = pack("check", source)
    said = refusal(checked.stderr)
    assert checked.returncode == 1 and said.code == "schema_invalid" and f": {schema}: not valid JSON" in said.error
    assert said.next.startswith("save schemas/summary.schema.json as UTF-8 (the editor's encoding setting, or iconv")
    assert f" at line {line}, column " in said.next and "reported pointer" not in said.next
    assert said.next.endswith(" is not UTF-8")


def test_a_schema_past_the_file_bound_says_to_shorten_it(tmp_path: Path) -> None:
    source = init_scaffold(tmp_path)
    schema = source / "schemas" / "summary.schema.json"
    document = json.loads(schema.read_text("utf-8"))
    document["description"] = "x" * MAX_CATALOGUE_FILE_BYTES
    schema.write_text(json.dumps(document), "utf-8")
    checked = pack("check", source)
    said = refusal(checked.stderr)
    assert checked.returncode == 1 and said.code == "schema_invalid"
    assert f"a catalogue file holds at most {MAX_CATALOGUE_FILE_BYTES}" in said.error
    assert said.next.startswith(f"shorten schemas/summary.schema.json to at most {MAX_CATALOGUE_FILE_BYTES} bytes")


def test_every_misspelt_keyword_of_every_schema_is_said_in_one_check(tmp_path: Path) -> None:
    """Before, only the first was said: three typos in two files took three runs of check."""
    source = init_scaffold(tmp_path)
    summary = source / "schemas" / "summary.schema.json"
    state = source / "schemas" / "confirmed-state.schema.json"
    edit_text(summary, '"required"', '"requird"')
    edit_text(state, '"type": "object"', '"type": "object", "propertes": {}, "minProperty": 0')
    checked = pack("check", source)
    said = refusals(checked.stderr)
    assert checked.returncode == 1 and {r.code for r in said} == {"schema_invalid"}
    keywords = sorted(r.error.split("unknown JSON Schema keyword ")[1].split(" ")[0] for r in said)
    assert keywords == ["'minProperty'", "'propertes'", "'requird'"], checked.stderr
    assert sum(f": {state}: " in r.error for r in said) == 2 and sum(f": {summary}: " in r.error for r in said) == 1
    assert {r.next.split(",")[0] for r in said} == {
        "rename it 'required'",
        "rename it 'properties'",
        "rename it 'minProperties'",
    }
    as_json = pack("check", source, "--json")
    assert len(json.loads(as_json.stdout)["errors"]) == 3


def test_a_list_naming_an_entry_twice_says_which(tmp_path: Path) -> None:
    source = init_scaffold(tmp_path)
    edit_text(
        source / "catalogue.toml", '"workflows/my-flow.toml"', '"workflows/my-flow.toml", "workflows/my-flow.toml"'
    )
    checked = pack("check", source)
    said = refusal(checked.stderr)
    assert checked.returncode == 1 and said.code == "catalogue_invalid"
    assert said.error.endswith("workflows lists an entry twice: 'workflows/my-flow.toml'")
    assert said.next == "in catalogue.toml, keep one 'workflows/my-flow.toml' in workflows"


def test_inspect_writes_an_equals_predicate_as_one_value_as_the_catalogue_does(signer: KeyPair, tmp_path: Path) -> None:
    """Before, ``equals = "team"`` was shown as ``equals ["team"]``, a form the catalogue format refuses."""
    source = init_scaffold(tmp_path)
    asks_audience(source)
    edit_text(
        source / "workflows" / "my-flow.toml",
        'when = { field = "audience", one_of = ["team", "board"] }',
        'when = { field = "audience", equals = "team" }\n\n'
        '[[steps.branches]]\ntarget = "write-summary"\nwhen = { field = "audience", one_of = ["board"] }',
    )
    built = pack("build", source, "--key", signer.private_path, "--out", tmp_path / "rel")
    assert built.returncode == 0, built.stderr
    shown = pack("inspect", tmp_path / "rel" / "my-flow-0.1.0").stdout
    assert 'branch -> write-summary when audience equals "team"\n' in shown
    assert 'branch -> write-summary when audience one_of ["board"]\n' in shown


def test_a_trust_file_pinning_another_id_says_to_confirm_it_with_the_key_holder(
    signer: KeyPair, tmp_path: Path
) -> None:
    """Before, the next step said to point --trust at a trust file: it was one, with a mistyped or swapped key."""
    source = init_scaffold(tmp_path)
    assert pack("build", source, "--key", signer.private_path, "--out", tmp_path / "rel").returncode == 0
    bob = make_keypair(tmp_path / "bob", "bob")
    trust = trust_file(tmp_path / "trust", [signer, bob], threshold=1)
    edit_text(trust, f'"{bob.key_id}"', f'"{signer.key_id}"')
    verified = pack("verify", tmp_path / "rel" / "my-flow-0.1.0", "--trust", trust)
    said = refusal(verified.stderr)
    assert verified.returncode == 1 and said.code == "trust_store_invalid"
    assert f"keys[1].id {signer.key_id} does not match bob.pub (its key id is {bob.key_id})" in said.error
    assert said.next == (
        f"confirm bob's key id with its holder (keys/README.md, Add a key): if it is {bob.key_id}, set keys[1].id "
        f"to it in {trust}; if it is {signer.key_id}, bob.pub is not their key: replace it with the .pub they sent"
    )


def test_an_instruction_or_asset_left_empty_is_refused_at_build_each_file_said(signer: KeyPair, tmp_path: Path) -> None:
    """A file created and never written (``touch assets/instructions/plan.md``) built, signed and was delivered
    to every harness as nothing: the step's instruction said no word of what to do."""
    source = init_scaffold(tmp_path)
    instruction = source / "assets" / "instructions" / "plan.md"
    prompt = source / "assets" / "prompts" / "brief.md"
    instruction.write_bytes(b"")
    prompt.write_text("\n  \n", "utf-8")
    built = pack("build", source, "--key", signer.private_path, "--out", tmp_path / "rel")
    said = refusals(built.stderr)
    assert built.returncode == 1 and not (tmp_path / "rel").exists()
    assert [r.error for r in said] == [
        f"error: catalogue_invalid: {instruction}: is empty; an instruction or asset is delivered to harnesses to be "
        "read, and this one says nothing",
        f"error: catalogue_invalid: {prompt}: holds only whitespace; an instruction or asset is delivered to "
        "harnesses to be read, and this one says nothing",
    ]
    assert {r.next for r in said} == {"write what the harness should read into the file, or remove the reference to it"}


def test_an_asset_id_used_twice_is_said_once_with_what_to_do_not_echoed_as_an_unknown_subagent(
    tmp_path: Path,
) -> None:
    """The prompt renamed to the reviewer subagent's id: before, a second failure said the validator "runs as
    unknown subagent asset 'reviewer'" (it is defined, twice), and the first said no more than to fix a key."""
    source = init_scaffold(tmp_path)
    edit_text(
        source / "workflows" / "my-flow.toml", '{ id = "brief", kind = "prompt"', '{ id = "reviewer", kind = "prompt"'
    )
    checked = pack("check", source)
    said = refusals(checked.stderr)
    assert checked.returncode == 1
    assert said[0].error.endswith("workflows/my-flow.toml: asset id(s) defined twice: reviewer")
    assert said[0].next == "in workflows/my-flow.toml, give each asset an id of its own (or remove the copy)"
    assert not any("unknown subagent asset" in r.error for r in said), checked.stderr
    assert [r.error.split(": ", 3)[-1] for r in said[1:]] == ["step setup-workspace delivers unknown asset 'brief'"]
