"""Slips a catalogue author makes that ``rimthan-pack build`` must name precisely: a TOML syntax or encoding error
(the file, line and column to fix), a version folder whose catalogue says another version or another name than
its parent folder's, editor backups; and those of a first catalogue, each refused with a `next:` line that fixes
it as written (then applied, and the source builds): a JSON Schema that does not parse (the file, line and
column), a misspelt TOML key (the key it meant), a validator's subagent setup-workspace does not deliver (where
to list it), rebuilding a version folder already released (copy it to a new version folder, not bump in place).

Every test drives the installed console script in a subprocess (what the
author types), on a source ``rimthan-pack init`` made and real keys.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from rimthan_workflow_registry.errors import MAX_SAID_FAILURES
from support.pack_cli import pack
from support.refusals import Refusal, refusal, refusals
from support.releases import KeyPair, make_keypair


@pytest.fixture(scope="module")
def signer(tmp_path_factory: pytest.TempPathFactory) -> KeyPair:
    return make_keypair(tmp_path_factory.mktemp("signer"), "author")


@pytest.fixture(scope="module")
def scaffold(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = tmp_path_factory.mktemp("scaffold") / "my-flow" / "0.1.0"
    made = pack("init", source)
    assert made.returncode == 0, made.stderr
    return source


def _copy(scaffold: Path, tmp_path: Path) -> Path:
    source = tmp_path / "my-flow" / "0.1.0"
    shutil.copytree(scaffold, source)
    return source


# --------------------------------------------------------------------------- TOML that does not parse


# (file, what is appended to it, the next step): a syntax error names no key, so the step names the file and where
TOML_SLIPS = [
    ("catalogue.toml", b"oops = = 1\n", "fix the TOML syntax in catalogue.toml at line 18, column 8"),
    ("workflows/my-flow.toml", b'\n[[steps]\nid = "x"\n', None),
    (
        "catalogue.toml",
        b"extra = [1,\n\n",
        "fix the TOML syntax in catalogue.toml at its end (line 18), or where a string, array or inline table "
        "left open above it begins",
    ),
    (
        "catalogue.toml",
        'note = "caf\u00e9"\n'.encode("latin-1"),
        "save catalogue.toml as UTF-8 (the editor's encoding setting, or iconv -f ITS_ENCODING -t UTF-8): "
        "byte 0xe9 at line 18, column 12 (byte offset 316) is not UTF-8",
    ),
]


@pytest.mark.parametrize(("name", "appended", "expected"), TOML_SLIPS)
def test_a_toml_syntax_or_encoding_error_names_the_file_and_line_to_fix(
    scaffold: Path, signer: KeyPair, tmp_path: Path, name: str, appended: bytes, expected: str | None
) -> None:
    source = _copy(scaffold, tmp_path)
    toml = source / name
    lines_before = toml.read_bytes().count(b"\n")
    toml.write_bytes(toml.read_bytes() + appended)

    built = pack("build", source, "--key", signer.private_path, "--out", tmp_path / "rel")

    said = refusal(built.stderr)
    assert built.returncode == 1 and said.error.startswith(f"error: catalogue_invalid: {toml}: not valid TOML: ")
    if expected is None:  # an array-of-tables header missing its second "]": tomllib points where it belongs
        expected = f"fix the TOML syntax in {name} at line {lines_before + 2}, column 8"
    assert said.next == expected
    assert "named TOML key" not in said.next
    assert not (tmp_path / "rel").exists()


def test_a_trust_file_that_is_not_toml_names_the_file_and_line_to_fix(
    scaffold: Path, signer: KeyPair, tmp_path: Path
) -> None:
    trust = tmp_path / "trust.toml"
    trust.write_text('threshold = 1\n[[keys]]\nkey_id = "abc\n', "utf-8")

    built = pack("build", scaffold, "--key", signer.private_path, "--out", tmp_path / "rel", "--trust", trust)

    said = refusal(built.stderr)
    assert built.returncode == 1 and said.error.startswith(f"error: trust_store_invalid: {trust}: not a readable TOML")
    assert said.next == f"fix the TOML syntax in {trust} at line 3, column 14"


# a trust file's misspelt key: the TOML as written, the refusal's message after the file, the rename
TRUST_SLIPS = {
    "treshold": (
        'treshold = 1\n[[keys]]\nname = "author"\nfile = "author.pub"\n',
        "unknown key(s) treshold (it takes 'keys', 'threshold')",
        "'treshold' to 'threshold'",
    ),
    "files": (
        'threshold = 1\n[[keys]]\nname = "author"\nfiles = "author.pub"\n',
        "keys[0]: unknown key(s) files (it takes 'file', 'id', 'name')",
        "'files' to 'file'",
    ),
}


@pytest.mark.parametrize("slip", sorted(TRUST_SLIPS))
def test_a_trust_file_key_misspelt_says_the_key_it_meant(
    scaffold: Path, signer: KeyPair, tmp_path: Path, slip: str
) -> None:
    text, message, rename = TRUST_SLIPS[slip]
    trust = tmp_path / "trust.toml"
    trust.write_text(text, "utf-8")
    shutil.copyfile(signer.public_path, tmp_path / "author.pub")

    said = _refused_build(scaffold, signer, tmp_path / "rel", "--trust", trust)

    assert said.error == f"error: trust_store_invalid: {trust}: {message}"
    assert said.next == f"in {trust}, rename {rename} (keys/README.md)"


# --------------------------------------------------------------------------- a version folder that says another version


SCAFFOLD_SAYS = {"version": "0.1.0", "name": "my-flow"}


def _at(scaffold: Path, folder: Path, version: str, key: str = "version") -> Path:
    """A copy of the scaffold in ``folder`` whose catalogue.toml declares ``version`` (or another ``key``)."""
    shutil.copytree(scaffold, folder)
    return _declare(folder, key, SCAFFOLD_SAYS[key], version)


def _declare(source: Path, key: str, was: str, value: str) -> Path:
    """``source`` with ``key = "was"`` in its catalogue.toml changed to ``value``."""
    toml = source / "catalogue.toml"
    toml.write_text(toml.read_text("utf-8").replace(f'{key} = "{was}"', f'{key} = "{value}"', 1), "utf-8")
    return source


def _refused_build(source: Path, signer: KeyPair, out: Path, *more: str | Path) -> Refusal:
    """Build ``source`` into ``out``, which must be refused (exit 1) with nothing written; the refusal."""
    built = pack("build", source, "--key", signer.private_path, "--out", out, *more)
    assert built.returncode == 1
    assert not out.exists()
    return refusal(built.stderr)


def test_a_version_folder_whose_catalogue_says_another_version_is_refused(
    scaffold: Path, signer: KeyPair, tmp_path: Path
) -> None:
    """catalogues/NAME/VERSION is init's layout: a copied 0.5.0 whose version was never bumped does not build 0.2.0."""
    source = _at(scaffold, tmp_path / "my-flow" / "0.5.0", "0.2.0")

    said = _refused_build(source, signer, tmp_path / "rel")

    assert said.error == (
        f"error: catalogue_invalid: {source / 'catalogue.toml'}: the source folder names version 0.5.0 but "
        "[catalogue].version is '0.2.0': the build would publish 0.2.0, not 0.5.0"
    )
    assert said.next == (
        'set version = "0.5.0" under [catalogue] in catalogue.toml, or, if 0.2.0 is meant, move the source to '
        f"{tmp_path / 'my-flow' / '0.2.0'} (a version folder holds that version's source)"
    )
    # either step the refusal gives builds; a folder named as no version builds what it declares
    source.rename(tmp_path / "my-flow" / "0.2.0")
    for folder, version in (("0.2.0", "0.2.0"), ("draft", "0.3.0"), ("v0.5.0", "0.4.0"), ("1.0.0-rc.1+b.2", None)):
        if folder != "0.2.0":
            _at(scaffold, tmp_path / "my-flow" / folder, version or folder)
        built = pack("build", tmp_path / "my-flow" / folder, "--key", signer.private_path, "--out", tmp_path / "rel")
        assert built.returncode == 0, (folder, built.stderr)
    assert sorted(p.name for p in (tmp_path / "rel").iterdir()) == [
        "my-flow-0.2.0",
        "my-flow-0.3.0",
        "my-flow-0.4.0",
        "my-flow-1.0.0-rc.1+b.2",
    ]


