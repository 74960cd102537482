"""One bridge moves a project's runs at a time: an advisory lock on ``.rimthan/bridge.lock``.

Two bridges on one project (two windows, a window and a CI job) share its
run logs, resume states, delivered files and the files the steps write. Both
moving at once forks a run (two checkpoints from one parent, each bridge
taking its own as current: the log no longer audits) and overwrites the
other's files. So the bridge that starts or resumes a run takes an exclusive
``flock`` on ``.rimthan/bridge.lock`` and holds it while its run is
unfinished; another bridge's moves are refused, naming the owner's process
id and run (:class:`WorkspaceBusy`), until the owner's run completes, it
stops serving a run, or it exits. The kernel releases the lock when the
owning process dies, however (a SIGKILL too), so no lock is ever stale; the
descriptor is not inherited by the verifier child. Two ``open`` and
``flock`` (below) per run a bridge takes over, two ``stat`` per tool call, nothing per log line.

A lock file deleted (or replaced) while held is a new file, a new lock: another
bridge's ``flock`` on it went through, and both moved the same run (a fork).
So the holder also locks the ``.rimthan`` directory itself, which cannot be
deleted without the runs in it: while the holder lives, no other bridge takes
the project, whatever became of the file. And before each tool call the holder
checks both are still the ones it holds (:meth:`WorkspaceLock.lost`, one
``stat`` each); if not it stops moving its run (:func:`lost_words`).
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from .files import ProjectPath, file_status, folder, held_at, open_folder, open_own, same_file
from .runlog import is_run_id

LOCK_PATH = Path(".rimthan") / "bridge.lock"
REFUSED_MEANWHILE = "start_run and resume_run are refused here until its run is complete or that bridge stopped."
_MAX_OWNER_BYTES = 256  # {"pid": <int>, "run": <a run id, at most 64 characters>, "by": <one of _HOLDERS>}
BY_BRIDGE = "a rimthan-host serve"
BY_LIBRARY = "a harness using the host library"
_HOLDERS = (BY_BRIDGE, BY_LIBRARY)


@dataclass(frozen=True)
class Owner:
    """Who holds a project's lock, as the holder wrote it (None where it did not say)."""

    pid: int | None
    run: str | None
    by: str | None = None  # what kind of process it is (a run's lock says; the project's does not)


class WorkspaceBusy(Exception):
    """Another bridge holds the project's lock: nothing was done."""

    def __init__(self, owner: Owner) -> None:
        self.owner = owner
        who = f"another rimthan-host serve (pid {owner.pid})" if owner.pid else "another rimthan-host serve"
        what = f"is moving run {owner.run}" if owner.run else "holds the runs"
        super().__init__(f"{who} {what} in this project")

    def words(self, tool: str) -> str:
        """The refusal in one paragraph: who owns the project's runs, and what to do."""
        stop = f"stop that bridge (pid {self.owner.pid})" if self.owner.pid else "stop that bridge"
        return (
            f"Nothing was done: {self}, and one bridge moves a project's runs at a time, so that each run's log "
            f"stays one chain. Carry on in the window or job that runs it; once its run is complete, or once "
            f"you closed that window or {stop} (a bridge that was killed holds nothing), call {tool} again."
        )


