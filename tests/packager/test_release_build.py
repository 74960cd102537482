"""Building, co-signing and checking releases: reproducibility, immutability, k-of-n, standard tools."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from rimthan_packager.build import build_release as packager_build
from rimthan_packager.build import source_date_epoch
from rimthan_packager.cosign import sign_release
from rimthan_workflow_registry.errors import CatalogueError, FailureCode, RegistryError, ReleaseVerificationError
from rimthan_workflow_registry.release.format import signature_name
from rimthan_workflow_registry.release.manifest_parse import parse_manifest
from rimthan_workflow_registry.release.trust import TrustStore, load_trust
from rimthan_workflow_registry.release.verify import verify_release
from support.releases import (
    PACKAGED_VERSIONS,
    KeyPair,
    build_release,
    make_keypair,
    packaged_source,
    trust_dir,
    trust_file,
    write_non_utf8_name,
)

F = FailureCode


def tree_bytes(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# --------------------------------------------------------------------------- reproducibility


def test_two_builds_are_byte_identical(tmp_path: Path, scaffold: Path, keypair: KeyPair) -> None:
    first = build_release(scaffold, tmp_path / "one", [keypair])
    second = build_release(scaffold, tmp_path / "two", [keypair])
    assert first.name == second.name == "demo-0.1.0"
    assert (first / "manifest.json").read_bytes() == (second / "manifest.json").read_bytes()
    sig = f"signatures/{signature_name(keypair.key_id)}"
    assert (first / sig).read_bytes() == (second / sig).read_bytes()
    assert tree_bytes(first) == tree_bytes(second)


@pytest.mark.parametrize("threaded", [False, True])
@pytest.mark.parametrize("has_syncfs", [True, False])
def test_every_durability_and_copy_path_builds_the_same_release(
    tmp_path: Path, scaffold: Path, keypair: KeyPair, monkeypatch: pytest.MonkeyPatch, threaded: bool, has_syncfs: bool
) -> None:
    """One syncfs or an fsync per file (no syncfs), one thread or a pool: the same bytes, and they verify."""
    from rimthan_packager import staging

    reference = build_release(scaffold, tmp_path / "reference", [keypair])
    monkeypatch.setattr(staging, "copy_threads", lambda files, total: 2 if threaded else 1)
    monkeypatch.setattr(staging, "_COPY_BATCH", 1)
    if not has_syncfs:
        monkeypatch.setattr(staging, "sync_filesystem", lambda path: False)
    built = build_release(scaffold, tmp_path / "built", [keypair])
    assert tree_bytes(built) == tree_bytes(reference)
    assert verify_release(built, load_trust(trust_dir(tmp_path / "trust", keypair))).signer_key_ids == (keypair.key_id,)


@pytest.mark.parametrize("umask", [0o000, 0o022, 0o077, 0o177])
def test_release_modes_do_not_depend_on_the_umask(tmp_path: Path, scaffold: Path, keypair: KeyPair, umask: int) -> None:
    """Files 0644 and directories 0755 whatever the umask (a file mode is set only where the umask narrows it)."""
    old = os.umask(umask)
    try:
        built = build_release(scaffold, tmp_path / "out", [keypair])
    finally:
        os.umask(old)
    modes = {p.relative_to(built).as_posix(): stat.S_IMODE(p.stat().st_mode) for p in built.rglob("*")}
    assert modes
    assert {path: mode for path, mode in modes.items() if mode != (0o755 if (built / path).is_dir() else 0o644)} == {}


def test_copied_source_builds_identically(tmp_path: Path, scaffold: Path, keypair: KeyPair) -> None:
    """Nothing about the source's location or timestamps leaks into the release."""
    moved = tmp_path / "elsewhere" / "src"
    shutil.copytree(scaffold, moved)
    for path in moved.rglob("*"):
        os.utime(path, (1, 1))
    first = build_release(scaffold, tmp_path / "one", [keypair])
    second = build_release(moved, tmp_path / "two", [keypair])
    assert tree_bytes(first) == tree_bytes(second)


def test_source_date_epoch_is_the_only_time(tmp_path: Path, scaffold: Path, keypair: KeyPair) -> None:
    plain = parse_manifest((build_release(scaffold, tmp_path / "a", [keypair]) / "manifest.json").read_bytes())
    assert plain.release.created is None
    pinned = build_release(scaffold, tmp_path / "b", [keypair], created=1_700_000_000)
    again = build_release(scaffold, tmp_path / "c", [keypair], created=1_700_000_000)
    assert parse_manifest((pinned / "manifest.json").read_bytes()).release.created == 1_700_000_000
    assert tree_bytes(pinned) == tree_bytes(again)
    assert (pinned / "manifest.json").read_bytes() != (tmp_path / "a" / "demo-0.1.0" / "manifest.json").read_bytes()


