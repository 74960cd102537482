"""A release engineer's second pass with the installed ``rimthan-pack``: where to fix, what to do, what is built.

Each test types what the engineer types (a subprocess of the console script) on a source ``rimthan-pack init``
scaffolded and real keys: a file that is not UTF-8 is refused at its line, column and byte offset; an unresolved
reference and a broken trust store say what to do for the reference or file at hand, not their code's generic
step; ``check --releases-dir`` refuses a version that directory already holds as ``build --out`` would; and the
warning of a release no OCI pull takes counts the manifest, checksums and signatures the artifact carries too.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from rimthan_workflow_registry.errors import FailureCode
from rimthan_workflow_registry.release.oci_limits import MAX_LAYER_BYTES, MAX_TOTAL_BYTES
from rimthan_workflow_registry.remediation import REMEDIATION
from support.pack_cli import edit_text, init_scaffold, pack
from support.refusals import refusal
from support.releases import KeyPair, make_keypair


@pytest.fixture(scope="module")
def signer(tmp_path_factory: pytest.TempPathFactory) -> KeyPair:
    return make_keypair(tmp_path_factory.mktemp("signer"), "alice")


@pytest.fixture(scope="module")
def scaffold(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return init_scaffold(tmp_path_factory.mktemp("scaffold"))


def _copy(scaffold: Path, tmp_path: Path, version: str = "0.1.0") -> Path:
    source = tmp_path / "my-flow" / version
    shutil.copytree(scaffold, source)
    if version != "0.1.0":
        edit_text(source / "catalogue.toml", 'version = "0.1.0"', f'version = "{version}"')
    return source


# (file, bytes written, where its first byte that is not UTF-8 is: byte, line, column, offset)
NOT_UTF8 = [
    ("assets/instructions/plan.md", "# Plan\n\nA caf\u00e9 plan\n".encode("latin-1"), "0xe9", 3, 6, 13),
    ("assets/instructions/plan.md", "# Pl\u00e4n \u2014 caf".encode() + b"\xff\n", "0xff", 1, 13, 15),
    ("examples/summary.json", b'{\n  "summary": "caf\xe9"\n}\n', "0xe9", 2, 18, 19),
    ("examples/confirmed-state.json", b'{"x": "\xfe"}', "0xfe", 1, 8, 7),
    ("schemas/summary.schema.json", b'{\n"type": "object",\n"title": "\xc3("\n}', "0xc3", 3, 11, 30),
    ("adapters/claude-code.md", b"ok\n\n\n\x80", "0x80", 4, 1, 5),
]


@pytest.mark.parametrize(("name", "data", "byte", "line", "column", "offset"), NOT_UTF8)
def test_a_file_that_is_not_utf8_is_refused_at_its_line_column_and_byte_offset(
    scaffold: Path, tmp_path: Path, name: str, data: bytes, byte: str, line: int, column: int, offset: int
) -> None:
    """Before, an instruction was refused with "(byte 13)" and the next step "save the file as UTF-8"; a JSON file
    with Python's "'utf-8' codec can't decode byte 0xe9 in position 18"."""
    source = _copy(scaffold, tmp_path)
    (source / name).write_bytes(data)
    checked = pack("check", source)
    said = refusal(checked.stderr)
    where = f"byte {byte} at line {line}, column {column} (byte offset {offset})"
    assert checked.returncode == 1 and f": {source / name}: " in said.error and where in said.error, said
    assert "codec" not in said.error
    assert said.next == (
        f"save {name} as UTF-8 (the editor's encoding setting, or iconv -f ITS_ENCODING -t UTF-8): {where} is not UTF-8"
    )


