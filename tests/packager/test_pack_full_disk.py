"""``rimthan-pack build``, ``pull`` and ``init`` onto a file system that fills part way, or is read-only (real tmpfs).

A full disk used to be said without the place (``error: io_error: No space
left on device``) on a build, and as the registry's fault on a pull
(``oci_registry_error`` with advice about registry addresses and
credentials). Now both name the directory written and say to free space on
it; nothing is left behind, and the same command succeeds once there is room.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.oci import pack, pull, push, tree_bytes
from support.refusals import refusal
from support.registry import LocalRegistry
from support.releases import KeyPair, make_keypair, scaffold_source, trust_dir
from support.small_disk import fill, grow, read_only_view, small_tmpfs

BIG_FILES = 40
BIG_FILE_BYTES = 64 * 1024  # 2.5 MiB in all: more than the 2 MiB tmpfs holds


@pytest.fixture
def big_source(tmp_path: Path) -> Path:
    source = scaffold_source(tmp_path / "source")
    bulk = source / "assets" / "bulk"
    bulk.mkdir(parents=True)
    for index in range(BIG_FILES):
        (bulk / f"f{index:03d}.md").write_text(os.urandom(BIG_FILE_BYTES // 2).hex(), "utf-8")
    return source


def test_a_build_onto_a_disk_that_fills_names_out_leaves_nothing_and_builds_once_there_is_room(
    tmp_path: Path, big_source: Path, keypair: KeyPair
) -> None:
    with small_tmpfs(tmp_path / "disk", "2m") as disk:
        out = disk / "releases"
        proc = pack("build", big_source, "--key", keypair.private_path, "--out", out)
        assert proc.returncode == 1, proc.stdout
        said = refusal(proc.stderr)
        assert said.error.startswith(f"error: io_error: {out}: writing demo-"), said.error
        assert "No space left on device" in said.error
        assert said.next == f"free disk space on the file system holding {out} and run again"
        assert list(disk.iterdir()) == []  # no release, no work directory, not even the --out it made
        grow(disk, "8m")
        again = pack("build", big_source, "--key", keypair.private_path, "--out", out)
        assert again.returncode == 0, again.stderr
        assert [p.name for p in out.iterdir()] == [f"demo-{_version(big_source)}"]


def _version(source: Path) -> str:
    import tomllib

    return str(tomllib.loads((source / "catalogue.toml").read_text("utf-8"))["catalogue"]["version"])


def test_a_pull_onto_a_disk_that_fills_is_io_error_naming_out_and_pulls_once_there_is_room(
    tmp_path: Path, big_source: Path, keypair: KeyPair, registry: LocalRegistry
) -> None:
    built = pack("build", big_source, "--key", keypair.private_path, "--out", tmp_path / "built")
    assert built.returncode == 0, built.stderr
    (release,) = (tmp_path / "built").iterdir()
    trust = trust_dir(tmp_path / "trust", keypair)
    ref = registry.ref("rimthan/big", _version(big_source))
    push(release, ref, trust)
    with small_tmpfs(tmp_path / "disk", "2m") as disk:
        out = disk / "releases"
        proc = pull(ref, trust, out)
        assert proc.returncode == 1, proc.stdout
        said = refusal(proc.stderr)
        assert said.error.startswith(f"error: io_error: {out}: writing catalogue/"), said.error
        assert said.error.endswith("No space left on device"), said.error
        assert said.next == f"free disk space on the file system holding {out} and run again"
        assert not out.exists()  # no release, no staging directory: the --out the pull made is taken back
        grow(disk, "8m")
        again = pull(ref, trust, out)
        assert again.returncode == 0, again.stderr
        assert tree_bytes(out / release.name) == tree_bytes(release)


def test_a_pull_into_a_read_only_directory_is_io_error_naming_it(
    tmp_path: Path, packaged_releases: dict[str, Path], trust: Path, registry: LocalRegistry
) -> None:
    ref = registry.ref("rimthan/research", "1.2.0")
    push(packaged_releases["1.2.0"], ref, trust)
    (tmp_path / "writable").mkdir()
    with read_only_view(tmp_path / "writable", tmp_path / "view") as view:
        proc = pull(ref, trust, view)
        said = refusal(proc.stderr)
        assert proc.returncode == 1
        assert said.error.startswith(f"error: io_error: {view}: making the download directory: Read-only"), said
        assert said.next == f"{view} is on a read-only file system: choose a writable path"


def test_init_on_a_full_disk_names_the_source_leaves_nothing_and_works_once_there_is_room(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "disk", "128k") as disk:
        filler = fill(disk)
        filler.write_bytes(filler.read_bytes()[: -8 * 1024])  # room for a file or two of the scaffold, not all
        source = disk / "my-flow" / "0.1.0"
        full = pack("init", source)
        assert full.returncode == 1
        error, said = full.stderr.splitlines()
        assert error.startswith(f"error: io_error: {source}: writing the scaffold, so nothing was left: No space")
        assert said == f"next: free disk space on the file system holding {source} and run again"
        assert sorted(p.name for p in disk.iterdir()) == ["fill"]
        filler.unlink()
        assert pack("init", source).returncode == 0


def test_sign_on_a_full_disk_names_the_signature_leaves_nothing_and_signs_once_there_is_room(
    tmp_path: Path, keypair: KeyPair
) -> None:
    colleague = make_keypair(tmp_path / "keys", "colleague")
    with small_tmpfs(tmp_path / "disk", "512k") as disk:
        assert (
            pack("build", scaffold_source(tmp_path / "source"), "--key", keypair.private_path, "--out", disk).returncode
            == 0
        )
        release = disk / "demo-0.1.0"
        before = tree_bytes(release)
        filler = fill(disk)
        full = pack("sign", release, "--key", colleague.private_path)
        assert full.returncode == 1
        signature = release / "signatures" / f"{colleague.key_id}.sig"
        said = refusal(full.stderr)
        assert said.error.startswith(f"error: io_error: {signature}: writing the signature, so the release was not")
        assert said.next == f"free disk space on the file system holding {signature} and run again"
        assert tree_bytes(release) == before and sorted(p.name for p in disk.iterdir()) == ["demo-0.1.0", "fill"]
        filler.unlink()
        assert pack("sign", release, "--key", colleague.private_path).returncode == 0


@pytest.mark.parametrize("command", ["build", "sign"])
def test_build_and_sign_on_a_read_only_file_system_name_what_the_user_gave(
    command: str, tmp_path: Path, keypair: KeyPair
) -> None:
    """Both named their own hidden temporary path (``.demo-0.1.0.building-*``, ``.demo-0.1.0.sig-*``) as the place
    to fix, a path nobody typed: now build names --out and sign the signature, and nothing is written."""
    colleague = make_keypair(tmp_path / "keys", "colleague")
    (tmp_path / "writable").mkdir()
    source = scaffold_source(tmp_path / "source")
    if command == "sign":
        assert pack("build", source, "--key", keypair.private_path, "--out", tmp_path / "writable").returncode == 0
    before = tree_bytes(tmp_path / "writable")
    with read_only_view(tmp_path / "writable", tmp_path / "view") as view:
        if command == "build":
            proc, named = pack("build", source, "--key", keypair.private_path, "--out", view), view
            doing = "writing demo-0.1.0, so nothing was published"
        else:
            named = view / "demo-0.1.0" / "signatures" / f"{colleague.key_id}.sig"
            proc = pack("sign", view / "demo-0.1.0", "--key", colleague.private_path)
            doing = "writing the signature, so the release was not signed"
        said = refusal(proc.stderr)
        assert proc.returncode == 1
        assert said.error.startswith(f"error: io_error: {named}: {doing}: Read-only file system"), said
        assert said.next == f"{named} is on a read-only file system: choose a writable path"
    assert tree_bytes(tmp_path / "writable") == before
