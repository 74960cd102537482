"""One MCP server served over stdin/stdout on the project's stdio wire: the verifier's and the host bridge's.

:func:`serve_wire` puts together what the verifier learned about stdio: the
wire read and written on the event loop (``stdio_pipes``: stdin also when a
terminal, so SIGTERM is never stuck in the SDK's reader thread), every line
the SDK drops answered (``stdio_guard``: parse errors, unusable ids, lines
past their bound), every request read before the end of input answered
(``stdio_drain``), SIGTERM answered as the end of input, and a client that
closes its end of stdout stopping the server. ``rimthan-mcp serve`` (with its
refresh triggers beside it) and ``rimthan-host serve`` (with its own
:class:`~.stdio_guard.AnsweringStream`, which reads a refused line a second way)
both serve through it.
"""

from __future__ import annotations

import signal
import sys
from collections import deque
from typing import Any

import anyio
import anyio.abc
from mcp.server import Server
from mcp.server.stdio import stdio_server
from rimthan_workflow_registry.entry import serving_began, starting_over

from .logs import get_logger
from .stdio_drain import DRAIN_SECONDS, DrainingReader, draining
from .stdio_guard import AnsweringStream
from .stdio_pipes import PipeLines, pipe_wire

_log = get_logger("transport")


async def serve_wire(app: Server[Any], guard: type[AnsweringStream] = AnsweringStream) -> str | None:
    """Serve ``app`` over stdin/stdout until the client closes stdin (or SIGTERM), every request read answered.

    ``guard``: the stream that answers the lines the SDK drops. ``None`` at the end of input; else the line
    that says why serving stopped (SIGTERM, or the client closed its end of stdout first, so nothing more
    could reach it).
    """
    stopped: list[str] = []
    sigterm = anyio.Event()
    reader: DrainingReader | None = None
    try:
        async with anyio.create_task_group() as tg:
            lines: deque[str] = deque()  # what the pipes read, one line per message: the guard reads ids the SDK drops
            async with pipe_wire(lines) as wire, stdio_server(*wire) as (read_stream, write_stream):
                pipe = wire[0] if isinstance(wire[0], PipeLines) else None
                answering = guard(read_stream, write_stream, lines if pipe else None)
                reader, writer = draining(answering, write_stream)
                await tg.start(_stop_on_sigterm, reader, pipe, tg.cancel_scope, sigterm)
                await app.run(reader, writer, app.create_initialization_options())
            tg.cancel_scope.cancel()
    except* (BrokenPipeError, ConnectionResetError):
        _log.info("the client closed its end of stdout: stopped serving")
        stopped.append("stopped: the client closed its end of stdout, so nothing more could be answered")
    finally:
        starting_over()  # serving is over: SIGTERM's default action again
    if sigterm.is_set():
        stopped.append(_sigterm_stopped(reader.cut_off if reader else 0))
    return stopped[0] if stopped else None


def _sigterm_stopped(cut_off: int) -> str:
    if not cut_off:
        return "stopped (SIGTERM): the calls in flight were answered"
    return (
        f"stopped (SIGTERM): {cut_off} call(s) in flight still unanswered after {DRAIN_SECONDS} s were cancelled "
        "(answered Connection closed)"
    )


async def _stop_on_sigterm(
    reader: DrainingReader,
    pipe: PipeLines | None,
    serving: anyio.CancelScope,
    sigterm: anyio.Event,
    *,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """SIGTERM (a host or service manager stopping the server): answer the calls in flight, as at the end of
    input (at most ``DRAIN_SECONDS``), then stop; the process exits 0, as over HTTP. Without this the
    default action killed the process at once (143), calls in flight unanswered. When stdin is read here (a
    pipe, a socket, a file, a terminal) the input ends once what the client wrote before the signal is read
    (those requests are answered too); otherwise the requests read so far are waited for."""
    if not hasattr(signal, "SIGTERM") or sys.platform == "win32":
        task_status.started()
        return
    with anyio.open_signal_receiver(signal.SIGTERM) as signals:
        serving_began()  # (a SIGTERM before this stopped the start-up: rimthan_workflow_registry.entry)
        task_status.started()
        async for _ in signals:
            await _on_sigterm(reader, pipe, serving, sigterm)


async def _on_sigterm(
    reader: DrainingReader, pipe: PipeLines | None, serving: anyio.CancelScope, sigterm: anyio.Event
) -> None:
    if sigterm.is_set():
        _log.info("SIGTERM again: still answering the calls in flight")
        return  # stopping already; a second SIGTERM does not cut the drain short
    _log.info("SIGTERM: answering the calls in flight, then stopping", extra={"drain_seconds": DRAIN_SECONDS})
    sigterm.set()
    if pipe is not None:
        pipe.end_at_unread()  # the end of input drains, as when the client closes stdin
        return
    await reader.drain()
    serving.cancel()
