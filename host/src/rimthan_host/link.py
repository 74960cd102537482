"""The bridge's connection to the verifier: a child ``rimthan-mcp serve`` over stdio, or a URL.

:class:`VerifierLink` holds one SDK ``Client`` in a task of the bridge's task
group and hands out its tool caller and resource reader. A call on a
connection that is gone (the child was killed, the server went away) raises
:class:`VerifierLost` instead of the SDK's error. A child can be restarted
(:meth:`VerifierLink.restart`); a URL is reconnected on the next call (a lost
HTTP session too: the next call initializes afresh, or at once: :meth:`VerifierLink.reconnect`), and a child
that never came up is started again on it: one rule for both, and for :meth:`VerifierLink.down`
(``VerifierLink._replaced``).
The verifier's resource listing is kept per connection until the verifier
says it changed (:class:`~rimthan_host.kept_listing.KeptListing`, told whether the connection is a URL's). A child's
stderr passes through to the bridge's own (:class:`_ChildStderr`), and its
last lines are kept: a child that exits before it answers (no
``./releases``, a bad flag) is refused with its own ``error:``/``next:`` words,
and a start refused below the activation floor with the details of its log
record (``rimthan_workflow_registry.below_floor``), never read from its words.
When the bridge's client goes away, :meth:`VerifierLink.down` says whether the
verifier is up (it waits for a connection still being made, and asks one that
is made for its tools); if it is not, why, as a refusal (:class:`VerifierDown`),
so the bridge exits non-zero with the child's own words.
"""

from __future__ import annotations

import os
import sys
import threading
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

import anyio
from anyio.abc import TaskGroup
from mcp import Client, MCPError
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import CONNECTION_CLOSED
from rimthan_workflow_registry.below_floor import BelowFloor, read_below_floor
from rimthan_workflow_registry.errors import FailureCode, quoted
from rimthan_workflow_registry.remediation import ExitStatus

from .kept_listing import KeptListing
from .protocol import HarnessError, VerifierLost, client_caller, client_metas, client_reader, connected

T = TypeVar("T")
__all__ = ["VerifierDown", "VerifierLink", "VerifierLost", "VerifierNotUp"]

CHILD = "rimthan-mcp serve, which the bridge starts"
CLOSED = "when the client closed stdio"
STOPPED = "when the bridge was stopped"


class _ChildStderr:
    """A pipe for a child's stderr: each line copied to the bridge's stderr, its last error lines kept."""

    # a line read whole up to this bound: an error: line naming long paths, a below-floor record with long names; a
    # line past it is copied through but never read whole as the child's words (fail closed: no half line is taken
    # for whole): of an error: line, its start is kept, cut at SHOWN characters with CUT after it, as the error
    LINE = 16 * 1024
    SHOWN = 1024
    CUT = " [... cut: the line is over 16 KiB; it is whole above]"

    def __init__(self) -> None:
        read_fd, write_fd = os.pipe()
        self.writer = os.fdopen(write_fd, "w")
        self.lines: deque[str] = deque(maxlen=2)  # the last error: and next: lines (else the last line)
        self.below: BelowFloor | None = None  # the first below-floor log record's release
        self._copied = threading.Thread(target=self._copy, args=(os.fdopen(read_fd, "rb"),), daemon=True)
        self._copied.start()

    def _copy(self, reader: Any) -> None:
        last = ""
        overlong = False  # within a line past LINE: its pieces are copied, never read
        with reader:
            for line in iter(lambda: reader.readline(self.LINE), b""):
                text = line.decode("utf-8", "replace")
                sys.stderr.write(text)  # (the bridge's stderr, whatever stream it is now)
                sys.stderr.flush()
                whole = line.endswith(b"\n") or len(line) < self.LINE  # (the last line may lack its newline)
                if overlong or not whole:
                    if not overlong and text.startswith("error:"):  # its start: the code, then what it names
                        last = text[: self.SHOWN] + self.CUT
                        self.lines.append(last)
                    overlong = not whole
                    continue
                last = text.strip() or last
                if last.startswith(("error:", "next:")):
                    self.lines.append(last)
                self.below = self.below or read_below_floor(last)
        if not self.lines and last:
            self.lines.append(last)

    def said(self) -> tuple[str, ...]:
        """The child's last error lines (its stderr read to the end: it has exited), or none."""
        self.writer.close()
        self._copied.join(timeout=5)
        return tuple(self.lines)


@dataclass(frozen=True)
class VerifierDown:
    """The verifier was not up when the bridge's client went away: a refusal to exit with."""

    code: FailureCode
    message: str
    next: str | None = None  # None: the bridge's own next step
    status: ExitStatus = ExitStatus.REFUSED
    details: dict[str, str] = field(default_factory=dict)  # a rollback_refused's, from the child's log record


