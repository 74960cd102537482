"""A ``SIGTERM`` that unwinds: a build stopped by ``kill`` (or a CI job's cancel) cleans up as one stopped by Ctrl-C.

Python's default for ``SIGTERM`` ends the process at once, so a terminated
build left its hidden work directory and the ``--out`` directories it had
made. :func:`terminate_unwinds` turns the first ``SIGTERM`` into
``SystemExit(143)`` (128 + the signal, the status a shell reports for it):
``finally`` and ``except BaseException`` blocks run, then the process exits
with that status. A second ``SIGTERM`` ends it at once, as before.

:func:`signals_held` holds ``SIGINT`` and ``SIGTERM`` back over a step that
makes something and the line that records it for the clean-up: a signal
arriving between the two would otherwise leave what was made unrecorded, so
never removed. :func:`out_taken_back_on_failure` puts the two together for
a command that makes its ``--out`` (``build``, ``pull``): if it fails or is
stopped, the directories it made are removed again, and only those.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

from .fsutil import make_dirs, remove_made_dirs

TERMINATED_STATUS = 128 + signal.SIGTERM
HELD = {signal.SIGINT, signal.SIGTERM}


def _unwind(signum: int, frame: FrameType | None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM is not held up by the clean-up
    raise SystemExit(TERMINATED_STATUS)


@contextlib.contextmanager
def terminate_unwinds() -> Iterator[None]:
    """Inside, a ``SIGTERM`` raises ``SystemExit`` in the main thread (elsewhere signals cannot be handled)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGTERM, _unwind)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """``SIGINT`` and ``SIGTERM`` wait for the end of the block, then act as usual.

    The mask is the calling thread's: the build holds them only while it runs
    on one thread, so the kernel has no other thread to deliver them to.
    """
    before = signal.pthread_sigmask(signal.SIG_BLOCK, HELD)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


@contextlib.contextmanager
def out_taken_back_on_failure(out: Path) -> Iterator[None]:
    """Make ``out`` and its missing parents; if the block fails (a refusal, Ctrl-C, ``SIGTERM``), take back
    those this made, innermost first, while they are empty (never one that was there)."""
    made: list[Path] = []
    with terminate_unwinds():
        try:
            with signals_held():  # what make_dirs made is recorded before a signal can stop the command
                made += make_dirs(out)
            yield
        except BaseException:
            remove_made_dirs(made)
            raise
