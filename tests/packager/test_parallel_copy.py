"""The packager's copy on several threads: the same release bytes as one thread, and a source that changes is refused.

The copy runs on the real file system with real keys; the only thing a test
steers is the interleaving (which file is being copied when the source
changes), through a wrapper around the per-file copy that then calls it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from rimthan_packager import build, staging
from rimthan_packager.build import build_release as packager_build
from rimthan_packager.source import READ_CHUNK, SourceFiles
from rimthan_workflow_registry.errors import FailureCode, RegistryError
from rimthan_workflow_registry.release import FileEntry, copy_threads
from rimthan_workflow_registry.release.trust import load_trust
from rimthan_workflow_registry.release.verify import verify_release
from support.releases import PACKAGED_VERSIONS, KeyPair, packaged_source, scaffold_source, trust_dir

BULK = "assets/bulk"


def tree_bytes(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _bulky_source(directory: Path, files: int = 200) -> Path:
    """A scaffold plus files of many sizes: empty, tiny, exactly one read buffer, several buffers."""
    source = scaffold_source(directory, "bulk")
    bulk = source / BULK
    bulk.mkdir(parents=True)
    sizes = [0, 1, READ_CHUNK - 1, READ_CHUNK, READ_CHUNK + 1, 3 * READ_CHUNK + 7]
    for index in range(files):
        size = sizes[index] if index < len(sizes) else 64 + index * 37
        (bulk / f"f{index:04d}.bin").write_bytes(os.urandom(size))
    return source


def _build(source: Path, out: Path, key: KeyPair, threads: int, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(staging, "copy_threads", lambda files, total: threads)
    monkeypatch.setattr(staging, "_COPY_BATCH", 3)  # many batches, so the threads interleave
    return packager_build(source, [key.signing_key], out).path


@pytest.mark.parametrize("version", PACKAGED_VERSIONS)
def test_threaded_copy_of_the_packaged_catalogue_is_byte_identical(
    tmp_path: Path, keypair: KeyPair, monkeypatch: pytest.MonkeyPatch, version: str
) -> None:
    one = _build(packaged_source(version), tmp_path / "one", keypair, 1, monkeypatch)
    two = _build(packaged_source(version), tmp_path / "two", keypair, 2, monkeypatch)
    assert tree_bytes(one) == tree_bytes(two)
    assert (one / "manifest.json").read_bytes() == (two / "manifest.json").read_bytes()


@pytest.mark.parametrize("threads", [2, 4])
def test_threaded_copy_of_many_sizes_is_byte_identical_and_verifies(
    tmp_path: Path, keypair: KeyPair, monkeypatch: pytest.MonkeyPatch, threads: int
) -> None:
    source = _bulky_source(tmp_path / "source")
    one = _build(source, tmp_path / "one", keypair, 1, monkeypatch)
    many = _build(source, tmp_path / "many", keypair, threads, monkeypatch)
    assert tree_bytes(one) == tree_bytes(many)
    assert tree_bytes(many / "catalogue") == tree_bytes(source)
    trust = load_trust(trust_dir(tmp_path / "trust", keypair))
    assert verify_release(many, trust).signer_key_ids == (keypair.key_id,)


def test_small_catalogues_copy_on_the_calling_thread() -> None:
    """A 1 MiB catalogue stays on one thread (threads cost more than they save there)."""
    assert copy_threads(100, 1024 * 1024) == 1


Change = Callable[[Path], None]


def _delete(path: Path) -> None:
    path.unlink()


def _grow(path: Path) -> None:
    with path.open("ab") as file:
        file.write(b"appended while the build ran")


def _replace(path: Path) -> None:
    """Same size, new bytes, new inode (an editor's save-by-rename)."""
    fresh = path.with_name("replacement.tmp")
    fresh.write_bytes(bytes(b ^ 0xFF for b in path.read_bytes()))
    os.replace(fresh, path)


def _rewrite_keeping_mtime(path: Path) -> None:
    """Same size, same inode, new bytes, and the old modification time put back (``cp -p``, ``touch -d``)."""
    before = path.stat()
    path.write_bytes(bytes(b ^ 0xFF for b in path.read_bytes()))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(
    ("change", "code", "words"),
    [
        (_delete, FailureCode.FILE_MISSING, "deleted during the build"),
        (_grow, FailureCode.FILE_SIZE_MISMATCH, "changed during the build"),
        (_replace, FailureCode.FILE_DIGEST_MISMATCH, "replaced or rewritten during the build"),
        (_rewrite_keeping_mtime, FailureCode.FILE_DIGEST_MISMATCH, "replaced or rewritten during the build"),
    ],
)
def test_a_source_file_changed_mid_copy_is_refused_and_nothing_is_published(
    tmp_path: Path,
    keypair: KeyPair,
    monkeypatch: pytest.MonkeyPatch,
    threads: int,
    change: Change,
    code: FailureCode,
    words: str,
) -> None:
    """The first file's copy changes the last file; the last file's copy waits until it has."""
    source = _bulky_source(tmp_path / "source", files=60)
    first, last = f"{BULK}/f0000.bin", f"{BULK}/f0059.bin"
    changed = threading.Event()
    real_copy = staging._copy_file

    def steered(src: SourceFiles, path: str, dest: str, buffer: memoryview, chmod: bool) -> FileEntry:
        if path == first:
            change(source / last)
            changed.set()
        elif path == last:
            assert changed.wait(timeout=60)
        return real_copy(src, path, dest, buffer, chmod)

    monkeypatch.setattr(staging, "_copy_file", steered)
    out = tmp_path / "out"
    with pytest.raises(RegistryError) as refused:
        _build(source, out, keypair, threads, monkeypatch)
    assert refused.value.code is code
    assert words in refused.value.message
    assert refused.value.path == str(source / last)
    assert refused.value.next_step is not None and "nothing was published" in refused.value.next_step
    assert not out.exists()  # no release, no hidden work directory, and not the --out the build made


def test_a_source_file_changed_after_the_walk_is_refused_before_it_is_read(
    tmp_path: Path, keypair: KeyPair, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between listing the source and copying it (validation in between), a grown file is refused."""
    source = _bulky_source(tmp_path / "source", files=10)
    real_copy_catalogue = staging.copy_catalogue

    def grow_first(src: SourceFiles, target: Path, progress: bool) -> staging.Copied:
        _grow(source / f"{BULK}/f0003.bin")
        return real_copy_catalogue(src, target, progress)

    monkeypatch.setattr(build, "copy_catalogue", grow_first)
    out = tmp_path / "out"
    with pytest.raises(RegistryError) as refused:
        _build(source, out, keypair, 2, monkeypatch)
    assert refused.value.code is FailureCode.FILE_SIZE_MISMATCH
    assert refused.value.path == str(source / f"{BULK}/f0003.bin")
    assert not out.exists()


@pytest.mark.parametrize(
    ("call", "path"),
    [("read", "catalogue.toml"), ("readv", f"{BULK}/f0004.bin")],  # read while validating; read while copying
)
def test_a_source_file_that_cannot_be_read_is_an_io_error_and_nothing_is_published(
    tmp_path: Path, keypair: KeyPair, monkeypatch: pytest.MonkeyPatch, call: str, path: str
) -> None:
    """A read that fails (EIO from a failing disk, injected: no real device fails on demand) names the file."""
    source = _bulky_source(tmp_path / "source", files=10)
    broken = str(source / path)
    real = getattr(os, call)
    opened: dict[int, str] = {}
    real_open = os.open

    def tracking_open(path: str | os.PathLike[str], flags: int, *args: int, **kwargs: int) -> int:
        fd = real_open(path, flags, *args, **kwargs)
        opened[fd] = os.fspath(path)
        return fd

    def failing(fd: int, *args: object) -> object:
        if opened.get(fd) == broken:
            raise OSError(5, "Input/output error")
        return real(fd, *args)

    monkeypatch.setattr(os, "open", tracking_open)
    monkeypatch.setattr(os, call, failing)
    out = tmp_path / "out"
    with pytest.raises(RegistryError) as refused:
        _build(source, out, keypair, 1, monkeypatch)
    assert refused.value.code is FailureCode.IO_ERROR
    assert refused.value.message == "cannot be read: Input/output error"
    assert refused.value.path == broken
    assert not out.exists() or list(out.iterdir()) == []  # validation refuses before the output exists
