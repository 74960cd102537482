"""One session moves a run at a time: an advisory lock on ``.rimthan/runs/<run>.lock``.

Two sessions on one run (a harness restarted while the old process still
lives, a harness and a bridge) share its log and resume state: both moving
at once forked the run (two checkpoints from one parent, which
``rimthan-mcp audit`` refuses) and raced on ``<run>.json.tmp``. So a
:class:`~rimthan_host.session.HostSession` takes an exclusive ``flock`` on
the run's lock file as it starts or resumes the run, before anything is sent
or written, and holds it until it is closed or the run completes; another
session's start or resume of that run is refused (:class:`RunBusy`, naming
the holder's process id) and writes nothing. Sessions on different runs lock
different files. The kernel drops the lock when the holder dies (a SIGKILL
too), so it is never stale; the descriptor is not inherited by a child. The
file is opened through real directories only, never through a symbolic link,
and before each move the holder checks it is still the file at its path
(:meth:`RunLock.ensure`, one ``stat``): a lock file deleted or replaced while
held is a new lock another session may hold. A session letting go removes the
file while still holding it (:meth:`RunLock.release`), and one taking it checks
once locked that it locked the file at the path, so no lock file is left behind
and no two sessions hold the run; a file a releaser killed between moving the
lock file aside and removing it left (``.<run>.lock.<pid>.<hex>.rimthan-tmp``)
is removed by the next session taking the lock, once its process is gone
(:func:`~rimthan_host.files.prune_aside`). Bridges take ``bridge.lock`` first, then the
run's; every lock is taken without waiting (a refusal, never a deadlock).
"""

from __future__ import annotations

import contextlib
import json
import os

from rimthan_workflow_registry.errors import FailureCode

from .files import ProjectPath, is_held, open_own, prune_aside, remove_held
from .protocol import HarnessError
from .runlog import RunLog
from .workspace_lock import BY_LIBRARY, Owner, close_fds, lock_now, read_owner

_ATTEMPTS = 8  # lock files removed under an acquire, one after another, before it stops trying (RunBusy)


class RunBusy(HarnessError):
    """Another session (another process, or another session here) holds the run's lock: nothing was done."""

    code = FailureCode.RUN_BUSY  # (the closed list's: docs/failure-codes.md)

    def __init__(self, run: str, owner: Owner) -> None:
        self.run, self.owner = run, owner
        kind = owner.by or "a rimthan-host serve or a harness using the host library"
        who = f"process {owner.pid} ({kind})" if owner.pid else f"another process ({kind})"
        stop = f"stop process {owner.pid}" if owner.pid else "stop the other session"
        super().__init__(
            f"Nothing was done ({self.code.value}): run {run} is being moved by {who}, and one session moves a run "
            "at a time so that its log stays one chain.\n"
            f"next: carry on in that process, or {stop} (or close its session) and start or resume run {run} "
            "again; a process that was killed holds nothing."
        )


class RunLockLost(HarnessError):
    """The run's lock file was deleted or replaced while this session held it: the session stopped moving."""

    code = FailureCode.RUN_LOCK_LOST  # (the closed list's: docs/failure-codes.md)

    def __init__(self, run: str) -> None:
        self.run = run
        super().__init__(
            f"Nothing was done ({self.code.value}): .rimthan/runs/{run}.lock was deleted or replaced while this "
            f"session held it, so another session may be moving run {run}; this session stopped (its log is kept).\n"
            f"next: make sure no other process moves run {run}, then resume it in a new session."
        )


class RunLock:
    """A run's lock, held by this process while a session moves the run (an open descriptor, or none)."""

    def __init__(self, log: RunLog, by: str = BY_LIBRARY) -> None:
        self.project, self.run = log.project, log.run_id
        self.path = log.log_path.with_suffix(".lock")
        self.by = by
        self._fd: int | None = None
        self._lost = False  # the file held was deleted or replaced: this lock moves the run no more

    @property
    def held(self) -> bool:
        return self._fd is not None

    @property
    def _file(self) -> ProjectPath:
        return ProjectPath.of(self.project, self.path)

    def acquire(self) -> None:
        """Hold the lock (a no-op if held here); :class:`RunBusy` naming the holder if another holds it.

        The lock held is the file at the path once locked: a holder removes the file as it lets go
        (:meth:`release`), so a file opened just before it was removed is no lock: opened again.
        """
        for _ in range(_ATTEMPTS if self._fd is None else 0):
            self._fd = self._take()
            if self._fd is not None:
                prune_aside(self._file)  # (what a releaser killed mid-removal left aside: files.prune_aside)
                return
        if self._fd is None:  # (taken and let go under every attempt: other sessions are moving the run)
            raise RunBusy(self.run, Owner(pid=None, run=self.run))

    def _take(self) -> int | None:
        """The lock file at the path, locked here; None if that file was removed or replaced meanwhile."""
        fd = open_own(self._file, os.O_RDWR | os.O_CREAT, make=True)  # (os.open: not inherited by a child)
        try:
            lock_now(fd)
        except BlockingIOError:
            owner = read_owner(fd)
            current = is_held(self._file, fd)
            close_fds(fd)
            if not current:  # (its holder removed it as it let go: try the file there now)
                return None
            raise RunBusy(self.run, owner) from None
        except BaseException:
            close_fds(fd)
            raise
        if not is_held(self._file, fd):  # (removed by the holder that let go of it: no lock, try again)
            close_fds(fd)
            return None
        data = json.dumps({"pid": os.getpid(), "run": self.run, "by": self.by}).encode("ascii")
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
        return fd

    def release(self) -> None:
        """Let another session move the run: remove the lock file while still holding it, then close it.

        Removed only while held and only if it is the file at the path as it is removed
        (:func:`~rimthan_host.files.remove_held`: moved aside, then checked), never a lock file another
        session took at the path meanwhile: a session that opened this one meanwhile finds, once it locks it,
        that it is no longer there (:meth:`acquire` opens the path again), so no lock file is left behind by a
        session that let go, and no two sessions ever hold the run. A file that cannot be removed is left (no
        lock once closed: the next session takes it).
        """
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                if not self._lost:
                    with contextlib.suppress(OSError):
                        remove_held(self._file, fd)
            finally:
                close_fds(fd)

    def ensure(self) -> None:
        """Before a move: hold the lock (taking it again after a ``release``, :class:`RunBusy` if another has it),
        and still the file at its path; else :class:`RunLockLost`, the lock let go, and so on every move after."""
        if not self._lost:
            self.acquire()
            self._lost = not is_held(self._file, self._fd) if self._fd is not None else False
        if self._lost:
            self.release()
            raise RunLockLost(self.run)


__all__ = ["RunBusy", "RunLock", "RunLockLost"]
