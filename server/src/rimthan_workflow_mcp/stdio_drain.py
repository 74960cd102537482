"""At the end of stdin, every request read before it is answered before the server exits.

The SDK's dispatcher ends at end of input and cancels the handlers still
running; one whose task had not started yet (the last request of a client
that writes its calls and closes stdin) was dropped unanswered, and the
process exited 0. :func:`draining` gives the server a read stream that holds
the end of input back until every request it passed on has been answered (a
response or an error for its id was written), cancelled by the client
(``notifications/cancelled``), or ``DRAIN_SECONDS`` passed. At that deadline
the end reaches the SDK, which cancels the handlers still running and answers
each with its ``Connection closed`` error (``CONNECTION_CLOSED``, -32000); a
handler running in a worker thread cannot be cancelled and is waited for.
Duplicate ids in flight are counted, one answer each.

A request of the server's own to the client (the host bridge's
``elicitation/create``) can never be answered once the input ended: at the
end of input each one still waiting, and each one sent while the answers
are waited for, gets :data:`INPUT_ENDED` at once (the call that asked ends
with its own refusal) instead of holding the drain to its deadline.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio
import mcp_types as types
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.message import SessionMessage

from .logs import get_logger
from .stdio_guard import ClosingStream, ReadingStream

if TYPE_CHECKING:
    from mcp.shared._stream_protocols import ReadStream, WriteStream

DRAIN_SECONDS = 10  # the grace calls in flight get at the end of input and at SIGTERM, stdio and HTTP alike
_log = get_logger("transport")
# What a request of the server's to the client gets at the end of input: no answer can come any more.
# A subscriptions/listen request is a stream, not a call: answered only when it ends, and the end of input ends it.
LISTEN = "subscriptions/listen"
INPUT_ENDED = types.ErrorData(code=types.CONNECTION_CLOSED, message="the client closed its input before it answered")


@dataclass
class Unanswered:
    """The requests passed to the server and not answered yet, by id (a count each: ids may repeat)."""

    ids: Counter[types.RequestId] = field(default_factory=Counter)
    changed: anyio.Event = field(default_factory=anyio.Event)
    asked: set[types.RequestId] = field(default_factory=set)  # the server's own requests the client has not answered

    def read(self, message: types.JSONRPCMessage) -> None:
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError) and message.id is not None:
            self.asked.discard(coerce_request_id(message.id))
        elif isinstance(message, types.JSONRPCRequest) and message.method != LISTEN:
            self.ids[coerce_request_id(message.id)] += 1
        elif isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled":
            cancelled = (message.params or {}).get("requestId")
            if isinstance(cancelled, str | int) and not isinstance(cancelled, bool):
                self._settle(coerce_request_id(cancelled))  # the SDK cancels one: the latest

    def written(self, message: types.JSONRPCMessage) -> None:
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError) and message.id is not None:
            self._settle(coerce_request_id(message.id))
        elif isinstance(message, types.JSONRPCRequest):
            self.asked.add(coerce_request_id(message.id))
            self._wake()

    def _settle(self, key: types.RequestId) -> None:
        if key not in self.ids:
            return
        self.ids[key] -= 1
        if self.ids[key] <= 0:
            del self.ids[key]
        self._wake()

    def _wake(self) -> None:
        self.changed.set()  # wakes every waiter (the end of input and SIGTERM may both wait)
        self.changed = anyio.Event()

    async def settled(self, seconds: float) -> int:
        """Wait until none is unanswered, at most ``seconds``; how many still are."""
        with anyio.move_on_after(seconds):
            while self.ids:
                await self.changed.wait()
        return sum(self.ids.values())

    async def settled_or_asked(self, deadline: float) -> None:
        """Wait until none is unanswered, the server asks the client something, or ``deadline`` passes."""
        with anyio.move_on_after(deadline - anyio.current_time()):
            while self.ids and not self.asked:
                await self.changed.wait()


class DrainingReader(ReadingStream):
    """``source`` as the server reads it, its end held back until :class:`Unanswered` is empty (or the deadline)."""

    def __init__(self, source: ReadStream[SessionMessage | Exception], unanswered: Unanswered, seconds: float) -> None:
        self._source = source
        self.unanswered = unanswered
        self._seconds = seconds
        self.cut_off = 0  # requests still unanswered at the deadline of the last drain
        self._deadline: float | None = None  # once the input ended: when the drain stops waiting

    async def receive(self) -> SessionMessage | Exception:
        if self._deadline is None:
            try:
                item = await self._source.receive()
            except anyio.EndOfStream:
                self._deadline = anyio.current_time() + self._seconds
            else:
                if isinstance(item, SessionMessage):
                    self.unanswered.read(item.message)
                return item
        return await self._after_the_end()

    async def _after_the_end(self) -> SessionMessage:
        """A request of the server's to the client refused (no answer can come any more), else the end of input."""
        if not self.unanswered.asked:
            await self.drain()
        if self.unanswered.asked:
            asked = self.unanswered.asked.pop()
            _log.info("the input ended: a request to the client is refused", extra={"request_id": asked})
            return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=asked, error=INPUT_ENDED))
        raise anyio.EndOfStream

    async def drain(self) -> None:
        """Wait for the requests read so far to be answered (at most the deadline), saying how it went."""
        waiting = sum(self.unanswered.ids.values())
        if not waiting:
            return
        _log.info("answering the requests read so far", extra={"requests": waiting})
        if self._deadline is None:  # (SIGTERM with stdin the SDK's own: the input has not ended here)
            left = await self.unanswered.settled(self._seconds)
        else:
            await self.unanswered.settled_or_asked(self._deadline)
            if self.unanswered.asked and anyio.current_time() < self._deadline:
                return  # the server asked the client something: refused first, then the drain goes on
            left = sum(self.unanswered.ids.values())
        self.cut_off = left
        if left:
            _log.warning(
                "requests still unanswered at the deadline are cancelled",
                extra={"requests": left, "drain_seconds": self._seconds},
            )

    async def aclose(self) -> None:
        await self._source.aclose()


class AnswerNoting(ClosingStream):
    """``target`` with every answer written noted in :class:`Unanswered` (once the write is done)."""

    def __init__(self, target: WriteStream[SessionMessage], unanswered: Unanswered) -> None:
        self._target = target
        self.unanswered = unanswered

    async def send(self, item: SessionMessage, /) -> None:
        await self._target.send(item)
        self.unanswered.written(item.message)

    async def aclose(self) -> None:
        await self._target.aclose()


def draining(
    read_stream: ReadStream[SessionMessage | Exception],
    write_stream: WriteStream[SessionMessage],
    seconds: float = DRAIN_SECONDS,
) -> tuple[DrainingReader, AnswerNoting]:
    """The streams to serve over: the end of ``read_stream`` waits for the answers written to ``write_stream``."""
    unanswered = Unanswered()
    return DrainingReader(read_stream, unanswered, seconds), AnswerNoting(write_stream, unanswered)