def test_a_version_folder_whose_parent_names_another_catalogue_is_refused(
    scaffold: Path, signer: KeyPair, tmp_path: Path
) -> None:
    """catalogues/other-flow/0.1.0 copied from my-flow, its name never changed, does not build my-flow-0.1.0."""
    said = _refused_build(_at(scaffold, tmp_path / "other-flow" / "0.1.0", "my-flow", "name"), signer, tmp_path / "rel")
    source = tmp_path / "other-flow" / "0.1.0"

    assert said.error == (
        f"error: catalogue_invalid: {source / 'catalogue.toml'}: the source folder other-flow/0.1.0 names catalogue "
        "'other-flow' but [catalogue].name is 'my-flow': the build would publish my-flow-0.1.0, not other-flow-0.1.0"
    )
    moved = f"move the source to {tmp_path / 'my-flow' / '0.1.0'} (a version folder's parent names its catalogue)"
    assert said.next == f'set name = "other-flow" under [catalogue] in catalogue.toml, or, if my-flow is meant, {moved}'
    # a parent that is no catalogue name can only be moved away from
    odd = _at(scaffold, tmp_path / "Other_Flow" / "0.1.0", "my-flow", "name")
    assert _refused_build(odd, signer, tmp_path / "rel").next == moved
    # either step the first refusal gives builds; a folder named as no version builds the name it declares
    _declare(source, "name", "my-flow", "other-flow")
    odd.parent.rename(tmp_path / "my-flow")
    _at(scaffold, tmp_path / "drafts" / "flow-v2", "third-flow", "name")
    for folder in ("other-flow/0.1.0", "my-flow/0.1.0", "drafts/flow-v2"):
        built = pack("build", tmp_path / folder, "--key", signer.private_path, "--out", tmp_path / "rel")
        assert built.returncode == 0, (folder, built.stderr)
    assert sorted(p.name for p in (tmp_path / "rel").iterdir()) == [
        "my-flow-0.1.0",
        "other-flow-0.1.0",
        "third-flow-0.1.0",
    ]


