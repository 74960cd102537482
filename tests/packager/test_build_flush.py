"""The flush a build runs beside its self-check: its failure reaches the build, in the caller's thread.

``build._Flush`` replaced a one-worker ``ThreadPoolExecutor`` (whose ``result()`` re-raised the flush's
error). A write-back error the flush meets must still fail the build, after the flush has ended.
"""

from __future__ import annotations

import errno
import threading

import pytest
from rimthan_packager.build import _Flush


def test_a_failed_flush_is_raised_in_the_callers_thread_after_it_ended() -> None:
    ran_on: list[str] = []

    def flush() -> None:
        ran_on.append(threading.current_thread().name)
        raise OSError(errno.EIO, "write-back failed")

    durable = _Flush(flush)
    durable.join()
    with pytest.raises(OSError) as failure:
        durable.raise_failure()
    assert failure.value.errno == errno.EIO
    assert ran_on == ["rimthan-sync"]  # the flush ran on its own thread, the error surfaced here


def test_a_flush_that_succeeds_raises_nothing_once_joined() -> None:
    flushed = threading.Event()
    durable = _Flush(flushed.set)
    durable.join()
    assert flushed.is_set()
    durable.raise_failure()  # nothing to raise