def test_source_date_epoch_parsing() -> None:
    assert source_date_epoch({}) is None
    assert source_date_epoch({"SOURCE_DATE_EPOCH": "1700000000"}) == 1_700_000_000
    with pytest.raises(RegistryError) as info:
        source_date_epoch({"SOURCE_DATE_EPOCH": "yesterday"})
    assert info.value.path == "SOURCE_DATE_EPOCH"


# --------------------------------------------------------------------------- immutability and crash safety


def test_existing_release_is_never_overwritten(tmp_path: Path, scaffold: Path, keypair: KeyPair) -> None:
    release = build_release(scaffold, tmp_path / "rel", [keypair])
    before = tree_bytes(release)
    (scaffold / "assets" / "prompts" / "brief.md").write_text("changed source, same version\n")
    with pytest.raises(RegistryError) as info:
        build_release(scaffold, tmp_path / "rel", [keypair])
    assert info.value.code is F.RELEASE_EXISTS
    assert info.value.path == str(release)
    assert tree_bytes(release) == before
    assert sorted(p.name for p in (tmp_path / "rel").iterdir()) == ["demo-0.1.0"]  # no leftovers


def test_empty_directory_under_release_name_is_refused(tmp_path: Path, scaffold: Path, keypair: KeyPair) -> None:
    (tmp_path / "rel" / "demo-0.1.0").mkdir(parents=True)
    with pytest.raises(RegistryError) as info:
        build_release(scaffold, tmp_path / "rel", [keypair])
    assert info.value.code is F.RELEASE_EXISTS
    assert list((tmp_path / "rel" / "demo-0.1.0").iterdir()) == []


def test_failed_self_check_publishes_nothing(tmp_path: Path, scaffold: Path, keypair: KeyPair) -> None:
    other = make_keypair(tmp_path / "other", "bob")
    wrong_trust = load_trust(trust_dir(tmp_path / "wrong-trust", other))
    with pytest.raises(ReleaseVerificationError) as info:
        packager_build(scaffold, [keypair.signing_key], tmp_path / "rel", trust=wrong_trust)
    assert info.value.code is F.SIGNATURE_UNTRUSTED
    assert info.value.path == str(tmp_path / "rel" / "demo-0.1.0" / "signatures")
    assert not (tmp_path / "rel").exists()  # the --out the build made is taken back with its work directory


def test_invalid_catalogue_is_refused_before_writing(tmp_path: Path, scaffold: Path, keypair: KeyPair) -> None:
    workflow = scaffold / "workflows" / "demo.toml"
    workflow.write_text(workflow.read_text().replace('next = "write-summary"', 'next = "nowhere"'))
    with pytest.raises(CatalogueError) as info:
        build_release(scaffold, tmp_path / "rel", [keypair])
    assert info.value.code is F.REFERENCE_UNRESOLVED
    assert info.value.path == str(workflow)
    assert not (tmp_path / "rel").exists() or list((tmp_path / "rel").iterdir()) == []


# --------------------------------------------------------------------------- source refusals


def test_source_symlink_refused(tmp_path: Path, scaffold: Path, keypair: KeyPair) -> None:
    link = scaffold / "assets" / "prompts" / "alias.md"
    link.symlink_to(scaffold / "assets" / "prompts" / "brief.md")
    with pytest.raises(CatalogueError) as info:
        build_release(scaffold, tmp_path / "rel", [keypair])
    assert info.value.code is F.FILE_TYPE_FORBIDDEN
    assert info.value.path == str(link)


@pytest.mark.parametrize("name", [".DS_Store", ".git", "__pycache__"])
def test_source_hidden_entries_refused(tmp_path: Path, scaffold: Path, keypair: KeyPair, name: str) -> None:
    hidden = scaffold / "assets" / name
    if name.startswith(".D"):
        hidden.write_bytes(b"\0")
    else:
        hidden.mkdir()
        (hidden / "x").write_text("x")
    with pytest.raises(CatalogueError) as info:
        build_release(scaffold, tmp_path / "rel", [keypair])
    assert info.value.code is F.PATH_UNSAFE
    assert info.value.path == str(hidden)