def test_init_will_not_make_a_version_folder_a_build_refuses(tmp_path: Path) -> None:
    """--name in catalogues/NAME/VERSION may only agree with NAME: init never scaffolds a source build refuses."""
    made = pack("init", "catalogues/my-flow/0.1.0", "--name", "other-flow", cwd=tmp_path)

    said = refusal(made.stderr)
    assert made.returncode == 1
    assert said.error == (
        "error: catalogue_invalid: catalogues/my-flow/0.1.0: --name 'other-flow' disagrees with the folder "
        "'my-flow'; in the layout catalogues/NAME/0.1.0 the folder NAME names the catalogue (a build refuses a "
        "catalogue.toml that says another name)"
    )
    assert said.next == ("init the catalogue in a folder named after it: rimthan-pack init catalogues/other-flow/0.1.0")
    assert not (tmp_path / "catalogues").exists()
    assert pack("init", "catalogues/my-flow/0.1.0", "--name", "my-flow", cwd=tmp_path).returncode == 0
    assert pack("init", "drafts/flow-v2", "--name", "other-flow", cwd=tmp_path).returncode == 0


# --------------------------------------------------------------------------- editor backups and patch leftovers

LEFTOVER_NEXT = "next: delete it, or move it out of the catalogue source: everything in it ships"
LEFTOVER_SAID = (
    "an editor backup, swap file, patch leftover or file-browser file (a name ending in ~, .swp, .swo, .orig or "
    ".rej, #name#, Thumbs.db or desktop.ini) would ship in the release"
)