# (file, text replaced, its replacement, what the next step must say): no misspelling to name
UNRESOLVED = [
    (
        "workflows/my-flow.toml",
        'next = "write-summary"',
        'next = "publish"',
        "in workflows/my-flow.toml, point step plan at one of its steps ('plan', 'setup-workspace', "
        "'write-summary'), or add a step 'publish'",
    ),
    (
        "workflows/my-flow.toml",
        '"reviewer@1.0.0"',
        '"linter@2.0.0"',
        "in workflows/my-flow.toml, name one of its [[validators]] in step write-summary ('reviewer@1.0.0'), or "
        "add a [[validators]] table for 'linter@2.0.0'",
    ),
    (
        "workflows/my-flow.toml",
        '"claude-code@1.0.0"',
        '"codex@1.0.0"',
        "in workflows/my-flow.toml, pin one of this catalogue's adapters ('claude-code@1.0.0') instead of "
        "'codex@1.0.0', or add adapter 'codex@1.0.0' (its TOML in catalogue.toml's host_adapters)",
    ),
    (
        "workflows/my-flow.toml",
        'subagent = "reviewer"',
        'subagent = "brief"',
        "in workflows/my-flow.toml, set validator reviewer@1.0.0's subagent to one of this workflow's subagent "
        "assets ('reviewer'), or add an asset 'brief' of kind \"subagent\" to its assets",
    ),
    (
        "workflows/my-flow.toml",
        'instruction = "assets/instructions/plan.md"',
        'instruction = "docs/planning/how.md"',
        "create docs/planning/how.md (a path from the folder of catalogue.toml), or correct the path "
        "'docs/planning/how.md' in workflows/my-flow.toml",
    ),
    (
        "catalogue.toml",
        '"adapters/claude-code.toml",',
        '"adapters/claude-code.toml", "hosts/other.toml",',
        "create hosts/other.toml next to catalogue.toml, or remove 'hosts/other.toml' from its list there",
    ),
]


@pytest.mark.parametrize(("name", "old", "new", "expected"), UNRESOLVED)
def test_an_unresolved_reference_says_what_to_add_or_correct_for_that_reference(
    scaffold: Path, tmp_path: Path, name: str, old: str, new: str, expected: str
) -> None:
    """Before, each said "add the missing step, asset, schema, validator or adapter, or correct the reference"."""
    source = _copy(scaffold, tmp_path)
    edit_text(source / name, old, new)
    checked = pack("check", source)
    said = refusal(checked.stderr)
    assert checked.returncode == 1 and said.code == "reference_unresolved", said
    assert said.next == expected


def _trust_stores(root: Path, signer: KeyPair) -> dict[str, tuple[Path, str]]:
    """Broken trust stores, each with what its next step must say."""
    root.mkdir()
    empty = root / "empty"
    empty.mkdir()
    private = root / "private-only"
    private.mkdir()
    shutil.copy(signer.private_path, private / "alice.key")
    (root / "keys").mkdir()
    shutil.copy(signer.public_path, root / "keys" / "alice.pub")
    no_keys = root / "no-keys.toml"
    no_keys.write_text("threshold = 1\n", "utf-8")
    too_high = root / "too-high.toml"
    too_high.write_text('threshold = 3\n[[keys]]\nname = "alice"\nfile = "keys/alice.pub"\n', "utf-8")
    put = "put each signer's PREFIX.pub (what rimthan-pack keygen --out PREFIX wrote) into"
    return {
        "empty directory": (empty, f"{put} {empty}, or point --trust at the directory that holds them"),
        "private key only": (private, f"move the private key(s) alice.key out of {private} (trust holds public keys"),
        "missing path": (root / "kees", f"nothing is at {root / 'kees'}; beside it: keys, no-keys.toml"),
        "no [[keys]]": (no_keys, f'in {no_keys}, write threshold = K and one [[keys]] table per signer: name = "WHO"'),
        "threshold past the keys": (
            too_high,
            f"in {too_high}, set threshold to at most 1, or add the 2 more signer key(s) it counts on as [[keys]]",
        ),
    }


