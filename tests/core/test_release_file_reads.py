"""How a large release's files are read and what the load holds meanwhile, on real files and real releases.

The reading thread of :mod:`file_pipeline` opens each file by its name in its
directory's descriptor (one directory open at a time, every descriptor closed
after), with the verdict the one-thread check gives by whole paths, whatever
happens to a directory. While a release is verified the cyclic collector is
paused, and afterwards it is as it was before, whatever the outcome.
"""

from __future__ import annotations

import gc
import os
import shutil
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from rimthan_workflow_registry.errors import RegistryError
from rimthan_workflow_registry.release import file_pipeline, parallel, verify
from rimthan_workflow_registry.release.format import FileEntry
from rimthan_workflow_registry.release.trust import load_trust
from rimthan_workflow_registry.release.verified import check_files
from rimthan_workflow_registry.release.verify import verify_release

LAYOUT = ("a/f0.bin", "a/f1.bin", "a/b/f2.bin", "a/b/f3.bin", "a/f4.bin", "c/f5.bin", "f6.bin", "f7.bin")
DIRECTORY_CHANGES = 5  # "a", "a/b", "a", "c", "" in manifest order


def _release_files(base: Path) -> list[FileEntry]:
    entries = [FileEntry.for_bytes(path, b"file %d\n" % n * 700) for n, path in enumerate(LAYOUT)]
    for n, entry in enumerate(entries):
        (base / entry.path).parent.mkdir(parents=True, exist_ok=True)
        (base / entry.path).write_bytes(b"file %d\n" % n * 700)
    return entries


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, bool]]]:
    """Every ``os.open`` made while the test runs (its path and whether it was relative to a directory), each
    made by the real ``os.open``."""
    calls: list[tuple[str, bool]] = []
    real = os.open

    def recording(path: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        calls.append((str(path), dir_fd is not None))
        return real(path, flags, mode, dir_fd=dir_fd)

    monkeypatch.setattr(os, "open", recording)
    yield calls


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")
def test_the_reading_thread_opens_each_file_by_name_in_its_directory(
    tmp_path: Path, opened: list[tuple[str, bool]]
) -> None:
    entries = _release_files(tmp_path)
    before = _open_fds()
    assert file_pipeline.file_failures(str(tmp_path), [entries[:3], entries[3:6], entries[6:]]) == []
    assert _open_fds() == before  # every directory descriptor closed
    files = [(path, relative) for path, relative in opened if not path.startswith(str(tmp_path))]
    assert files == [(entry.path.rpartition("/")[2], True) for entry in entries]
    directories = [path for path, relative in opened if path.startswith(str(tmp_path))]
    assert len(directories) == DIRECTORY_CHANGES  # one at a time, opened again only when the directory changes


def _gone(directory: Path) -> None:
    shutil.rmtree(directory)


def _now_a_file(directory: Path) -> None:
    shutil.rmtree(directory)
    directory.write_bytes(b"not a directory")


def _now_a_symlink(directory: Path) -> None:
    moved = directory.with_name(directory.name + "-moved")
    directory.rename(moved)
    directory.symlink_to(moved.name)


def _unreadable(directory: Path) -> None:
    directory.chmod(0o300)  # searchable, not listable: a path through it still resolves


DIRECTORY_BREAKS: dict[str, Callable[[Path], None]] = {
    "gone": _gone,
    "now a file": _now_a_file,
    "now a symlink to its contents": _now_a_symlink,
    "not listable": _unreadable,
}


@pytest.mark.parametrize("name", sorted(DIRECTORY_BREAKS))
def test_a_directory_changed_after_the_walk_gives_the_one_thread_verdict(tmp_path: Path, name: str) -> None:
    entries = _release_files(tmp_path)
    DIRECTORY_BREAKS[name](tmp_path / "a" / "b")
    try:
        expected = [(f.code, f.path, f.message) for f in check_files(str(tmp_path), entries)]
        found = file_pipeline.file_failures(str(tmp_path), [entries[:3], entries[3:6], entries[6:]])
        assert [(f.code, f.path, f.message) for f in found if isinstance(f, RegistryError)] == expected
        assert len(found) == len(expected)
    finally:
        if (tmp_path / "a" / "b").is_dir():
            (tmp_path / "a" / "b").chmod(0o700)


def _verifying() -> bool:
    """Whether a release's steps (``verify._examined``) are on this thread's stack."""
    frame: FrameType | None = sys._getframe()
    while frame is not None and frame.f_code is not verify._examined.__code__:
        frame = frame.f_back
    return frame is not None


@pytest.fixture
def collections() -> Iterator[list[int]]:
    """The generation of every collection run inside a release's steps while the test runs, with a threshold
    that collects at almost every allocation."""
    found: list[int] = []

    def record(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and _verifying():
            found.append(info["generation"])

    thresholds, enabled = gc.get_threshold(), gc.isenabled()
    gc.set_threshold(1, 1, 1)
    gc.callbacks.append(record)
    try:
        yield found
    finally:
        gc.callbacks.remove(record)
        gc.set_threshold(*thresholds)
        (gc.enable if enabled else gc.disable)()


def test_no_collection_runs_while_a_release_is_verified(
    signed_release: Path, trust: Path, collections: list[int]
) -> None:
    store = load_trust(trust)
    gc.enable()
    verify_release(signed_release, store)
    assert collections == []
    assert gc.isenabled()


def test_the_collector_is_as_it_was_after_a_refused_release(
    signed_release: Path, trust: Path, collections: list[int]
) -> None:
    store = load_trust(trust)
    next((signed_release / "catalogue").rglob("*.md")).write_bytes(b"changed\n")
    for enabled in (True, False):
        (gc.enable if enabled else gc.disable)()
        with pytest.raises(RegistryError):
            verify_release(signed_release, store)
        assert gc.isenabled() is enabled
    assert collections == []


def test_overlapping_verifications_turn_the_collector_on_after_the_last() -> None:
    gc.enable()
    first, second = parallel.COLLECTOR.held(), parallel.COLLECTOR.held()
    first.__enter__()
    seen: list[bool] = []

    def verifies() -> None:
        second.__enter__()
        seen.append(gc.isenabled())

    other = threading.Thread(target=verifies)
    other.start()
    other.join()
    first.__exit__(None, None, None)
    assert seen == [False] and not gc.isenabled()  # the other verification still runs
    second.__exit__(None, None, None)
    assert gc.isenabled()
