"""Files in the project, reached only through real folders: symlink-free writes (whole or not at all) and reads.

Every file the bridge writes, reads, renames or removes in a project (a
delivered asset, the delivery record, the run files, the locks) is reached
through one walk, :func:`open_folder`: each folder opened relative to the
last, never through a symbolic link, and the file opened relative to the last
folder's descriptor. A folder swapped for a link after a check is refused,
never followed out of the project.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePath

from rimthan_workflow_registry.canonical import sha256_hex
from rimthan_workflow_registry.release import MAX_SEGMENT_BYTES
from rimthan_workflow_registry.whole_writes import write_all

from .own_files import HardLinked, refuse_foreign
from .own_folder import ASIDE_BOUND as ASIDE_BOUND  # (re-exported: where the run lock's callers look for it)
from .own_folder import ASIDE_NAME as ASIDE_NAME
from .own_folder import OWN_FOLDER, TMP_SUFFIX, aside_name, keep_out_of_git, prune_aside_at

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_FOLDER = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
SYMLINK_REFUSED = "Symbolic link refused"  # an OSError's reason: the bridge says it with the path (words.failed_words)
NOT_REGULAR = "Not a regular file"  # likewise, for a FIFO, a device or a socket


def first_symlink(root: Path, relative: PurePath) -> Path | None:
    """The first path on the way from ``root`` down to ``root / relative`` that is a symbolic link, or None."""
    current = root
    for part in relative.parts:
        current = current / part
        if current.is_symlink():
            return current
    return None


def symlink_refused(path: Path) -> OSError:
    """The error the bridge says as "Symbolic link refused: <path>" (``words.failed_words``)."""
    return OSError(errno.ELOOP, SYMLINK_REFUSED, str(path))


class LinkOnTheWay(OSError):
    """A symbolic link where a folder on the way to a project file is, found as the walk opened it: never followed.

    Said as :func:`symlink_refused` says it ("Symbolic link refused: <path>");
    :class:`~rimthan_host.project_files.ProjectFiles` says it as its own refusal of a link on the way.
    """

    def __init__(self, path: Path) -> None:
        super().__init__(errno.ELOOP, SYMLINK_REFUSED, str(path))


@dataclass(frozen=True)
class ProjectPath:
    """A file (or folder) inside a project: the project directory, as given, and the path below it."""

    root: Path
    relative: PurePath

    @classmethod
    def of(cls, root: Path, path: Path) -> ProjectPath:
        """``path`` (``root`` / something) as a path below ``root``."""
        return cls(Path(root), Path(path).relative_to(root))

    @property
    def path(self) -> Path:
        return self.root / self.relative

    @property
    def name(self) -> str:
        return self.relative.name

    def child(self, name: str) -> ProjectPath:
        return ProjectPath(self.root, self.relative / name)


@contextlib.contextmanager
def folder(root: Path, relative: PurePath, *, make: bool = False) -> Iterator[int]:
    """The folder ``root / relative`` open as a descriptor (:func:`open_folder`), closed after."""
    fd = open_folder(root, relative, make=make)
    try:
        yield fd
    finally:
        os.close(fd)


def open_folder(root: Path, relative: PurePath, *, make: bool = False) -> int:
    """A descriptor of the folder ``root / relative``, opened one folder at a time, each relative to the last.

    Every file the bridge writes or reads in a project is opened, renamed,
    removed and fsynced relative to the descriptor this returns, so a folder
    swapped for a symbolic link between a check and a write is never followed:
    each folder below ``root`` is opened with ``O_NOFOLLOW`` (and, with
    ``make``, made relative to its parent if missing). ``root`` is the project
    as given, reached as the user named it (made if missing, with ``make``). With ``make``, a walk into the
    bridge's own ``.rimthan`` writes its ``.gitignore`` if none is there (:mod:`rimthan_host.own_folder`).
    :class:`LinkOnTheWay` for a link on
    the way, ``NotADirectoryError`` for a file there, ``FileNotFoundError`` for
    a folder missing (without ``make``), each naming that part's path.
    """
    try:
        fd = os.open(root, _FOLDER)
    except FileNotFoundError:
        if not make:
            raise
        Path(root).mkdir(parents=True, exist_ok=True)
        fd = os.open(root, _FOLDER)
    current = Path(root)
    for index, part in enumerate(relative.parts):
        current = current / part
        fd = _down(fd, part, current, make=make)
        if make and index == 0 and part == OWN_FOLDER:  # (the bridge's own folder stays out of the project's git)
            _keep_out_of_git(fd, current)
    return fd


def _keep_out_of_git(fd: int, folder: Path) -> None:
    """:func:`~rimthan_host.own_folder.keep_out_of_git` (best effort) in the folder open as ``fd`` (closed if an
    interrupt stops it)."""
    try:
        keep_out_of_git(fd, folder)
    except BaseException:
        os.close(fd)
        raise


def _down(parent: int, name: str, path: Path, *, make: bool) -> int:
    """The folder ``name`` in the folder open as ``parent`` (closed here), never through a link; ``path`` names it."""
    try:
        try:
            return os.open(name, _FOLDER | _NOFOLLOW, dir_fd=parent)
        except FileNotFoundError:
            if not make:
                raise
        with contextlib.suppress(FileExistsError):  # (made meanwhile: opened as it is, never through a link)
            os.mkdir(name, dir_fd=parent)
        return os.open(name, _FOLDER | _NOFOLLOW, dir_fd=parent)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(parent, name):
            raise LinkOnTheWay(path) from None
        raise OSError(exc.errno, exc.strerror, str(path)) from None
    finally:
        os.close(parent)


def _is_link(parent: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
    except OSError:
        return False


def open_regular(
    target: ProjectPath, flags: int, *, own: bool = False, make: bool = False
) -> tuple[int, os.stat_result]:
    """``os.open`` of the regular file ``target`` (:func:`_open_at` in its folder, :func:`open_folder`; ``make``:
    its folders made if missing)."""
    with folder(target.root, target.relative.parent, make=make) as at:
        return _open_at(at, target.path, flags, own=own)


def _open_at(at: int, path: Path, flags: int, *, own: bool = False) -> tuple[int, os.stat_result]:
    """``os.open`` of the regular file ``path`` in the folder open as ``at``, never following a symbolic link
    nor blocking.

    Without ``O_NONBLOCK`` an ``open`` of a FIFO waits for the other end,
    forever; with it the open returns, and ``fstat`` refuses all that is not a
    regular file before a byte is read or written; with ``own``, one of the bridge's own
    state files, :func:`refuse_foreign` too. An ``OSError`` otherwise:
    ELOOP (:data:`SYMLINK_REFUSED`), ``IsADirectoryError``, EINVAL
    (:data:`NOT_REGULAR`) for a FIFO, a device or a socket. The parents of
    ``path`` are ``at``'s walk's (:func:`open_folder`). Returns the descriptor and its ``fstat``.
    """
    try:
        fd = os.open(path.name, flags | _NOFOLLOW | os.O_NONBLOCK, 0o644, dir_fd=at)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise symlink_refused(path) from None
        if exc.errno == errno.ENXIO:  # a FIFO opened to write while no one reads it
            raise _not_regular(path) from None
        raise OSError(exc.errno, exc.strerror, str(path)) from None
    try:
        status = os.fstat(fd)
        if stat.S_ISDIR(status.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not stat.S_ISREG(status.st_mode):
            raise _not_regular(path)
        if own:
            refuse_foreign(path, status)
    except BaseException:
        os.close(fd)
        raise
    return fd, status


def _not_regular(path: Path) -> OSError:
    return OSError(errno.EINVAL, NOT_REGULAR, str(path))


def open_own(target: ProjectPath, flags: int, *, make: bool = False) -> int:
    """:func:`open_regular` to write a file of the bridge's own (:func:`_open_own_at`)."""
    with folder(target.root, target.relative.parent, make=make) as at:
        return _open_own_at(at, target.path, flags)