def test_a_broken_trust_store_says_what_to_do_for_that_store(scaffold: Path, signer: KeyPair, tmp_path: Path) -> None:
    """Before, each said "point --trust at a directory of *.pub files or a TOML trust file (keys/README.md)"."""
    generic = REMEDIATION[FailureCode.TRUST_STORE_INVALID]
    for case, (store, expected) in _trust_stores(tmp_path / "trust", signer).items():
        built = pack("build", scaffold, "--key", signer.private_path, "--out", tmp_path / "rel", "--trust", store)
        said = refusal(built.stderr)
        assert built.returncode == 1 and said.code == "trust_store_invalid", (case, said)
        assert expected in said.next and said.next != generic, (case, said)
    assert not (tmp_path / "rel").exists()


def test_check_with_releases_dir_refuses_a_version_built_there_as_build_would(
    scaffold: Path, signer: KeyPair, tmp_path: Path
) -> None:
    source = _copy(scaffold, tmp_path)
    releases = tmp_path / "releases"
    before = pack("check", source, "--releases-dir", releases)
    assert before.returncode == 0 and before.stderr == "", before.stderr  # a directory not made yet holds none
    assert pack("build", source, "--key", signer.private_path, "--out", releases).returncode == 0
    built_again = refusal(pack("build", source, "--key", signer.private_path, "--out", releases).stderr)
    checked = pack("check", source, "--releases-dir", releases)
    assert checked.returncode == 1 and refusal(checked.stderr) == built_again
    assert built_again.code == "release_exists" and f": {releases / 'my-flow-0.1.0'}: " in built_again.error
    as_json = pack("check", source, "--releases-dir", releases, "--json")
    assert as_json.returncode == 1 and json.loads(as_json.stdout)["error"]["code"] == "release_exists"


def test_check_and_build_warn_of_a_version_below_one_the_releases_dir_holds(
    scaffold: Path, signer: KeyPair, tmp_path: Path
) -> None:
    """A patch of an old line built beside a newer release: rimthan-mcp activates the newer one, and a verifier
    that served it refuses the older as a rollback. Said by check, and by build (which goes on)."""
    releases = tmp_path / "releases"
    newer = _copy(scaffold, tmp_path, "0.2.0")
    assert pack("build", newer, "--key", signer.private_path, "--out", releases).returncode == 0
    older = _copy(scaffold, tmp_path, "0.1.1")
    checked = pack("check", older, "--releases-dir", releases)
    said = refusal(checked.stderr.replace("warning: ", "error: ", 1))
    assert checked.returncode == 0 and said.code == "rollback_refused", checked.stderr
    assert f": {releases / 'my-flow-0.2.0'}: {releases} holds my-flow 0.2.0, newer than 0.1.1" in said.error
    assert said.next == (
        "give this source a version above 0.2.0 if it should replace it; to serve 0.1.1 after 0.2.0 on "
        "purpose, the operator starts rimthan-mcp serve --lower-floor"
    )
    built = pack("build", older, "--key", signer.private_path, "--out", releases)
    assert built.returncode == 0 and "warning: rollback_refused: " in built.stderr
    assert "my-flow 0.1.1 was built, but rimthan-mcp serve activates 0.2.0" in built.stderr
    assert pack("check", older, "--releases-dir", tmp_path / "none").stderr == ""


def test_check_counts_the_manifest_checksums_and_signature_a_pull_counts_toward_its_total(
    scaffold: Path, tmp_path: Path
) -> None:
    """Catalogue files 100 bytes short of the pull's total bound: the release's manifest.json, SHA256SUMS and
    signature (layers of the pushed artifact too) take it past, so push would refuse it. Before, only the files
    were counted, and check said nothing. The data files are sparse: nothing reads them but their size."""
    source = _copy(scaffold, tmp_path)
    (source / "data").mkdir()
    left = MAX_TOTAL_BYTES - sum(p.stat().st_size for p in source.rglob("*") if p.is_file()) - 100
    index = 0
    while left:
        with (source / "data" / f"part{index:02d}.bin").open("wb") as part:
            part.truncate(min(left, MAX_LAYER_BYTES))
        left -= min(left, MAX_LAYER_BYTES)
        index += 1
    checked = pack("check", source)
    assert checked.returncode == 0, checked.stderr
    warning, next_line = checked.stderr.splitlines()
    assert warning.startswith(f"warning: oci_artifact_invalid: {source}: holds ")
    assert warning.endswith(
        f"bytes with its manifest, checksums and signatures; no OCI pull takes a release of over {MAX_TOTAL_BYTES}, "
        "so rimthan-pack push will refuse this release"
    )
    total = int(warning.split(": holds ")[1].split(" ")[0])
    assert MAX_TOTAL_BYTES < total < MAX_TOTAL_BYTES + 64 * 1024 and next_line.startswith("next: to publish it")