def test_source_fifo_refused(tmp_path: Path, scaffold: Path, keypair: KeyPair) -> None:
    fifo = scaffold / "assets" / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(CatalogueError) as info:
        build_release(scaffold, tmp_path / "rel", [keypair])
    assert info.value.code is F.FILE_TYPE_FORBIDDEN
    assert info.value.path == str(fifo)


def test_source_non_utf8_name_refused(tmp_path: Path, scaffold: Path, keypair: KeyPair) -> None:
    write_non_utf8_name(scaffold / "assets")
    with pytest.raises(CatalogueError) as info:
        build_release(scaffold, tmp_path / "rel", [keypair])
    assert info.value.code is F.PATH_UNSAFE
    assert info.value.path is not None and "bad-" in info.value.path


def test_source_without_catalogue_toml(tmp_path: Path, keypair: KeyPair) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "README.md").write_text("x")
    with pytest.raises(CatalogueError) as info:
        build_release(tmp_path / "src", tmp_path / "rel", [keypair])
    assert info.value.code is F.CATALOGUE_INVALID
    assert info.value.path == str(tmp_path / "src" / "catalogue.toml")


# --------------------------------------------------------------------------- k-of-n


def test_two_of_three_co_signing(tmp_path: Path, scaffold: Path) -> None:
    alice, bob, carol = (make_keypair(tmp_path / "keys", n) for n in ("alice", "bob", "carol"))
    trust = load_trust(trust_file(tmp_path / "trust", [alice, bob, carol], threshold=2))
    release = build_release(scaffold, tmp_path / "rel", [alice])

    with pytest.raises(ReleaseVerificationError) as info:
        verify_release(release, trust)
    assert info.value.code is F.SIGNATURE_THRESHOLD_NOT_MET
    assert info.value.path == str(release / "signatures")

    manifest_before = (release / "manifest.json").read_bytes()
    files_before = {k: v for k, v in tree_bytes(release).items() if not k.startswith("signatures/")}
    sign_release(release, bob.signing_key)
    assert (release / "manifest.json").read_bytes() == manifest_before
    assert {k: v for k, v in tree_bytes(release).items() if not k.startswith("signatures/")} == files_before

    verified = verify_release(release, trust)
    assert set(verified.signer_key_ids) == {alice.key_id, bob.key_id}


def test_same_signature_under_another_name_does_not_count(tmp_path: Path, scaffold: Path) -> None:
    alice, bob, carol = (make_keypair(tmp_path / "keys", n) for n in ("alice", "bob", "carol"))
    trust = load_trust(trust_file(tmp_path / "trust", [alice, bob, carol], threshold=2))
    release = build_release(scaffold, tmp_path / "rel", [alice])
    alice_sig = release / "signatures" / signature_name(alice.key_id)

    # Copied under a trusted key's name: it does not verify for that key, so the release fails closed.
    copied = release / "signatures" / signature_name(bob.key_id)
    shutil.copyfile(alice_sig, copied)
    with pytest.raises(ReleaseVerificationError) as info:
        verify_release(release, trust)
    assert info.value.code is F.SIGNATURE_INVALID
    assert info.value.path == str(copied)
    copied.unlink()

    # Copied under an untrusted key id's name: ignored, still one valid signature.
    stranger = make_keypair(tmp_path / "keys", "stranger")
    shutil.copyfile(alice_sig, release / "signatures" / signature_name(stranger.key_id))
    with pytest.raises(ReleaseVerificationError) as info:
        verify_release(release, trust)
    assert info.value.code is F.SIGNATURE_THRESHOLD_NOT_MET


def test_signing_twice_with_one_key_is_refused(tmp_path: Path, signed_release: Path, keypair: KeyPair) -> None:
    sig = signed_release / "signatures" / signature_name(keypair.key_id)
    before = sig.read_bytes()
    with pytest.raises(RegistryError) as info:
        sign_release(signed_release, keypair.signing_key)
    assert info.value.code is F.DESTINATION_EXISTS
    assert info.value.path == str(sig)
    assert sig.read_bytes() == before


def test_co_signer_refuses_a_tampered_release(tmp_path: Path, signed_release: Path) -> None:
    bob = make_keypair(tmp_path / "keys", "bob")
    target = signed_release / "catalogue" / "catalogue.toml"
    target.write_bytes(target.read_bytes().replace(b"Demo", b"Evil", 1))
    with pytest.raises(ReleaseVerificationError) as info:
        sign_release(signed_release, bob.signing_key)
    assert info.value.code is F.FILE_DIGEST_MISMATCH
    assert not (signed_release / "signatures" / signature_name(bob.key_id)).exists()


