"""What a verified release keeps in memory: exactly the files the catalogue loader read.

Bulk files nobody reads at load time are hashed during verification but not
kept (so a 256 MiB release does not cost 64 MiB of RSS); every later read of
them is re-checked against the signed manifest. Files the loader read (the
ones step payloads serve on every call) are served from the checked copy.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from rimthan_workflow_registry.errors import FailureCode, ReleaseVerificationError
from rimthan_workflow_registry.release.format import FileEntry
from rimthan_workflow_registry.release.trust import load_trust
from rimthan_workflow_registry.release.verified import check_file
from rimthan_workflow_registry.release.verify import verify_release
from support.releases import KeyPair, build_release


def _release_with_data(tmp_path: Path, scaffold: Path, keypair: KeyPair) -> Path:
    data = scaffold / "data"
    data.mkdir()
    (data / "blob.bin").write_bytes(bytes(range(256)) * 64)
    return build_release(scaffold, tmp_path / "releases", [keypair])


def test_only_files_the_loader_read_are_kept(tmp_path: Path, scaffold: Path, keypair: KeyPair, trust: Path) -> None:
    release = _release_with_data(tmp_path, scaffold, keypair)
    verified = verify_release(release, load_trust(trust))
    kept = set(verified.files.cache)
    assert "catalogue.toml" in kept
    assert {w.source for w in verified.catalogue.workflows} <= kept
    assert set(verified.schemas.documents) <= kept
    assert "data/blob.bin" not in kept
    assert "data/blob.bin" in verified.paths


def test_unkept_file_is_rechecked_and_kept_file_is_served_from_the_checked_copy(
    tmp_path: Path, scaffold: Path, keypair: KeyPair, trust: Path
) -> None:
    release = _release_with_data(tmp_path, scaffold, keypair)
    verified = verify_release(release, load_trust(trust))
    original_toml = verified.read_file("catalogue.toml")
    assert verified.read_file("data/blob.bin") == bytes(range(256)) * 64

    (release / "catalogue" / "catalogue.toml").write_bytes(b"swapped after load\n")
    blob = release / "catalogue" / "data" / "blob.bin"
    blob.write_bytes(b"\x00" * blob.stat().st_size)

    assert verified.read_file("catalogue.toml") == original_toml
    with pytest.raises(ReleaseVerificationError) as info:
        verified.read_file("data/blob.bin")
    assert info.value.code is FailureCode.FILE_DIGEST_MISMATCH
    assert info.value.path == str(blob)


def test_check_file_refuses_like_read_checked(tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    path.write_bytes(b"abc")
    good = FileEntry.for_bytes("f.bin", b"abc")
    check_file(path, good, where="f.bin")
    with pytest.raises(ReleaseVerificationError) as info:
        check_file(path, FileEntry.for_bytes("f.bin", b"abd"), where="f.bin")
    assert info.value.code is FailureCode.FILE_DIGEST_MISMATCH
    with pytest.raises(ReleaseVerificationError) as info:
        check_file(path, FileEntry.for_bytes("f.bin", b"abcd"), where="f.bin")
    assert info.value.code is FailureCode.FILE_SIZE_MISMATCH