@pytest.mark.parametrize(
    "leftover",
    [
        "assets/instructions/plan.md~",
        "assets/instructions/plan.swp",
        "assets/instructions/plan.md.swo",
        "catalogue.toml.orig",
        "workflows/my-flow.toml.rej",
        "assets/instructions/PLAN.MD.ORIG",
        "assets/instructions/#plan.md#",
        "assets/instructions/Thumbs.db",
        "examples/desktop.ini",
        "assets/EHTHUMBS.DB",
    ],
)
def test_an_editor_backup_or_patch_leftover_in_a_source_is_refused_by_name(
    scaffold: Path, signer: KeyPair, tmp_path: Path, leftover: str
) -> None:
    source = _copy(scaffold, tmp_path)
    (source / leftover).write_bytes(b"an older plan\n")

    built = pack("build", source, "--key", signer.private_path, "--out", tmp_path / "rel")

    said = refusal(built.stderr)
    assert built.returncode == 1
    assert said.error == f"error: path_unsafe: {source / leftover}: {LEFTOVER_SAID}"
    assert f"next: {said.next}" == LEFTOVER_NEXT
    assert not (tmp_path / "rel").exists()


def test_every_leftover_is_one_failure_of_its_own(scaffold: Path, signer: KeyPair, tmp_path: Path) -> None:
    """All of them, in path order, none that only looks like one (``tilde~name.md``, ``orig.md``, ``#issue.md``):
    each its own two lines (were five named in one line, "and 2 more"), ``--json`` each under ``errors``."""
    source = _copy(scaffold, tmp_path)
    names = [f"assets/prompts/brief-{n}.md~" for n in range(7)]
    for name in [*names, "assets/prompts/tilde~name.md", "assets/prompts/orig.md", "assets/prompts/#issue.md"]:
        (source / name).write_bytes(b"x")

    built = pack("build", source, "--key", signer.private_path, "--out", tmp_path / "rel")

    assert built.returncode == 1
    assert refusals(built.stderr) == [
        Refusal(f"error: path_unsafe: {source / name}: {LEFTOVER_SAID}", LEFTOVER_NEXT.removeprefix("next: "))
        for name in names
    ]
    checked = pack("check", source, "--json")
    said = json.loads(checked.stdout)
    assert checked.returncode == 1 and said["error"] == said["errors"][0]
    assert [(e["code"], e["path"], e["details"]) for e in said["errors"]] == [
        ("path_unsafe", str(source / name), {"file": name}) for name in names
    ]
    for name in names:
        (source / name).unlink()
    assert pack("build", source, "--key", signer.private_path, "--out", tmp_path / "rel").returncode == 0


def test_leftovers_past_the_limit_are_said_up_to_it(scaffold: Path, signer: KeyPair, tmp_path: Path) -> None:
    """A thousand editor backups are one mistake made a thousand times: the first ``MAX_SAID_FAILURES`` are said,
    each its own, as every collected check says them (were all of them, a line pair each)."""
    source = _copy(scaffold, tmp_path)
    names = sorted(f"assets/prompts/brief-{n:02d}.md~" for n in range(MAX_SAID_FAILURES + 5))
    for name in names:
        (source / name).write_bytes(b"x")
    said = json.loads(pack("check", source, "--json").stdout)
    assert [e["path"] for e in said["errors"]] == [str(source / name) for name in names[:MAX_SAID_FAILURES]]


# --------------------------------------------------------------------------- a first catalogue's slips


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text("utf-8")
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1), "utf-8")


def _refused(source: Path, signer: KeyPair, out: Path) -> Refusal:
    built = pack("build", source, "--key", signer.private_path, "--out", out)
    assert built.returncode == 1, built.stdout
    return refusal(built.stderr)


def _builds(source: Path, signer: KeyPair, out: Path) -> None:
    built = pack("build", source, "--key", signer.private_path, "--out", out)
    assert built.returncode == 0, built.stderr


