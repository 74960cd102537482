"""Slips a catalogue author makes that ``rimthan-pack build`` must name precisely: a TOML syntax or encoding error
(the file, line and column to fix), a version folder whose catalogue says another version, editor backups.

Every test drives the installed console script in a subprocess (what the
author types), on a source ``rimthan-pack init`` made and real keys.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.pack_cli import pack
from support.refusals import refusal
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
        "byte 12 of line 18 is not UTF-8",
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


# --------------------------------------------------------------------------- a version folder that says another version


def _at(scaffold: Path, folder: Path, version: str) -> Path:
    """A copy of the scaffold in ``folder`` whose catalogue.toml declares ``version``."""
    shutil.copytree(scaffold, folder)
    toml = folder / "catalogue.toml"
    toml.write_text(toml.read_text("utf-8").replace('version = "0.1.0"', f'version = "{version}"', 1), "utf-8")
    return folder


def test_a_version_folder_whose_catalogue_says_another_version_is_refused(
    scaffold: Path, signer: KeyPair, tmp_path: Path
) -> None:
    """catalogues/NAME/VERSION is init's layout: a copied 0.5.0 whose version was never bumped does not build 0.2.0."""
    source = _at(scaffold, tmp_path / "my-flow" / "0.5.0", "0.2.0")

    built = pack("build", source, "--key", signer.private_path, "--out", tmp_path / "rel")

    said = refusal(built.stderr)
    assert built.returncode == 1
    assert said.error == (
        f"error: catalogue_invalid: {source / 'catalogue.toml'}: the source folder names version 0.5.0 but "
        "[catalogue].version is '0.2.0': the build would publish 0.2.0, not 0.5.0"
    )
    assert said.next == (
        'set version = "0.5.0" under [catalogue] in catalogue.toml, or, if 0.2.0 is meant, move the source to '
        f"{tmp_path / 'my-flow' / '0.2.0'} (a version folder holds that version's source)"
    )
    assert not (tmp_path / "rel").exists()
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


# --------------------------------------------------------------------------- editor backups and patch leftovers

LEFTOVER_NEXT = (
    "next: delete them (editor backups, swap files, patch leftovers), or move them out of the catalogue source: "
    "everything in it ships"
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
    assert said.error == (
        f"error: path_unsafe: {source / leftover}: editor backups, swap files or patch leftovers would ship in the "
        f"release (1): {leftover}"
    )
    assert f"next: {said.next}" == LEFTOVER_NEXT
    assert not (tmp_path / "rel").exists()


def test_every_leftover_is_named_in_the_one_refusal(scaffold: Path, signer: KeyPair, tmp_path: Path) -> None:
    """All of them, in path order, none that only looks like one (``tilde~name.md``, ``orig.md``, ``#issue.md``)."""
    source = _copy(scaffold, tmp_path)
    names = [f"assets/prompts/brief-{n}.md~" for n in range(7)]
    for name in [*names, "assets/prompts/tilde~name.md", "assets/prompts/orig.md", "assets/prompts/#issue.md"]:
        (source / name).write_bytes(b"x")

    built = pack("build", source, "--key", signer.private_path, "--out", tmp_path / "rel")

    said = refusal(built.stderr)
    assert built.returncode == 1 and said.error.startswith(f"error: path_unsafe: {source / names[0]}: ")
    assert said.error.endswith(f"(7): {', '.join(names[:5])} and 2 more")
    for name in names:
        (source / name).unlink()
    assert pack("build", source, "--key", signer.private_path, "--out", tmp_path / "rel").returncode == 0