def _schema_changed(scaffold: Path, tmp_path: Path, version: str) -> Path:
    """A new catalogue version whose summary schema requires one more field (and whose example has it)."""
    source = _copy(scaffold, tmp_path, version)
    schema = source / "schemas" / "summary.schema.json"
    document = json.loads(schema.read_text("utf-8"))
    document["required"].append("risks")
    document["properties"]["risks"] = {"type": "array", "items": {"type": "string"}}
    schema.write_text(json.dumps(document, indent=2) + "\n", "utf-8")
    example = source / "examples" / "summary.json"
    example.write_text(json.dumps({**json.loads(example.read_text("utf-8")), "risks": []}) + "\n", "utf-8")
    return source


def _first_release(scaffold: Path, signer: KeyPair, tmp_path: Path) -> Path:
    """The releases directory, holding my-flow 0.1.0 built from the scaffold as it is."""
    releases = tmp_path / "releases"
    assert pack("build", _copy(scaffold, tmp_path), "--key", signer.private_path, "--out", releases).returncode == 0
    return releases


def test_a_workflow_changed_under_its_old_version_is_warned_of_by_check_and_build(
    scaffold: Path, signer: KeyPair, tmp_path: Path
) -> None:
    """A schema made stricter in 0.2.0 while workflow my-flow stayed at 0.1.0: before, check and build said
    nothing, and runs pinned to my-flow@0.1.0 on the 0.1.0 release could then never migrate."""
    releases = _first_release(scaffold, signer, tmp_path)
    source = _schema_changed(scaffold, tmp_path, "0.2.0")
    checked = pack("check", source, "--releases-dir", releases)
    said = refusal(checked.stderr.replace("warning: ", "error: ", 1))
    assert checked.returncode == 0 and said.code == "migration_not_newer", checked.stderr
    assert said.error.endswith(
        f": {releases / 'my-flow-0.1.0'}: workflow my-flow@0.1.0 changed since my-flow-0.1.0 "
        "(schemas/summary.schema.json) but kept its version: runs of it on my-flow-0.1.0 cannot migrate to "
        "my-flow 0.2.0"
    )
    assert said.next == (
        "in workflows/my-flow.toml, give the workflow a version above 0.1.0: a changed workflow is a new version of it"
    )
    built = pack("build", source, "--key", signer.private_path, "--out", releases)
    assert built.returncode == 0 and checked.stderr in built.stderr
    assert pack("check", source).stderr == ""  # no releases dir, nothing to compare with


def test_a_workflow_whose_version_was_bumped_or_that_did_not_change_is_not_warned_of(
    scaffold: Path, signer: KeyPair, tmp_path: Path
) -> None:
    releases = _first_release(scaffold, signer, tmp_path)
    unchanged = _copy(scaffold, tmp_path, "0.1.1")
    bumped = _schema_changed(scaffold, tmp_path, "0.2.0")
    edit_text(bumped / "workflows" / "my-flow.toml", 'version = "0.1.0"', 'version = "0.2.0"')
    for source in (unchanged, bumped):
        checked = pack("check", source, "--releases-dir", releases)
        assert checked.returncode == 0 and checked.stderr == "", checked.stderr


