"""Real full and read-only file systems for tests: a small tmpfs, a read-only bind mount (root only).

Mounting needs root (CAP_SYS_ADMIN). Without it a test skips saying so, and
under ``CI=true`` (CI runs as root) it fails instead, as the registry fixture
does for a missing ``docker-registry``. Every mount is unmounted when its
``with`` block ends, whatever the test did.

Functions
    small_tmpfs(directory, size="2m") -> Path     a tmpfs of ``size`` mounted at ``directory`` (made if absent)
    read_only_view(directory, view) -> Path       ``directory`` bind-mounted read-only at ``view``
    fill(directory) -> Path                       a file written until the file system is full (delete it for space)
    grow(directory, size)                         remount the tmpfs at ``directory`` with more room
    set_read_only(view, read_only)                remount a bind view read-only or writable again
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

_NO_ROOT = "mounting a small or read-only file system needs root (CAP_SYS_ADMIN)"


def _mount(*args: str) -> None:
    proc = subprocess.run(["mount", *args], capture_output=True, text=True, check=False, timeout=30)
    if proc.returncode != 0:
        _cannot(f"{_NO_ROOT}: mount {' '.join(args)}: {proc.stderr.strip()}")


def _cannot(message: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def _umount(directory: Path) -> None:
    subprocess.run(["umount", str(directory)], capture_output=True, check=False, timeout=30)


@contextlib.contextmanager
def small_tmpfs(directory: Path, size: str = "2m") -> Iterator[Path]:
    if os.geteuid() != 0:
        _cannot(f"{_NO_ROOT}; run the tests as root")
    directory.mkdir(parents=True, exist_ok=True)
    _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory))
    try:
        yield directory
    finally:
        _umount(directory)


@contextlib.contextmanager
def read_only_view(directory: Path, view: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        _cannot(f"{_NO_ROOT}; run the tests as root")
    view.mkdir(parents=True, exist_ok=True)
    _mount("--bind", str(directory), str(view))
    try:
        set_read_only(view, True)
        yield view
    finally:
        _umount(view)


def fill(directory: Path) -> Path:
    """Write ``directory/fill`` until the file system refuses another byte."""
    path = directory / "fill"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
    finally:
        os.close(fd)
    return path


def grow(directory: Path, size: str) -> None:
    _mount("-o", f"remount,size={size}", str(directory))


def set_read_only(view: Path, read_only: bool) -> None:
    _mount("-o", f"remount,bind,{'ro' if read_only else 'rw'}", str(view))
