"""Small durable-write helpers: exclusive creation, full writes, directories, fsync of files, dirs and file systems."""

from __future__ import annotations

import errno
import os
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from rimthan_workflow_registry.whole_writes import write_all

if TYPE_CHECKING:
    import ctypes

_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def create_file(path: Path, data: bytes, mode: int = 0o644, *, sync: bool = True) -> None:
    """Create ``path`` (failing with ``FileExistsError`` if it exists), write ``data``, fsync.

    ``mode`` is applied exactly (``fchmod``), not narrowed or widened by the umask.
    ``sync=False`` leaves the flush to the caller (one :func:`sync_filesystem` for many files).
    A file it cannot finish (a full disk, a file system without modes refusing
    the ``fchmod``) is removed again: never left to pass for the file, nor to
    make the next attempt "already exists".
    """
    fd = os.open(path, _CREATE_FLAGS, mode)
    try:
        try:
            os.fchmod(fd, mode)
            write_all(fd, data)
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        path.unlink(missing_ok=True)
        raise


def make_dirs(path: Path, mode: int = 0o777, *, parent_mode: int = 0o777) -> list[Path]:
    """``path`` (``mode``) and its missing parents (``parent_mode``); the directories this call created, outermost
    first.

    A file or a dangling symlink in the way is named as such, not "File exists".
    Each directory is created on its own, so the list names exactly what this
    call made (never one that existed, or that another process made meanwhile):
    what :func:`remove_made_dirs` may take back. If a directory cannot be
    made, the ones made before it are removed again.
    """
    made: list[Path] = []
    try:
        for directory in [*reversed(path.parents), path]:
            if not directory.is_dir() and _make_dir(directory, mode if directory == path else parent_mode):
                made.append(directory)
    except BaseException:
        remove_made_dirs(made)
        raise
    return made


def _make_dir(directory: Path, mode: int) -> bool:
    """Make ``directory``: ``True`` if this call made it, ``False`` if another process made it meanwhile."""
    try:
        os.mkdir(directory, mode)
    except FileExistsError as exc:
        if directory.is_dir():
            return False
        in_the_way = "exists and is not a directory (a file, or a symbolic link to nothing)"
        raise OSError(errno.EEXIST, in_the_way, exc.filename) from None
    return True


def remove_made_dirs(made: list[Path]) -> None:
    """Remove the directories :func:`make_dirs` made, innermost first, while they are empty (never their contents)."""
    for directory in reversed(made):
        try:
            os.rmdir(directory)
        except OSError:  # something was put in it (another process's, or ours that could not be removed): keep it
            return


WORK_DIR_ATTEMPTS = 100  # as tempfile.mkdtemp


def make_work_dir(out: Path, prefix: str) -> Path:
    """A new directory ``<out>/<prefix><random>`` (mode 0700), absolute: ``tempfile.mkdtemp`` without its imports.

    ``tempfile`` imports ``shutil``, ``random``, ``bz2`` and ``lzma``, about 2
    ms of every build; the name's random part is ``os.urandom`` (what :mod:`secrets` reads, without
    its ``hmac``, which loads the system's libcrypto).
    """
    for _ in range(WORK_DIR_ATTEMPTS):
        path = os.path.join(out, prefix + os.urandom(4).hex())
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        return Path(os.path.abspath(path))
    raise FileExistsError(errno.EEXIST, "No usable temporary directory name found", str(out))


def umask_keeps(mode: int) -> bool:
    """Whether the process umask clears none of ``mode``'s bits, so ``open(..., mode)`` creates exactly ``mode``.

    Read from ``/proc/self/status`` (setting the umask to read it back would
    race with other threads); ``False`` where that is not available.
    """
    try:
        with open("/proc/self/status", "rb") as status:  # bytes: no text codec to load (encodings.ascii)
            line = next((line for line in status if line.startswith(b"Umask:")), None)
    except OSError:
        return False
    try:
        return line is not None and int(line.split()[1], 8) & mode == 0
    except (IndexError, ValueError):
        return False


def _fsync_path(path: Path, flags: int) -> None:
    fd = os.open(path, os.O_RDONLY | flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: Path) -> None:
    """Flush a file already written and closed (fsync through a read-only descriptor)."""
    _fsync_path(path, getattr(os, "O_NOFOLLOW", 0))


def fsync_dir(path: Path) -> None:
    """Make a directory's entries (creations, renames) durable."""
    _fsync_path(path, getattr(os, "O_DIRECTORY", 0))


def sync_filesystem(path: Path) -> bool:
    """Flush every file and directory of the file system holding ``path`` (Linux ``syncfs``), as ``sync -f`` does.

    One call makes a whole freshly written tree durable, where an fsync per
    file forces a journal commit per file. ``False`` where ``syncfs`` does not
    exist (the caller then fsyncs file by file); a write-back error raises ``OSError``.
    """
    syncfs = _libc_function("syncfs")
    if syncfs is None:
        return False
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        if syncfs(fd) == 0:
            return True
        err = _errno()
    finally:
        os.close(fd)
    if err == errno.ENOSYS:
        return False
    raise OSError(err, os.strerror(err), str(path))


@cache
def _libc() -> ctypes.CDLL | None:
    """The C library, opened once for ``syncfs`` and ``renameat2`` (neither is in :mod:`os`).

    ``ctypes`` is imported here, on first use: a command that never flushes
    a file system nor publishes a directory (``init``, ``keygen``) never loads it.
    """
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def _libc_function(name: str) -> ctypes._CFunctionType | None:
    """The C library's ``name``; ``None`` where there is no such function (another platform, an older libc)."""
    libc = _libc()
    try:
        return None if libc is None else getattr(libc, name)
    except AttributeError:
        return None


def _errno() -> int:
    """``errno`` as the last C library call through :func:`_libc` left it."""
    import ctypes

    return ctypes.get_errno()


def _renameat2_noreplace(src: Path, dst: Path) -> bool:
    """Linux ``renameat2(RENAME_NOREPLACE)``; ``False`` if the platform or filesystem lacks it."""
    renameat2 = _libc_function("renameat2")
    if renameat2 is None:
        return False
    at_fdcwd, rename_noreplace = -100, 1
    result = renameat2(at_fdcwd, os.fsencode(src), at_fdcwd, os.fsencode(dst), rename_noreplace)
    if result == 0:
        return True
    err = _errno()
    if err in (errno.ENOSYS, errno.EINVAL):
        return False
    raise OSError(err, os.strerror(err), str(dst))


def rename_no_replace(src: Path, dst: Path) -> None:
    """Atomically rename ``src`` to ``dst``, raising ``FileExistsError`` if ``dst`` exists.

    Uses ``RENAME_NOREPLACE`` where available so even a race cannot replace an
    existing release; elsewhere checks first (a plain ``rename`` onto a
    non-empty directory fails anyway, so a populated release is never replaced).
    """
    if _renameat2_noreplace(src, dst):
        return
    if dst.exists() or dst.is_symlink():
        raise FileExistsError(errno.EEXIST, "destination exists", str(dst))
    os.rename(src, dst)