def _child_refusal(said: tuple[str, ...], below: BelowFloor | None = None) -> VerifierDown | None:
    """The child's own ``error: <code>: ...`` and ``next:`` lines as the bridge's refusal, if it wrote them (the
    details of a ``rollback_refused``: its below-floor log record's)."""
    error = next((line.removeprefix("error: ") for line in said if line.startswith("error: ")), None)
    code, _, message = (error or "").partition(": ")
    if code not in FailureCode.__members__.values():
        return None
    advice = next((line.removeprefix("next: ") for line in said if line.startswith("next: ")), "")
    fix = "fix the flags after -- of rimthan-host serve" if code == FailureCode.USAGE else "fix what it names"
    return VerifierDown(
        FailureCode(code),
        f"the verifier ({CHILD}) exited: {message}",
        f"{advice + '; ' if advice else ''}{fix}, then start rimthan-host serve again",
        ExitStatus.USAGE if code == FailureCode.USAGE else ExitStatus.REFUSED,
        asdict(below) if below is not None and code == FailureCode.ROLLBACK_REFUSED else {},
    )


class VerifierNotUp(HarnessError):
    """The verifier is not reachable; ``code`` and ``message``: the child's own refusal, if it exited with one."""

    def __init__(self, words: str, refusal: VerifierDown | None = None) -> None:
        super().__init__(words)
        self.code = refusal.code.value if refusal is not None else None
        self.message = refusal.message if refusal is not None else ""
        self.details = refusal.details if refusal is not None else {}


@dataclass
class _Connection:
    ready: anyio.Event = field(default_factory=anyio.Event)
    closing: anyio.Event = field(default_factory=anyio.Event)
    client: Client | None = None
    up: bool = False  # connected once (a failure after this is a lost connection, not a bad target)
    gone: bool = False
    error: str = ""
    said: tuple[str, ...] = ()  # a child's last error lines, if it exited before it was up
    below: BelowFloor | None = None  # and the release its below-floor log record names
    listing: KeptListing = field(kw_only=True)  # its resource listing, kept until it changes