def test_each_file_is_hashed_once_however_many_older_releases_hold_its_workflow(
    scaffold: Path, signer: KeyPair, tmp_path: Path
) -> None:
    """check hashes the new source's files for the comparison: two older releases with the workflow unchanged
    compare it twice, and each file's digest is asked for once."""
    from rimthan_packager.build import check_source
    from rimthan_packager.kept_versions import kept_versions
    from rimthan_workflow_registry.canonical import sha256_hex

    releases = _first_release(scaffold, signer, tmp_path)
    built = pack("build", _copy(scaffold, tmp_path, "0.1.1"), "--key", signer.private_path, "--out", releases)
    assert built.returncode == 0, built.stderr
    checked = check_source(_copy(scaffold, tmp_path, "0.2.0"))
    asked: list[str] = []

    def digest_of(path: str) -> str:
        asked.append(path)
        return sha256_hex(checked.source.read(path))

    assert kept_versions(releases, checked.loaded.catalogue, digest_of) == []
    assert "workflows/my-flow.toml" in asked and len(asked) == len(set(asked)), asked


def test_inspect_against_an_older_release_shows_what_changed_and_which_workflow_kept_its_version(
    scaffold: Path, signer: KeyPair, tmp_path: Path
) -> None:
    """Before, two releases could be told apart only by diffing their directories by hand."""
    releases = _first_release(scaffold, signer, tmp_path)
    newer = _schema_changed(scaffold, tmp_path, "0.2.0")
    (newer / "assets" / "prompts" / "brief.md").unlink()
    edit_text(
        newer / "workflows" / "my-flow.toml", '{ id = "brief", kind = "prompt", file = "assets/prompts/brief.md" },', ""
    )
    edit_text(newer / "workflows" / "my-flow.toml", '"brief",\n', "")
    assert pack("build", newer, "--key", signer.private_path, "--out", releases).returncode == 0
    old, new = releases / "my-flow-0.1.0", releases / "my-flow-0.2.0"
    shown = pack("inspect", new, "--against", old)
    assert shown.returncode == 0, shown.stderr
    section = shown.stdout[shown.stdout.index("changes since my-flow@0.1.0 (sha256:") :].splitlines()[1:]
    assert section == [
        "  removed  assets/prompts/brief.md",
        "  changed  catalogue.toml",
        "  changed  examples/summary.json",
        "  changed  schemas/summary.schema.json",
        "  changed  workflows/my-flow.toml",
        "  workflow my-flow  kept 0.1.0 but workflows/my-flow.toml, schemas/summary.schema.json changed: its runs "
        "cannot migrate",
    ]
    as_json = json.loads(pack("inspect", new, "--against", old, "--json").stdout)["changes"]
    assert as_json["files"]["removed"] == ["assets/prompts/brief.md"] and as_json["files"]["added"] == []
    assert as_json["workflows"] == [
        {
            "id": "my-flow",
            "before": "0.1.0",
            "after": "0.1.0",
            "changed_files": ["workflows/my-flow.toml", "schemas/summary.schema.json"],
        }
    ]
    same = pack("inspect", old, "--against", old)
    assert same.returncode == 0 and same.stdout.endswith(
        "changes since my-flow@0.1.0 (" + same.stdout.split("digest     ")[1].split("\n")[0] + ")\n  no file changed\n"
    )


def test_inspect_against_a_release_of_another_catalogue_is_refused_in_one_line(
    scaffold: Path, signer: KeyPair, tmp_path: Path
) -> None:
    releases = tmp_path / "releases"
    other = tmp_path / "other" / "0.1.0"
    assert pack("init", other).returncode == 0
    for source in (_copy(scaffold, tmp_path), other):
        assert pack("build", source, "--key", signer.private_path, "--out", releases).returncode == 0
    refused = pack("inspect", releases / "my-flow-0.1.0", "--against", releases / "other-0.1.0")
    said = refusal(refused.stderr)
    assert refused.returncode == 1 and refused.stdout == "" and said.code == "catalogue_invalid"
    assert said.error.endswith(
        f": {releases / 'other-0.1.0'}: is a release of catalogue other, not my-flow: --against takes an older "
        "release of the same catalogue"
    )
    assert said.next == "pass --against a release of my-flow (releases/my-flow-VERSION)"
