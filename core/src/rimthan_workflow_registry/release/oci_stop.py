"""Stopping registry work at once when asked: a follower's sync under a server's SIGTERM.

A sync blocked on a registry that answers nothing (a frozen process) waits
for the read timeout, one that drips bytes for the request's deadline, the
sync's up to ``SYNC_DEADLINE``: longer than a container's stop timeout. A
:class:`StopSignal` ends that: :func:`stoppable` puts the registry requests
made inside under it (a context variable, as ``registry_deadline`` is); each
request checks it before it starts, its answer between chunks, and
:meth:`StopSignal.stop` cuts the sockets those requests use, so a blocked
read ends at once. The work then raises :class:`Stopped`, a ``BaseException``
(as ``KeyboardInterrupt`` is): no ``except Exception`` turns it into a
refusal, and every ``finally`` on the way (a pull's download directory
removed) runs.

A release's verification under a stop (a follower's pull: the download's, the copy's it may replace, the one
after the move; a server's refresh verifying what the pull brought in) checks it between batches of files
(:mod:`.verify`: at most ``_HASH_BATCH`` files, or about ``_HASH_BATCH_BYTES`` plus one file, read past it), so a
stopping server does not wait for a large release to be hashed whole: the pull (or refresh) raises
:class:`Stopped` saying :data:`VERIFYING`, and nothing is moved into place or activated.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # (a build verifies what it wrote under no stop: it never loads socket, nor select under it)
    import socket


VERIFYING = "the verification of a release"  # what a stop abandoned mid-way: said in the log line of the stop


class Stopped(BaseException):
    """Registry work under a :class:`StopSignal` that was stopped: nothing after the stop was done.

    ``during``: what it abandoned half done (:data:`VERIFYING`), or None (a request, or nothing under way)."""

    def __init__(self, during: str | None = None) -> None:
        super().__init__(*([during] if during else []))
        self.during = during

    def said(self) -> dict[str, str]:
        """The fields of the stop's log line: what it abandoned, if anything half done."""
        return {"abandoned": self.during} if self.during else {}


class StopSignal:
    """Set once, from any thread (a signal handler too): every request under it ends, and none starts."""

    def __init__(self) -> None:
        self._asked = threading.Event()
        self._sockets: weakref.WeakSet[socket.socket] = weakref.WeakSet()
        self._lock = threading.Lock()

    @property
    def asked(self) -> bool:
        return self._asked.is_set()

    def stop(self) -> None:
        """Stop: cut each socket a request under this signal uses (the blocked read sees the end)."""
        self._asked.set()
        with self._lock:
            held = list(self._sockets)
        for sock in held:
            cut(sock)

    def uses(self, sock: socket.socket) -> None:
        """A request under this signal reads from ``sock``: cut it if the stop is (or was just) asked."""
        with self._lock:
            self._sockets.add(sock)
        if self.asked:
            cut(sock)


_signal: contextvars.ContextVar[StopSignal | None] = contextvars.ContextVar("registry_stop", default=None)


@contextlib.contextmanager
def stoppable(stop: StopSignal | None) -> Iterator[None]:
    """Every registry request (and release verification) inside runs under ``stop`` (None: under none)."""
    token = _signal.set(stop)
    try:
        yield
    finally:
        _signal.reset(token)


def check_stop(during: str | None = None) -> None:
    """Raise :class:`Stopped` (abandoning ``during``) if the work under way was asked to stop."""
    stopped_by(_signal.get(), during)


def current_stop() -> StopSignal | None:
    """The signal the work under way runs under (None: none), for threads it hands work to (no context there)."""
    return _signal.get()


def stopped_by(stop: StopSignal | None, during: str | None = None) -> None:
    """Raise :class:`Stopped` (abandoning ``during``) if ``stop`` (from :func:`current_stop`) was asked."""
    if stop is not None and stop.asked:
        raise Stopped(during)


def watch_socket(sock: socket.socket | None) -> None:
    """The request under way reads from ``sock``: a stop cuts it."""
    stop = _signal.get()
    if stop is not None and sock is not None:
        stop.uses(sock)


def cut(sock: socket.socket) -> None:
    import socket  # (loaded already: ``sock`` is one)

    with contextlib.suppress(OSError):  # the socket's own shutdown, under TLS too: the blocked read sees the end
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