# (file, text as written, the slip, how the error line goes on after the file, the next step)
WRONG_AS_WRITTEN = [
    (  # a comma forgotten
        "schemas/summary.schema.json",
        '"additionalProperties": false,',
        '"additionalProperties": false',
        "schema_invalid",
        "not valid JSON: Expecting ',' delimiter: line 6 column 3 (char 139)",
        "fix the JSON syntax in schemas/summary.schema.json at line 6, column 3, or just before it "
        "(a missing or extra comma is reported at the token after it)",
    ),
    (  # a key written twice in one object
        "schemas/summary.schema.json",
        '"additionalProperties": false,',
        '"additionalProperties": false,\n  "type": "object",',
        "schema_invalid",
        "duplicate JSON key 'type'",
        "in schemas/summary.schema.json, keep one 'type' member in its object: JSON names each key of an object "
        "once, and readers differ on which of two they keep",
    ),
    (  # the validator's subagent misspelt in setup-workspace's host_assets (then misspelt references)
        "workflows/my-flow.toml",
        '    "reviewer",\n]\nnext = "plan"',
        '    "reveiwer",\n]\nnext = "plan"',
        "first_step_not_setup",
        "workflow my-flow@0.1.0: setup-workspace must deliver every subagent a validator runs as; add reviewer to "
        "its host_assets (it names 'reveiwer', which no asset is: a misspelling?)",
        "in workflows/my-flow.toml, list 'reviewer' in the host_assets of step setup-workspace",
    ),
    (
        "workflows/my-flow.toml",
        'next = "plan"',
        'next = "plam"',
        "reference_unresolved",
        "step setup-workspace leads to unknown step 'plam' (did you mean 'plan'?)",
        "in workflows/my-flow.toml, change 'plam' to 'plan'",
    ),
    (
        "workflows/my-flow.toml",
        '    "reviewer@1.0.0",',
        '    "reviewer@1.0",',
        "reference_unresolved",
        "step write-summary names unknown validator 'reviewer@1.0' (did you mean 'reviewer@1.0.0'?)",
        "in workflows/my-flow.toml, change 'reviewer@1.0' to 'reviewer@1.0.0'",
    ),
    (
        "workflows/my-flow.toml",
        '    "claude-code@1.0.0",',
        '    "claude-code",',
        "reference_unresolved",
        "workflow my-flow@0.1.0 pins unknown host adapter 'claude-code' (did you mean 'claude-code@1.0.0'?)",
        "in workflows/my-flow.toml, change 'claude-code' to 'claude-code@1.0.0'",
    ),
    (
        "workflows/my-flow.toml",
        'schema = "schemas/summary.schema.json"',
        'schema = "schemas/summary.json"',
        "reference_unresolved",
        "workflow my-flow@0.1.0 references missing file 'schemas/summary.json' "
        "(did you mean 'schemas/summary.schema.json'?)",
        "in workflows/my-flow.toml, change 'schemas/summary.json' to 'schemas/summary.schema.json'",
    ),
    (
        "catalogue.toml",
        '"workflows/my-flow.toml",',
        '"workflows/my_flow.toml",',
        "reference_unresolved",
        "catalogue.toml names missing file 'workflows/my_flow.toml' (did you mean 'workflows/my-flow.toml'?)",
        "in catalogue.toml, change 'workflows/my_flow.toml' to 'workflows/my-flow.toml'",
    ),
]


ALSO_BROKEN = {  # a slip that breaks a second rule too: each broken rule is said, in the order the rules run
    '    "reveiwer",\n]\nnext = "plan"': [
        "error: reference_unresolved: {where}: step setup-workspace delivers unknown asset 'reveiwer' "
        "(did you mean 'reviewer'?)"
    ],
}


@pytest.mark.parametrize(("name", "right", "wrong", "code", "message", "expected"), WRONG_AS_WRITTEN)
def test_a_slip_in_a_schema_or_setup_step_says_where_and_how_to_fix_it(
    scaffold: Path,
    signer: KeyPair,
    tmp_path: Path,
    name: str,
    right: str,
    wrong: str,
    code: str,
    message: str,
    expected: str,
) -> None:
    source = _copy(scaffold, tmp_path)
    _edit(source / name, right, wrong)

    built = pack("build", source, "--key", signer.private_path, "--out", tmp_path / "rel")
    assert built.returncode == 1, built.stdout
    said, *also = refusals(built.stderr)

    assert said.error == f"error: {code}: {source / name}: {message}"
    assert said.next == expected
    assert [r.error for r in also] == [e.format(where=source / name) for e in ALSO_BROKEN.get(wrong, [])]
    _edit(source / name, wrong, right)
    _builds(source, signer, tmp_path / "rel")