def test_duplicate_key_flags_produce_one_signature(tmp_path: Path, scaffold: Path, keypair: KeyPair) -> None:
    release = build_release(scaffold, tmp_path / "rel", [keypair, keypair])
    assert [p.name for p in (release / "signatures").iterdir()] == [signature_name(keypair.key_id)]


# --------------------------------------------------------------------------- standard tools


def test_release_verifies_with_sha256sum_and_openssl(signed_release: Path, keypair: KeyPair) -> None:
    sha256sum = shutil.which("sha256sum")
    openssl = shutil.which("openssl")
    if sha256sum is None or openssl is None:
        pytest.skip("sha256sum or openssl is not installed on this machine")
    checked = subprocess.run(
        [sha256sum, "-c", "SHA256SUMS"], cwd=signed_release, capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count(": OK") == len(parse_manifest((signed_release / "manifest.json").read_bytes()).files)

    sig = f"signatures/{signature_name(keypair.key_id)}"
    command = [
        openssl,
        "pkeyutl",
        "-verify",
        "-pubin",
        "-inkey",
        str(keypair.public_path),
        "-rawin",
        "-in",
        "manifest.json",
        "-sigfile",
        sig,
    ]
    good = subprocess.run(command, cwd=signed_release, capture_output=True, text=True, check=False)
    assert good.returncode == 0, good.stdout + good.stderr
    assert "Signature Verified Successfully" in good.stdout

    digest = hashlib.sha256((signed_release / "manifest.json").read_bytes()).hexdigest()
    summed = subprocess.run(
        [sha256sum, "manifest.json"], cwd=signed_release, capture_output=True, text=True, check=True
    )
    assert summed.stdout.split()[0] == digest
    assert (
        verify_release(signed_release, TrustStore.from_public_keys([keypair.signing_key.public_key])).manifest_digest
        == f"sha256:{digest}"
    )

    # and the standard tools notice tampering too
    target = signed_release / "catalogue" / "catalogue.toml"
    target.write_bytes(target.read_bytes() + b"#")
    assert (
        subprocess.run([sha256sum, "-c", "SHA256SUMS"], cwd=signed_release, capture_output=True, check=False).returncode
        != 0
    )
    (signed_release / "manifest.json").write_bytes((signed_release / "manifest.json").read_bytes() + b" ")
    bad = subprocess.run(command, cwd=signed_release, capture_output=True, text=True, check=False)
    assert bad.returncode != 0


# --------------------------------------------------------------------------- the packaged catalogue


@pytest.mark.parametrize("version", PACKAGED_VERSIONS)
def test_packaged_catalogue_builds_and_verifies(tmp_path: Path, keypair: KeyPair, trust: Path, version: str) -> None:
    source = packaged_source(version)
    assert (source / "catalogue.toml").is_file(), f"packaged catalogue {version} is missing"
    release = build_release(source, tmp_path / "rel", [keypair])
    assert release.name == f"research-decision-{version}"
    verified = verify_release(release, load_trust(trust), expected_scope="rimthan.research")
    assert verified.release_id == f"research-decision@{version}"
    workflow = verified.catalogue.workflows[0]
    assert workflow.id == "research-decision"
    assert workflow.steps[0].id == "setup-workspace"
    assert len(verified.catalogue.host_adapters) >= 2
    for entry in verified.manifest.files:
        assert verified.read_file(entry.path) == (source / entry.path).read_bytes()


def test_progress_bar_on_large_builds(
    tmp_path: Path, scaffold: Path, keypair: KeyPair, capsys: pytest.CaptureFixture[str]
) -> None:
    from rimthan_packager.staging import PROGRESS_MIN_FILES

    many = scaffold / "assets" / "many"
    many.mkdir()
    for index in range(PROGRESS_MIN_FILES):
        (many / f"note-{index:04d}.md").write_text(f"note {index}\n")
    packager_build(scaffold, [keypair.signing_key], tmp_path / "quiet")
    assert "building" not in capsys.readouterr().err
    packager_build(scaffold, [keypair.signing_key], tmp_path / "loud", progress=True)
    assert "building" in capsys.readouterr().err
    assert tree_bytes(tmp_path / "quiet" / "demo-0.1.0") == tree_bytes(tmp_path / "loud" / "demo-0.1.0")