def _open_own_at(at: int, path: Path, flags: int) -> int:
    """:func:`_open_at` to write a file of the bridge's own; :class:`HardLinked` before a byte changes.

    A hard link in the project to a file elsewhere (on the same file system)
    is a regular file like any other: opened without ``O_TRUNC``, the file is
    refused if ``fstat`` counts another link to it, and truncated (if
    ``flags`` ask for it) only after that.
    """
    fd, status = _open_at(at, path, flags & ~os.O_TRUNC)
    try:
        if status.st_nlink > 1:
            raise HardLinked(path)
        if flags & os.O_TRUNC:
            os.ftruncate(fd, 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


def replace_file(target: ProjectPath, tmp: str, data: bytes, *, keep_mode: bool = False, make: bool = False) -> None:
    """Replace the bridge's own file ``target`` with ``data``, whole or not at all, and durably.

    All of it happens in ``target``'s folder as :func:`open_folder` opened it
    (``make``: its folders made if missing), so no folder swapped for a link
    meanwhile is followed. ``data`` is written whole and fsynced at the file
    named ``tmp`` beside it (:func:`_open_own_at`: a symbolic link, a FIFO or a
    hard link there is refused and left as it is), with the permission bits of
    the file there (``keep_mode``, refused as :func:`_own_mode_at` refuses it);
    ``tmp`` is then renamed over ``target`` (a symbolic link there is replaced,
    not followed) and the folder fsynced. A failure on the way (a full disk, a
    kill) leaves ``target`` as it was: the temporary file is removed (a kill
    leaves it, and the next write reuses it), and an ``OSError`` of the write
    names ``target``.
    """
    path = target.path
    with folder(target.root, target.relative.parent, make=make) as at:
        mode = _own_mode_at(at, path) if keep_mode else None
        fd = _open_own_at(at, path.with_name(tmp), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            try:
                if mode is not None:
                    os.fchmod(fd, mode)
                write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path.name, src_dir_fd=at, dst_dir_fd=at)
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=at)
            if isinstance(exc, OSError):  # (a write, fsync or rename relative to ``at``: named by the file's path)
                raise OSError(exc.errno, exc.strerror, str(path)) from None
            raise
        _fsync_folder(at)


