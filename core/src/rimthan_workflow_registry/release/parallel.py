"""Checking a release's files on every core: batches on threads, a short GIL switch interval meanwhile.

Each file costs an ``open``, ``fstat``, ``read``, SHA-256 and ``close``, and
each of those releases the GIL. With CPython's default switch interval
(5 ms), a thread coming back from one of them waits for the GIL far longer
than the call took, so two threads were no faster than one. With the interval
at 0.1 ms for the duration of the check, two threads hash 10,000 files /
256 MiB in 0.56x of ``openssl dgst``'s time (one thread: 0.81x). The interval
is process-wide: it is shortened while any check runs and restored after the
last one ends, whatever happens.

The cyclic garbage collector is paused the same way while a release is verified (:data:`COLLECTOR`): a load
allocates tens of thousands of container objects (the manifest's entries, the walk, the batches) and frees no
cycles, and with the collector on, a 10,000-file load ran 50-60 collections on its one serial thread.
"""

from __future__ import annotations

import gc
import itertools
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")

SWITCH_INTERVAL_S = 1e-4  # the GIL hand-off interval while files are checked on threads


class _WhileChecking:
    """A process-wide setting changed while at least one check holds it (:meth:`held`) and put back after the
    last one ends, whatever happens: checks on several threads at once share one change."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0

    @contextmanager
    def held(self) -> Iterator[None]:
        with self._lock:
            if self._users == 0:
                self._change()
            self._users += 1
        try:
            yield
        finally:
            with self._lock:
                self._users -= 1
                if self._users == 0:
                    self._restore()

    def _change(self) -> None:
        raise NotImplementedError

    def _restore(self) -> None:
        raise NotImplementedError


class _SwitchInterval(_WhileChecking):
    """``sys.setswitchinterval`` at most ``SWITCH_INTERVAL_S`` while held."""

    _saved = 0.0

    def _change(self) -> None:
        self._saved = sys.getswitchinterval()
        sys.setswitchinterval(min(self._saved, SWITCH_INTERVAL_S))

    def _restore(self) -> None:
        sys.setswitchinterval(self._saved)


class _Collector(_WhileChecking):
    """The cyclic collector off while held; afterwards on again if it was on."""

    _was_on = False

    def _change(self) -> None:
        self._was_on = gc.isenabled()
        gc.disable()

    def _restore(self) -> None:
        if self._was_on:
            gc.enable()


SWITCH_INTERVAL = _SwitchInterval()
COLLECTOR = _Collector()


class InOrder:
    """Failures found in any order, each at its position, holding only what can be said: the first that ``stops``
    and, before it, the first ``keep`` of the others (a check says at most so many; one it would drop is dropped
    as it is found, so a check finding thousands holds ``keep``). Safe to add to from several threads."""

    def __init__(self, stops: Callable[[BaseException], bool], keep: int) -> None:
        self._stops, self._keep = stops, keep
        self._lock = threading.Lock()
        self._others: list[tuple[int, int, BaseException]] = []  # a max-heap by position (negated)
        self._order = itertools.count()  # (ties never happen: one failure per position; no exception compared)
        self.stop: tuple[int, BaseException] | None = None  # the first failure that stops, and its position

    def add(self, position: int, failure: BaseException) -> None:
        with self._lock:
            if self.stop is not None and position > self.stop[0]:
                return  # after the first that stops: never said
            if self._stops(failure):
                self.stop = (position, failure)
                return
            import heapq  # only a check finding failures that do not stop it needs it: never a passing build

            heapq.heappush(self._others, (-position, next(self._order), failure))
            if len(self._others) > self._keep:
                heapq.heappop(self._others)  # the last by position: past what is said

    def stops_before(self, position: int) -> bool:
        """Whether a failure that stops is known before ``position`` (nothing from there on is said)."""
        with self._lock:
            return self.stop is not None and self.stop[0] < position

    def in_order(self) -> list[BaseException]:
        """The failures held, by position: up to ``keep`` others before the first that stops, then that one."""
        with self._lock:
            stop = self.stop
            found = sorted((-at, failure) for at, _, failure in self._others if stop is None or -at < stop[0])
        return [failure for _, failure in found] + ([stop[1]] if stop is not None else [])


def first_failure(
    check: Callable[[Sequence[T]], BaseException | None], batches: Sequence[Sequence[T]], workers: int
) -> BaseException | None:
    """What ``check`` found in the first batch (in order) where it found anything, checking on ``workers`` threads.

    ``check`` returns the failure it found in a batch (stopping at it) or ``None``: :func:`failures_in_order`
    with every failure stopping the check.
    """

    def listed(batch: Sequence[T]) -> Sequence[BaseException]:
        failure = check(batch)
        return () if failure is None else (failure,)

    return next(iter(failures_in_order(listed, batches, workers, stops=_always, keep=0)), None)


def failures_in_order(
    check: Callable[[Sequence[T]], Sequence[BaseException]],
    batches: Sequence[Sequence[T]],
    workers: int,
    *,
    stops: Callable[[BaseException], bool],
    keep: int,
) -> list[BaseException]:
    """The failures ``check`` found, batch by batch in order, up to the first that ``stops``, on ``workers`` threads:
    at most ``keep`` that do not stop, then the first that does (:class:`InOrder`; the rest are never held).

    ``check`` returns the failures it found in a batch, in order (ending at one that stops it). Threads take
    batches in order; once a failure that stops is known no new batch is started, and every batch before it
    has been taken (and is finished before this returns), so the answer is the same as checking in order on
    one thread. An exception ``check`` raises is that batch's failure, and stops (never lost on a thread).
    A failure that does not stop (a file whose digest is not listed) is collected and the check goes on.
    """
    found = InOrder(stops, keep)
    # each batch's first position (a check finds at most one failure per item, so a batch's stay in its range)
    starts = list(itertools.accumulate((len(batch) for batch in batches), initial=0))

    def stopped(index: int) -> bool:
        """Check batch ``index``, its failures held at their positions; whether one stops the check."""
        outcome = _outcome(check, batches[index])
        for offset, failure in enumerate(outcome):
            found.add(starts[index] + offset, failure)
        return any(map(stops, outcome))

    if workers <= 1 or len(batches) <= 1:
        for index in range(len(batches)):
            if stopped(index):
                break
        return found.in_order()
    order = iter(range(len(batches)))
    failed = threading.Event()

    def work() -> None:
        for index in order:  # list/range iterators hand out each index once under the GIL
            if stopped(index):
                failed.set()
            if failed.is_set():
                return

    threads = [threading.Thread(target=work, name=f"rimthan-verify-{n}", daemon=True) for n in range(1, workers)]
    with SWITCH_INTERVAL.held():
        for thread in threads:
            thread.start()
        try:
            work()
        finally:
            failed.set()  # after an interrupt here, the other threads stop at their current batch
            for thread in threads:
                thread.join()
    return found.in_order()


def _always(_: BaseException) -> bool:
    return True


def _outcome(check: Callable[[Sequence[T]], Sequence[BaseException]], batch: Sequence[T]) -> Sequence[BaseException]:
    try:
        return check(batch)
    except BaseException as exc:  # whatever the check dies of fails the batch: reported (re-raised), never dropped
        return (exc,)