# (file, the text as it should be, the table the next step names, the text as misspelt, a required key?)
MISSPELT = [
    ("workflows/my-flow.toml", "confirmed_state_schema = ", "", "confirmed_schema = ", True),
    ("catalogue.toml", "[catalogue]", "", "[catalog]", True),
    ("workflows/my-flow.toml", "media_type = ", " (steps[0].outputs[0])", "mediatype = ", True),
    ("workflows/my-flow.toml", "validators = [", " (steps[2])", "validator = [", False),
    ("adapters/claude-code.toml", "subagent = ", " ([paths])", "sub_agent = ", True),
]


def _key(text: str) -> str:
    return text.strip("[ =]")


@pytest.mark.parametrize(("name", "right", "table", "wrong", "required"), MISSPELT)
def test_a_misspelt_key_is_named_with_the_key_it_meant(
    scaffold: Path, signer: KeyPair, tmp_path: Path, name: str, right: str, table: str, wrong: str, required: bool
) -> None:
    source = _copy(scaffold, tmp_path)
    _edit(source / name, right, wrong)

    said = _refused(source, signer, tmp_path / "rel")

    meant, written = _key(right), _key(wrong)
    if required:
        assert said.error.endswith(f": missing required key {meant!r} (found {written!r} instead, a misspelling?)")
    else:
        assert f": unknown key(s) {written} (a misspelling? " in said.error and f"{meant!r}" in said.error
    assert said.next == f"in {name}{table}, rename {written!r} to {meant!r}"
    _edit(source / name, wrong, right)
    _builds(source, signer, tmp_path / "rel")


def test_a_key_like_no_other_keeps_the_general_next_step(scaffold: Path, signer: KeyPair, tmp_path: Path) -> None:
    source = _copy(scaffold, tmp_path)
    _edit(source / "catalogue.toml", "[scope]", "colour = 1\n\n[scope]")

    said = _refused(source, signer, tmp_path / "rel")

    assert said.error.endswith(
        ": [catalogue]: unknown key(s) colour (a misspelling? [catalogue] takes 'description', 'name', 'title', "
        "'version')"
    )
    assert said.next == "fix the named TOML key in the catalogue source (docs/catalogue-format.md)"


def test_rebuilding_a_released_version_folder_says_to_copy_it_to_a_new_one(
    scaffold: Path, signer: KeyPair, tmp_path: Path
) -> None:
    """Bumping [catalogue].version in place would be refused too (the folder names the old version)."""
    source, out = _copy(scaffold, tmp_path), tmp_path / "rel"
    _builds(source, signer, out)
    _edit(source / "assets" / "instructions" / "plan.md", "\n", "\nAlso list the risks.\n")

    said = _refused(source, signer, out)

    new = tmp_path / "my-flow" / "0.1.1"
    assert said.error == (
        f"error: release_exists: {out / 'my-flow-0.1.0'}: a release with this name and version already exists; "
        "releases are immutable"
    )
    assert said.next == (
        f"releases are immutable: copy the source to a new version folder (cp -r {source} {new}), "
        'set version = "0.1.1" under [catalogue] in its catalogue.toml, and build that'
    )
    shutil.copytree(source, new)
    _edit(new / "catalogue.toml", 'version = "0.1.0"', 'version = "0.1.1"')
    _builds(new, signer, out)
    assert sorted(p.name for p in out.iterdir()) == ["my-flow-0.1.0", "my-flow-0.1.1"]
    # a source in a folder named as no version: bumping its catalogue.toml is the whole step
    draft = tmp_path / "draft"
    shutil.copytree(new, draft)
    assert _refused(draft, signer, out).next == "releases are immutable: bump version in catalogue.toml and build again"


# a file of a built release appended to (made, if it was not there): the code, how the next step begins
EDITED_IN_PLACE = {
    "assets/instructions/plan.md": ("file_size_mismatch", "the file was truncated or grown after signing"),
    "examples/notes.md": ("file_unlisted", "delete the file the manifest does not list"),
}