def _fsync_folder(at: int) -> None:
    """Make a rename in the folder open as ``at`` durable (a file system that cannot sync a folder is left be)."""
    try:
        os.fsync(at)
    except OSError as exc:
        if exc.errno != errno.EINVAL:
            raise


def file_status(target: ProjectPath) -> os.stat_result | None:
    """What is at ``target`` (a link there not followed), found in its folder as :func:`open_folder` opened it;
    None if nothing is there (or a folder on the way is missing, or a file where one must be). Every check of what
    is in the project goes through here or :func:`folder_entries`, never by path: :class:`LinkOnTheWay` for a
    folder on the way that is (or became) a symbolic link, never followed out of the project."""
    try:
        with folder(target.root, target.relative.parent) as at:
            return os.stat(target.name, dir_fd=at, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return None


def folder_entries(target: ProjectPath) -> dict[str, os.stat_result]:
    """What the folder ``target`` holds (each name, and what is there, a link not followed), listed through
    :func:`open_folder`'s walk; empty if the folder is missing (or a file is where it must be).
    :class:`LinkOnTheWay` for the folder, or one on the way, that is (or became) a symbolic link."""
    try:
        with folder(target.root, target.relative) as at, os.scandir(at) as entries:
            return {e.name: found for e in entries if (found := _entry_status(e)) is not None}
    except (FileNotFoundError, NotADirectoryError):
        return {}


def _entry_status(entry: os.DirEntry[str]) -> os.stat_result | None:
    try:
        return entry.stat(follow_symlinks=False)
    except FileNotFoundError:  # (removed since it was listed)
        return None


def is_held(target: ProjectPath, fd: int) -> bool:
    """Whether ``target`` (:func:`file_status`) is the file open as ``fd``; False if it cannot be found."""
    try:
        with folder(target.root, target.relative.parent) as at:
            return held_at(at, target.name, fd)
    except OSError:
        return False


def _same(one: os.stat_result, other: os.stat_result) -> bool:
    return (one.st_dev, one.st_ino) == (other.st_dev, other.st_ino)


def same_file(fd: int, other: int) -> bool:
    """Whether the descriptors ``fd`` and ``other`` are of one file (or folder)."""
    return _same(os.fstat(fd), os.fstat(other))


def held_at(at: int, name: str, fd: int) -> bool:
    """Whether ``name`` in the folder open as ``at`` (a link there not followed) is the file open as ``fd``; False if
    nothing is there."""
    try:
        return _same(os.stat(name, dir_fd=at, follow_symlinks=False), os.fstat(fd))
    except FileNotFoundError:
        return False


def remove_held(target: ProjectPath, fd: int) -> None:
    """Remove ``target`` only if it is the file open as ``fd``: never another file put at its name meanwhile.

    Checking the name, then removing it by name, removes whatever is there by
    then. So the name is first moved aside, atomically, to a name of this call's
    own in the same folder (:func:`open_folder`'s walk), and what was moved is
    checked: the file held is removed; anything else is put back at its name
    (by a hard link, so a file put there meanwhile is never replaced).
    """
    aside = aside_name(target.name)  # (ASIDE_NAME: prune_aside)
    with folder(target.root, target.relative.parent) as at:
        try:
            os.rename(target.name, aside, src_dir_fd=at, dst_dir_fd=at)
        except FileNotFoundError:
            return
        if not held_at(at, aside, fd):
            try:
                os.link(aside, target.name, src_dir_fd=at, dst_dir_fd=at, follow_symlinks=False)
            except FileExistsError:
                pass  # (the name was taken again meanwhile: what was moved aside is a lock no one holds at its path)
            except OSError:  # (a directory, which takes no hard link: moved back)
                os.rename(aside, target.name, src_dir_fd=at, dst_dir_fd=at)
                return
        os.unlink(aside, dir_fd=at)


def prune_aside(target: ProjectPath, now: float | None = None) -> list[str]:
    """Remove what :func:`remove_held` left aside for ``target`` when its process was killed between the move and the
    unlink (:func:`~rimthan_host.own_folder.prune_aside_at` in ``target``'s folder, :func:`open_folder`'s walk).
    Best effort (a file left costs disk only: nothing reads it); the names removed."""
    with contextlib.suppress(OSError), folder(target.root, target.relative.parent) as at:
        return prune_aside_at(at, target.name, now)
    return []


def temporary_path(path: Path) -> Path:
    """Where :meth:`~rimthan_host.project_files.ProjectFiles.write` writes ``path`` before the rename:
    ``.<name>`` + :data:`TMP_SUFFIX` beside it, or, for a name too long to take that, a digest of the name (a
    file name has at most MAX_SEGMENT_BYTES)."""
    name = f".{path.name}{TMP_SUFFIX}"
    if len(name.encode("utf-8")) > MAX_SEGMENT_BYTES:
        name = f".{sha256_hex(path.name.encode('utf-8'))[:32]}{TMP_SUFFIX}"
    return path.with_name(name)


def _own_mode_at(at: int, path: Path) -> int | None:
    """The permission bits of the bridge's own file at ``path`` (None if there is none), refused as
    :func:`_open_own_at` refuses it (a symbolic link, a FIFO, a directory, other hard links), nothing changed."""
    try:
        fd = _open_own_at(at, path, os.O_WRONLY)
    except FileNotFoundError:
        return None
    try:
        return stat.S_IMODE(os.fstat(fd).st_mode)
    finally:
        os.close(fd)


class FileTooLarge(OSError):
    """A regular file larger than the reader's bound, refused before its bytes are read."""

    def __init__(self, path: Path, size: int, limit: int) -> None:  # (path: the file's, for its words)
        super().__init__(errno.EFBIG, os.strerror(errno.EFBIG), str(path))
        self.size = size
        self.limit = limit


def read_regular(target: ProjectPath, limit: int | None = None, *, own: bool = False) -> bytes:
    """The bytes of the regular file ``target`` (:func:`open_regular`); ``FileNotFoundError`` if there is none.

    Past ``limit`` bytes, :class:`FileTooLarge`: by the size ``fstat`` gives,
    before a byte is read, and by what was read should the file grow meanwhile
    (at most ``limit + 1`` bytes are read). ``own``: as :func:`open_regular`.
    """
    fd, status = open_regular(target, os.O_RDONLY, own=own)
    path = target.path
    try:
        if limit is not None and status.st_size > limit:
            raise FileTooLarge(path, status.st_size, limit)
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read() if limit is None else handle.read(limit + 1)
        if limit is not None and len(data) > limit:
            raise FileTooLarge(path, len(data), limit)
        return data
    finally:
        os.close(fd)
