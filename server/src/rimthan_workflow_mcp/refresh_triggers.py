"""What triggers a refresh while a server serves (either transport), and a refresh run off the event loop.

Refresh is triggered by ``SIGHUP`` and, if asked for, a periodic rescan every
``--refresh-interval`` seconds. A refresh verifies the candidate in a worker
thread and swaps the active release atomically; calls in flight finish on the
release they were routed to. A server stopping, however it stops, stops a
follower's sync under way (:func:`stop_syncs`) rather than waiting for it.
"""

from __future__ import annotations

import signal
import threading

import anyio
import anyio.abc
import anyio.to_thread
from rimthan_workflow_registry.entry import refresh_asked_while_starting
from rimthan_workflow_registry.release import Stopped

from .list_changed import ListingWatch
from .provider import RefreshResult, ReleaseProvider


async def refresh_now(
    provider: ReleaseProvider, trigger: str, watch: ListingWatch | None = None
) -> RefreshResult | None:
    """Run one refresh off the event loop (the provider logs what it did); ``watch`` tells clients of a change.

    None when the server, stopping, stopped the follower's sync (``stop_syncs``): nothing was refreshed. However
    the server stops (a signal, the end of stdin, uvicorn's own shutdown, an error ending the task group), the
    refresh's task is cancelled, and that is the one stop: :func:`stop_syncs`, then the thread's end awaited (a
    stopped sync ends between two registry requests or chunks, its verification between two batches of files)."""
    try:
        result = await _refresh_in_thread(provider, trigger)
    except Stopped:
        return None
    if watch is not None:
        await watch.refreshed()
    return result


async def _refresh_in_thread(provider: ReleaseProvider, trigger: str) -> RefreshResult:
    """``provider.refresh`` in a worker thread; cancelled, it stops the sync under way and waits for the thread."""
    started, ended = threading.Event(), threading.Event()

    def refresh() -> RefreshResult:
        started.set()
        try:
            return provider.refresh(trigger)
        finally:
            ended.set()

    try:
        return await anyio.to_thread.run_sync(refresh, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        stop_syncs(provider)  # a refresh not started yet finds the stop asked: its sync starts none
        if started.is_set():  # the stopped sync ends soon: wait, so that nothing of it outlives the server
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(ended.wait)
        raise


def stop_syncs(provider: ReleaseProvider) -> str | None:
    """The server is stopping: end a follower's sync under way at once (its repository, or None), start none."""
    return provider.stop_syncs() if provider.stop_syncs is not None else None


async def _every(provider: ReleaseProvider, interval: float, watch: ListingWatch | None) -> None:
    while True:
        await anyio.sleep(interval)
        await refresh_now(provider, "interval", watch)


async def refresh_triggers(
    provider: ReleaseProvider,
    interval: float | None,
    watch: ListingWatch | None,
    *,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """SIGHUP (and the optional interval) -> refresh; ``started`` once the handler is installed."""
    async with anyio.create_task_group() as tg:
        if interval:
            tg.start_soon(_every, provider, interval, watch)
        if not hasattr(signal, "SIGHUP"):  # Windows: the periodic scan is the only trigger
            task_status.started()
            return
        with anyio.open_signal_receiver(signal.SIGHUP) as signals:
            task_status.started()
            if refresh_asked_while_starting():  # a SIGHUP before this receiver was in place
                await refresh_now(provider, "SIGHUP", watch)
            async for _ in signals:
                await refresh_now(provider, "SIGHUP", watch)