@pytest.mark.parametrize("edit", sorted(EDITED_IN_PLACE))
def test_a_built_release_edited_in_place_says_to_build_a_new_version(
    scaffold: Path, signer: KeyPair, tmp_path: Path, edit: str
) -> None:
    """Restoring the release is not what an author who edited it wants: a change is a new version of the source."""
    source, out = _copy(scaffold, tmp_path), tmp_path / "rel"
    _builds(source, signer, out)
    with (out / "my-flow-0.1.0" / "catalogue" / edit).open("a", encoding="utf-8") as changed:
        changed.write("One more thing.\n")
    trust = tmp_path / "trust"
    trust.mkdir()
    shutil.copyfile(signer.public_path, trust / signer.public_path.name)

    verified = pack("verify", out / "my-flow-0.1.0", "--trust", trust)

    said, (code, first) = refusal(verified.stderr), EDITED_IN_PLACE[edit]
    assert verified.returncode == 1 and said.code == code
    assert said.next.startswith(first)
    assert said.next.endswith(
        "(a release is never edited: to change it, edit its catalogue source and build a new version)"
    )


# a definition file left out of catalogue.toml: the file it copies, the key that lists its kind, the kind
UNLISTED = {
    "workflows/second-flow.toml": ("workflows/my-flow.toml", "workflows", "workflow"),
    "adapters/opencode.toml": ("adapters/claude-code.toml", "host_adapters", "host adapter"),
}


@pytest.mark.parametrize("name", sorted(UNLISTED))
def test_a_definition_file_catalogue_toml_does_not_list_is_refused(
    scaffold: Path, signer: KeyPair, tmp_path: Path, name: str
) -> None:
    """Only listed files are read: a second workflow never added to the list shipped, signed, and was never served."""
    source, (model, key, what) = _copy(scaffold, tmp_path), UNLISTED[name]
    (source / name).write_text((source / model).read_text("utf-8"), "utf-8")

    said = _refused(source, signer, tmp_path / "rel")

    assert said.error == (
        f"error: catalogue_invalid: {source / name}: a {what} file catalogue.toml does not list in {key}: only the "
        "files listed there are read, so it would ship, signed, and never be served"
    )
    assert said.next == f'add "{name}" to {key} in catalogue.toml, or delete the file from the source'
    (source / name).unlink()
    _builds(source, signer, tmp_path / "rel")


def test_several_unlisted_definition_files_are_one_failure_each(
    scaffold: Path, signer: KeyPair, tmp_path: Path
) -> None:
    """Two workflows and an adapter never listed were one error line ("(and ...)") with one next step for all:
    now each is its own failure, with the list to add it to, and ``check --json`` gives each under ``errors``."""
    source = _copy(scaffold, tmp_path)
    copies = {
        "adapters/opencode.toml": "adapters/claude-code.toml",
        "workflows/third-flow.toml": "workflows/my-flow.toml",
    }
    for name, model in {"workflows/second-flow.toml": "workflows/my-flow.toml", **copies}.items():
        (source / name).write_text((source / model).read_text("utf-8"), "utf-8")

    built = pack("build", source, "--key", signer.private_path, "--out", tmp_path / "rel")

    assert built.returncode == 1 and not (tmp_path / "rel").exists()
    expected = [  # the workflows first, then the adapters, each in path order
        ("workflows/second-flow.toml", "workflows"),
        ("workflows/third-flow.toml", "workflows"),
        ("adapters/opencode.toml", "host_adapters"),
    ]
    assert refusals(built.stderr) == [
        Refusal(
            f"error: catalogue_invalid: {source / name}: a {'workflow' if key == 'workflows' else 'host adapter'} file "
            f"catalogue.toml does not list in {key}: only the files listed there are read, so it would ship, signed, "
            "and never be served",
            f'add "{name}" to {key} in catalogue.toml, or delete the file from the source',
        )
        for name, key in expected
    ]
    checked = pack("check", source, "--json")
    said = json.loads(checked.stdout)
    assert checked.returncode == 1 and refusals(checked.stderr) == refusals(built.stderr)
    assert said["error"] == said["errors"][0]
    assert [(e["path"], e["details"]) for e in said["errors"]] == [
        (str(source / name), {"definition": name, "list": key}) for name, key in expected
    ]