class VerifierLink:
    """One verifier connection at a time, opened in ``tasks``."""

    def __init__(self, target: str | StdioServerParameters, tasks: TaskGroup, mode: str = "auto") -> None:
        self.target = target
        self._tasks = tasks
        self._mode = mode  # the SDK client's: "auto" asks server/discover first (2026-07-28), else initializes
        self._conn = self._open()
        self._rescan = False  # restart the child before the next call: it reads its releases directory anew

    @property
    def url(self) -> str | None:
        """The verifier's URL, or None for a child the bridge starts (and can restart)."""
        return self.target if isinstance(self.target, str) else None

    def _open(self) -> _Connection:
        conn = _Connection(listing=KeptListing(over_url=self.url is not None))
        self._tasks.start_soon(self._hold, conn)
        return conn

    async def _hold(self, conn: _Connection) -> None:
        stderr: _ChildStderr | None = None
        transport: Any = self.target
        if isinstance(self.target, StdioServerParameters):
            stderr = _ChildStderr()
            transport = stdio_client(self.target, errlog=stderr.writer)
        try:
            watched = Client(transport, mode=self._mode, message_handler=conn.listing.on_message)
            async with watched as client, anyio.create_task_group() as watching:
                await watching.start(conn.listing.watch, client)  # (the listing's changes followed first)
                conn.client, conn.up = client, True
                conn.ready.set()
                await conn.closing.wait()
                watching.cancel_scope.cancel()
        except Exception as exc:  # the SDK reports failures inside task groups as exception groups
            first: BaseException = exc
            while isinstance(first, BaseExceptionGroup) and first.exceptions:
                first = first.exceptions[0]
            conn.error = f"{type(first).__name__}: {first}"
            said = await anyio.to_thread.run_sync(stderr.said) if stderr is not None and not conn.up else ()
            conn.said, conn.below = said, stderr.below if stderr is not None else None
            conn.error = f"{CHILD}, exited: {' '.join(said)}" if said else conn.error
        finally:
            if stderr is not None:
                stderr.writer.close()
            conn.client, conn.gone = None, True
            conn.ready.set()

    async def restart(self) -> None:
        """Drop the current connection (a dead child is reaped) and connect afresh; VerifierLost if that fails."""
        if not await self._afresh():
            raise VerifierLost(f"the verifier did not start again ({self._conn.error})")

    def rescan_before_next_call(self) -> None:
        """Have the next call restart a child verifier first, so that it reads its releases directory anew (a
        release put back since it started: it scans that directory only as it starts). A URL is not the bridge's."""
        self._rescan = self.url is None

    async def rescan_if_asked(self) -> None:
        """The restart :meth:`rescan_before_next_call` asked for, once; VerifierLost if the child does not start."""
        if self._rescan:
            self._rescan = False
            await self.restart()

    def _current(self) -> _Connection:
        """The connection to use now: the current one, or a new one in its place (:meth:`_replaced`)."""
        if self._replaced(self._conn):
            self._conn = self._open()
        return self._conn

    def _replaced(self, conn: _Connection) -> bool:
        """Whether the link connects anew in place of ``conn``: the one rule for a call (:meth:`_client`) and for
        :meth:`down`.

        A URL's connection is replaced once it is gone or let go (a call on it was lost: :meth:`_connected`): the
        verifier may be back, or only its HTTP session lost. A child's is replaced only if it never came up and a
        call found it so (it is let go then: :meth:`_client`), so each call after it starts the child anew; the
        child's own refusal as it started is the answer until a call asks again. A child that was up and is gone is
        never replaced here: its loss is :class:`VerifierLost`, which the bridge recovers from by restarting it
        (:meth:`restart`).
        """
        if self.url is not None:
            return conn.gone or conn.closing.is_set()
        return conn.closing.is_set() and not conn.up

    async def _client(self) -> Client:
        conn = self._current()
        await conn.ready.wait()
        if conn.client is not None:
            return conn.client
        conn.closing.set()  # (let go: the next call connects anew, if :meth:`_replaced` says so)
        if conn.up:
            raise VerifierLost(f"the connection to the verifier is gone ({conn.error or 'closed'})")
        raise VerifierNotUp(
            f"the verifier is not reachable: {conn.error} (check the flags after -- or --verifier-url). "
            "Once that is fixed, make the call again: the bridge connects anew on every call until it is up.",
            _child_refusal(conn.said, conn.below),
        )

    async def _use(self, use: Callable[[Client], Awaitable[T]]) -> T:
        client = await self._client()
        return await self._connected(client, use(client))

    async def _connected(self, client: Client, request: Awaitable[T]) -> T:
        """``request``'s answer on ``client``; on a lost connection (VerifierLost, from the calls themselves too) it
        is let go, and :meth:`_replaced` says whether the next call connects afresh: a URL's does (an HTTP session
        the verifier no longer holds, 404 ``Session not found`` as it restarted, would otherwise be named on every
        call after it, each refused alike); a child's is restarted by the bridge (:meth:`restart`) instead."""
        try:
            return await connected(request)
        except VerifierLost as lost:
            conn = self._conn
            if conn.client is client:  # (not a newer connection opened meanwhile)
                conn.error = conn.error or f"{type(lost).__name__}: {lost}"
                conn.closing.set()
            raise

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """A :data:`~rimthan_host.protocol.ToolCaller` over the current connection."""
        return await self._use(lambda client: client_caller(client)(tool, arguments))

    async def read(self, uri: str) -> str:
        """A :data:`~rimthan_host.protocol.ResourceReader` over the current connection."""
        return await self._use(lambda client: client_reader(client)(uri))

    async def metas(self) -> list[dict[str, Any]]:
        """A :data:`~rimthan_host.protocol.MetaLister` over the current connection, read once until it changes
        (:mod:`~rimthan_host.kept_listing`)."""
        client = await self._client()
        return await self._conn.listing.read(lambda: self._connected(client, client_metas(client)()))

    def close(self) -> None:
        self._conn.closing.set()

    async def down(self, within: float, moment: str = CLOSED) -> VerifierDown | None:
        """None if the verifier is up (a connection being made is waited for, a made one asked), else why not.

        At most ``within`` seconds: a verifier that is neither up nor refused by then is not up, except one still
        coming up when the bridge was stopped (``STOPPED``: a slow start on a busy machine refused nothing; it is
        stopped with the bridge). ``moment``: when it was asked (``CLOSED``, ``STOPPED``), for the words.
        """
        conn = self._current()  # (let go after a lost or refused call: asked on a new connection)
        with anyio.move_on_after(within):
            await conn.ready.wait()
            if conn.client is None:
                return self._why_down(conn, moment=moment)
            try:  # (a ping is legacy-only: tools/list, past the client's cache, works in both eras)
                await conn.client.list_tools(cache_mode="refresh")
                return None
            except Exception as exc:  # a closed connection, whichever layer noticed it
                if isinstance(exc, MCPError) and exc.error.code != CONNECTION_CLOSED:
                    return None  # it answered, if with an error: it is up
                return self._why_down(conn, f"{type(exc).__name__}: {exc}", moment)
        if moment == STOPPED and not conn.ready.is_set():
            return None  # still coming up when the bridge was stopped: it refused nothing, and stops with the bridge
        return self._why_down(conn, f"it did not answer within {within:g} s", moment)

    def _why_down(self, conn: _Connection, why: str = "", moment: str = CLOSED) -> VerifierDown:
        said = _child_refusal(conn.said, conn.below)
        if said is not None:
            return said
        which = f"the verifier at {quoted(self.url)}" if self.url is not None else f"the verifier ({CHILD})"
        when = f"was gone {moment}" if conn.up else "never came up"
        code = FailureCode.IO_ERROR if self.url is not None else FailureCode.INTERNAL_ERROR
        return VerifierDown(code, f"{which} {when}: {why or conn.error or 'closed'}")

    async def reconnect(self) -> None:
        """A new connection to the verifier at the URL, made at once (the lost one let go: a verifier restarted on its
        port holds none of its session); VerifierLost if it does not answer. A child is restarted (:meth:`restart`)."""
        if not await self._afresh():
            raise VerifierLost(f"a new connection to it failed too: {self._conn.error}")

    async def _afresh(self) -> bool:
        """Let the current connection go and open one anew; whether it is up."""
        self._conn.closing.set()
        self._conn = self._open()
        await self._conn.ready.wait()
        return self._conn.client is not None
