"""Staging a release: the catalogue copied into the build's work directory, then flushed to disk.

``copy_catalogue`` copies every source file byte for byte into the work
directory (hashing what it copies, on every core for a large source, with a
progress bar on a terminal), and ``make_durable`` flushes the finished release
once before :mod:`rimthan_packager.build` renames it into place. Release
modes do not depend on the umask: files 0644, directories 0755.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from rimthan_workflow_registry.release import FileEntry, copy_threads, first_failure

from .fsutil import fsync_dir, fsync_file, sync_filesystem, umask_keeps
from .source import READ_CHUNK, SourceFiles

PROGRESS_MIN_BYTES = 16 * 1024 * 1024
PROGRESS_MIN_FILES = 500
FSYNC_THREADS = 16  # only where there is no syncfs: fsync per file, on threads so the file system batches them
_COPY_BATCH = 64  # files per copy task
_FILE_MODE = 0o644
_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


@dataclass(frozen=True, eq=False, repr=False)  # never compared, hashed or shown (test_build_dataclasses)
class Copied:
    """The catalogue as copied: manifest entries (sorted by path), where they went, the directories made."""

    entries: list[FileEntry]
    target: Path
    dirs: list[Path]

    def files(self) -> list[Path]:
        """The files written (needed only where there is no ``syncfs``)."""
        return [self.target / entry.path for entry in self.entries]


def copy_catalogue(source: SourceFiles, target: Path, progress: bool) -> Copied:
    """Copy every source file byte for byte, hashing what is copied (one read), on every core for a large source.

    Directories are made first, in the main thread; files are copied in
    batches (sorted by path) by core ``first_failure``, with one read buffer
    per thread. Entries keep the sorted order whichever thread copied them, and
    the first failing file in that order is the refusal. Nothing is flushed
    here: :func:`make_durable` flushes the whole release once, before it is published.
    """
    large = source.total_size >= PROGRESS_MIN_BYTES or len(source.sizes) >= PROGRESS_MIN_FILES
    bar = _progress_bar(source.total_size) if progress and large else _NoProgress()
    paths = sorted(source.paths)
    dirs = _make_dirs(target, paths)
    base = str(target)
    chmod = not umask_keeps(_FILE_MODE)  # the umask would narrow the mode: set it exactly, file by file
    copied: list[FileEntry | None] = [None] * len(paths)
    buffers = _ThreadBuffers(min(READ_CHUNK, max(source.sizes.values(), default=0) + 1))
    bar_lock = threading.Lock()

    def copy(batch: Sequence[tuple[int, str]]) -> None:
        buffer = buffers.get()
        for index, path in batch:
            copied[index] = _copy_file(source, path, f"{base}/{path}", buffer, chmod)
        with bar_lock:
            bar.update(sum(source.sizes[path] for _, path in batch))

    numbered = list(enumerate(paths))
    batches = [numbered[i : i + _COPY_BATCH] for i in range(0, len(numbered), _COPY_BATCH)]
    try:
        failure = first_failure(copy, batches, copy_threads(len(paths), source.total_size))
    finally:
        bar.close()
    if failure is not None:
        raise failure
    entries = [entry for entry in copied if entry is not None]
    return Copied(entries=entries, target=target, dirs=dirs)


class _ThreadBuffers:
    """One read buffer per copying thread, made on its first batch."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._local = threading.local()

    def get(self) -> memoryview:
        buffer: memoryview | None = getattr(self._local, "buffer", None)
        if buffer is None:
            buffer = self._local.buffer = memoryview(bytearray(self._size))
        return buffer


class _Progress(Protocol):
    def update(self, n: int) -> object: ...

    def close(self) -> None: ...


class _NoProgress:
    """No bar: a build that is small, piped or asked for JSON does not import tqdm at all."""

    def update(self, n: int) -> None:
        return None

    def close(self) -> None:
        return None


def _progress_bar(total: int) -> _Progress:
    from tqdm import tqdm

    return tqdm(total=total, unit="B", unit_scale=True, desc="building", file=sys.stderr, leave=False)


def _copy_file(source: SourceFiles, path: str, dest: str, buffer: memoryview, chmod: bool) -> FileEntry:
    fd = os.open(dest, _FILE_FLAGS, _FILE_MODE)
    try:
        if chmod:
            os.fchmod(fd, _FILE_MODE)
        return source.copy_to(path, fd, buffer)
    finally:
        os.close(fd)


def _make_dirs(target: Path, paths: list[str]) -> list[Path]:
    """``target`` and every directory the files need (mode 0755), parents first; the directories made."""
    names = sorted(_directories(paths))  # "a" sorts before "a/b"
    made = [target, *(target / name for name in names)]
    for directory in made:
        directory.mkdir(mode=0o755)
        os.chmod(directory, 0o755)
    return made


def make_durable(work: Path, copied: Callable[[], list[Path]], written: list[Path], dirs: list[Path]) -> None:
    """Flush the release before it is renamed into place: one ``syncfs``, like the ``sync -f`` of a copy.

    Where the platform has no ``syncfs``, every file is fsynced (on several
    threads: fsync releases the GIL and the file system batches the commits),
    then every directory, deepest first.
    """
    if sync_filesystem(work):
        return
    from concurrent.futures import ThreadPoolExecutor  # only here: it imports logging

    with ThreadPoolExecutor(max_workers=FSYNC_THREADS) as pool:
        list(pool.map(fsync_file, [*copied(), *written]))
    for directory in sorted(dirs, key=lambda d: len(d.parts), reverse=True):
        fsync_dir(directory)


def _directories(paths: list[str]) -> set[str]:
    """Every directory holding one of ``paths``, at any depth: ``["a/b/c.md"]`` -> ``{"a", "a/b"}``.

    Each file only names its parent (10,000 files share a few hundred); the
    ancestors are walked once per directory, not once per file.
    """
    found: set[str] = set()
    for parent in {path.rpartition("/")[0] for path in paths}:
        while parent and parent not in found:
            found.add(parent)
            parent = parent.rpartition("/")[0]
    return found