class WorkspaceLock:
    """The project's bridge lock, held by this process while it owns a run (an open descriptor, or none)."""

    def __init__(self, project: Path) -> None:
        self.path = Path(project) / LOCK_PATH
        self._fd: int | None = None
        self._dir_fd: int | None = None  # the .rimthan directory, locked too: a deleted file does not free it
        self._run: str | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, run: str | None = None) -> None:
        """Hold the lock (a no-op if held) and say ``run`` in it; :class:`WorkspaceBusy` if another holds it."""
        if self._fd is None:
            fd = self._open()
            dir_fd = None
            try:
                lock_now(fd)
                dir_fd = open_folder(self.path.parent.parent, LOCK_PATH.parent)
                lock_now(dir_fd)
            except BlockingIOError:
                owner = read_owner(fd)
                close_fds(fd, dir_fd)
                raise WorkspaceBusy(owner) from None
            except BaseException:
                close_fds(fd, dir_fd)
                raise
            self._fd, self._dir_fd, self._run = fd, dir_fd, None
            self.note(run)
        elif run is not None:
            self.note(run)

    def note(self, run: str | None) -> None:
        """Write who holds the lock (this process, ``run``) for a bridge it refuses; only when it changed."""
        if self._fd is None or (run == self._run and run is not None):
            return
        data = json.dumps({"pid": os.getpid(), "run": run}).encode("ascii")
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, data, 0)
        self._run = run

    def release(self) -> None:
        """Let another bridge take the project's runs (closing the descriptor drops the lock)."""
        if self._fd is not None:
            fd, dir_fd, self._fd, self._dir_fd, self._run = self._fd, self._dir_fd, None, None, None
            close_fds(fd, dir_fd)

    def lost(self) -> bool:
        """Whether the lock held here is no longer the lock file (or ``.rimthan``) at its path: deleted or
        replaced, so another bridge may take the project (False when nothing is held)."""
        if self._fd is None or self._dir_fd is None:
            return False
        try:  # (one walk to .rimthan: the folder it opens, and the file in it, each the one held)
            with folder(self.path.parent.parent, LOCK_PATH.parent) as at:
                return not (same_file(at, self._dir_fd) and held_at(at, LOCK_PATH.name, self._fd))
        except OSError:  # (a link on the way, .rimthan gone or no folder: not the one held)
            return True

    def other_owner(self) -> Owner | None:
        """The owner, if another process holds the lock now (None when free or held here); never waits."""
        if self._fd is not None or not _is_folder(ProjectPath(self.path.parent.parent, LOCK_PATH.parent)):
            return None
        try:
            self.acquire()
        except WorkspaceBusy as busy:
            return busy.owner
        except OSError:
            return None
        self.release()
        return None

    def _open(self) -> int:
        """The lock file, opened (created, and ``.rimthan``) through real directories, never through a symbolic
        link (files.open_folder); a file where ``.rimthan`` must be is ``NotADirectoryError`` naming it."""
        target = ProjectPath(self.path.parent.parent, LOCK_PATH)
        return open_own(target, os.O_RDWR | os.O_CREAT, make=True)  # (os.open: not inherited by the verifier child)


def lost_words(run: str | None) -> str:
    """Why a bridge whose lock was deleted or replaced stopped moving ``run``, and what to do (one line)."""
    stopped = f"this bridge stopped moving run {run} (its log is kept as it is)" if run else "it holds no run now"
    then = f"call resume_run {run}" if run else "call start_run or resume_run"
    return (
        f"Nothing was done: {LOCK_PATH} was deleted or replaced while this bridge held it, so another "
        f"rimthan-host serve may have taken this project's runs; {stopped}. Make sure no other window or job "
        f"moves runs in this project (or carry on there), then {then}."
    )


def _is_folder(target: ProjectPath) -> bool:
    """Whether ``target`` is a folder (a link there or on the way is not: never followed)."""
    try:
        found = file_status(target)
    except OSError:
        return False
    return found is not None and stat.S_ISDIR(found.st_mode)


def lock_now(fd: int) -> None:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


def close_fds(*fds: int | None) -> None:
    for fd in fds:
        if fd is not None:
            os.close(fd)


def read_owner(fd: int) -> Owner:
    """What the holder wrote in the lock file (a partial or foreign text: an owner it does not name)."""
    try:
        raw = os.pread(fd, _MAX_OWNER_BYTES, 0)
        value = json.loads(raw.decode("ascii"))
    except (OSError, ValueError):
        return Owner(None, None)
    if not isinstance(value, dict):
        return Owner(None, None)
    pid, run, by = value.get("pid"), value.get("run"), value.get("by")
    return Owner(
        pid if isinstance(pid, int) and pid > 0 else None,
        run if isinstance(run, str) and is_run_id(run) else None,
        by if by in _HOLDERS else None,
    )


__all__ = [
    "BY_BRIDGE",
    "BY_LIBRARY",
    "LOCK_PATH",
    "REFUSED_MEANWHILE",
    "Owner",
    "WorkspaceBusy",
    "WorkspaceLock",
    "lost_words",
]