# --------------------------------------------------------------------------- every file that does not parse


def test_every_definition_file_that_does_not_parse_is_said_each_in_its_own_lines(
    scaffold: Path, signer: KeyPair, tmp_path: Path
) -> None:
    """A workflow and an adapter file, each not TOML: both said, in catalogue.toml's order, each with its own next
    step (``--json``: both under ``errors``). Before, the first stopped the load and the second met the next run."""
    source = _copy(scaffold, tmp_path)
    workflow, adapter = source / "workflows/my-flow.toml", source / "adapters/claude-code.toml"
    workflow.write_bytes(workflow.read_bytes() + b"\noops = = 1\n")
    adapter.write_bytes(adapter.read_bytes() + b"\nbad = [1,\n")

    built = pack("build", source, "--key", signer.private_path, "--out", tmp_path / "rel")

    said = refusals(built.stderr)
    assert built.returncode == 1 and [r.error.split(": not valid TOML: ")[0] for r in said] == [
        f"error: catalogue_invalid: {workflow}",
        f"error: catalogue_invalid: {adapter}",
    ], built.stderr
    assert said[0].next.startswith("fix the TOML syntax in workflows/my-flow.toml at line ")
    assert said[1].next.startswith("fix the TOML syntax in adapters/claude-code.toml at its end")
    checked = json.loads(pack("check", source, "--json").stdout)
    assert [(e["code"], e["path"]) for e in checked["errors"]] == [
        ("catalogue_invalid", str(workflow)),
        ("catalogue_invalid", str(adapter)),
    ]
    assert not (tmp_path / "rel").exists()


def test_every_schema_that_is_not_strict_json_is_said_each_in_its_own_lines(
    scaffold: Path, signer: KeyPair, tmp_path: Path
) -> None:
    """Two schemas, one not JSON and one repeating a key: both said, in path order, each with where to fix it."""
    source = _copy(scaffold, tmp_path)
    state, summary = source / "schemas/confirmed-state.schema.json", source / "schemas/summary.schema.json"
    state.write_text('{"type": "object",}', "utf-8")
    summary.write_text('{"type": "object", "type": "array"}', "utf-8")

    built = pack("build", source, "--key", signer.private_path, "--out", tmp_path / "rel")

    said = refusals(built.stderr)
    assert built.returncode == 1 and [r.error for r in said] == [
        f"error: schema_invalid: {state}: not valid JSON: Expecting property name enclosed in double quotes: "
        "line 1 column 19 (char 18)",
        f"error: schema_invalid: {summary}: duplicate JSON key 'type'",
    ], built.stderr
    assert said[0].next.startswith("fix the JSON syntax in schemas/confirmed-state.schema.json at line 1, column 19")
    assert said[1].next.startswith("in schemas/summary.schema.json, keep one 'type' member")
    assert not (tmp_path / "rel").exists()


def test_every_missing_file_a_workflow_names_is_said_each_in_its_own_lines(
    scaffold: Path, signer: KeyPair, tmp_path: Path
) -> None:
    """Two step instructions deleted: the rule that every named file exists says both, in the workflow's order
    (``--json``: both under ``errors``). Before, the rule stopped at its first missing file."""
    source = _copy(scaffold, tmp_path)
    missing = ["assets/instructions/plan.md", "assets/instructions/write-summary.md"]
    for name in missing:
        (source / name).unlink()

    built = pack("build", source, "--key", signer.private_path, "--out", tmp_path / "rel")

    said = refusals(built.stderr)
    workflow = source / "workflows/my-flow.toml"
    assert built.returncode == 1 and [r.error.split(" (did you mean")[0] for r in said] == [
        f"error: reference_unresolved: {workflow}: workflow my-flow@0.1.0 references missing file {name!r}"
        for name in missing
    ], built.stderr
    checked = json.loads(pack("check", source, "--json").stdout)
    assert [(e["code"], e["path"]) for e in checked["errors"]] == [("reference_unresolved", str(workflow))] * 2
    assert not (tmp_path / "rel").exists()
