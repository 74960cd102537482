"""The stdio wire served from the event loop when stdin and stdout are pipes, sockets or files (as hosts launch us).

The SDK's ``stdio_server()`` reads and writes the standard streams through
``anyio.wrap_file``: every line read, every message written and every flush
is a hop to a worker thread and back, about 14 context switches per tool
call. When both streams are pipes (or sockets), :func:`pipe_wire` hands the same SDK
transport (``stdio_server(stdin, stdout)``: its line framing, JSON parsing
and serialisation) a reader and a writer on non-blocking pipe descriptors
that the event loop watches instead. Lines read are exactly the SDK's:
UTF-8 with replacement characters, universal newlines; but a line is bounded
(the SDK reads one whole, however long): once one passes
``limits.MAX_REQUEST_BODY_BYTES`` characters (every line within the HTTP body
bound is) what was read of it is dropped, the rest is read and discarded up to
its end, and in its place comes :data:`LINE_PAST_BOUND` followed by the
request id found in the line's first ``ID_SCAN_CHARS`` characters (JSON, or
``null``), which the SDK's parser refuses and ``stdio_guard`` answers with a
JSON-RPC ``Invalid Request``.

Like the SDK, it claims the descriptors: while serving, fd 0 reads the null
device and fd 1 writes to stderr, so nothing else reaches the wire (a stray
``print``, a child process); the wire is served from private duplicates, and
fd 0 and fd 1 are restored afterwards. Each stream is claimed on its own: stdin
when it is a pipe, a socket, a file or a terminal (read once readable, left
blocking: the shell shares it), stdout when it is a pipe, a socket or a file.
Anything else (a terminal as stdout, Windows, a descriptor that cannot be
duplicated) is None for that stream and keeps the SDK's own threaded path;
its stdin reader thread cannot be interrupted, so SIGTERM waited there for
the next line, for ever on a quiet terminal or pipe. Only lines read here are
kept for ``stdio_guard``, which needs them to answer a request whose id is
neither a string nor an integer (the SDK reads it as a notification).
"""

from __future__ import annotations

import codecs
import io
import json
import os
import stat
import sys
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import TextIO, cast

import anyio
from rimthan_workflow_registry.limits import MAX_REQUEST_BODY_BYTES

from .message_shape import top_level_request_id
from .stdio_guard import LINE_PAST_BOUND

READ_CHUNK = 64 * 1024  # the default pipe capacity on Linux
ID_SCAN_CHARS = 4096  # where a refused line's id is looked for: the SDKs write it before params, or (TS) after


class PipeLines:
    """Lines from a non-blocking pipe, decoded as the SDK's ``TextIOWrapper(errors="replace")`` decodes them."""

    def __init__(
        self,
        fd: int,
        *,
        max_line: int = MAX_REQUEST_BODY_BYTES,
        kept: deque[str] | None = None,
        ready_first: bool = False,
    ) -> None:
        self._fd = fd
        self._ready_first = ready_first  # a blocking descriptor (a terminal): read only once it is readable
        self._kept = kept  # each line handed out is appended here too, for its reader to take (stdio_guard)
        self._max_line = max_line
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._decoder = io.IncrementalNewlineDecoder(decoder, translate=True)
        self._lines: deque[str] = deque()
        self._partial: list[str] = []
        self._partial_chars = 0
        self._discarding = False  # the rest of a line past the bound, up to its end
        self._eof = False
        self._budget: int | None = None  # after end_at_unread(): the bytes still to read before the end
        self._waiting: anyio.CancelScope | None = None

    def __aiter__(self) -> PipeLines:
        return self

    async def __anext__(self) -> str:
        line = await self.readline()
        if not line:
            raise StopAsyncIteration
        if self._kept is not None:
            self._kept.append(line)
        return line

    async def readline(self) -> str:
        """The next line with its ``\\n``; the unterminated rest at end of input; then ``""``."""
        while not self._lines and not self._eof:
            if self._budget == 0:  # what was written before end_at_unread() is read; a line it cut is dropped
                self._eof = True
                break
            if self._ready_first:
                await self._wait_readable()
                if self._budget == 0:
                    continue
            try:
                data = os.read(self._fd, min(READ_CHUNK, self._budget or READ_CHUNK))
            except BlockingIOError:
                await self._wait_readable()
                continue
            if self._budget is not None:
                self._budget -= len(data)
            self._take(self._decoder.decode(data, final=not data), end=not data)
        return self._lines.popleft() if self._lines else ""

    async def _wait_readable(self) -> None:
        with anyio.CancelScope() as self._waiting:  # end_at_unread() wakes it
            await anyio.wait_readable(self._fd)

    def end_at_unread(self) -> None:
        """End the input once the bytes the pipe holds now are read (SIGTERM): what the client wrote before is
        answered, as at the end of input; the rest of a line cut there is not a message and is dropped."""
        if self._budget is None:
            self._budget = _unread_bytes(self._fd)
        if self._waiting is not None:
            self._waiting.cancel()

    def _take(self, text: str, *, end: bool) -> None:
        # Each line end found by ``str.find`` (memchr on ASCII text), not ``str.split``, which compares every
        # character in a loop of its own (a 41.7 kB line: 296 K instructions to split, 53 K to find and slice).
        start, newline = 0, text.find("\n")
        while newline >= 0:
            if not self._grow(text[start:newline]):
                self._lines.append("".join(self._partial) + "\n")
            self._partial.clear()
            self._partial_chars, self._discarding = 0, False
            start, newline = newline + 1, text.find("\n", newline + 1)
        rest = text[start:]
        if rest:
            self._grow(rest)
        if end:
            self._eof = True
            if self._partial and not self._discarding:
                self._lines.append("".join(self._partial))
                self._partial.clear()

    def _grow(self, piece: str) -> bool:
        """Add ``piece`` to the line being read; False, or True when the line is (now) refused for its length."""
        if self._discarding:
            return True
        self._partial.append(piece)
        self._partial_chars += len(piece)
        if self._partial_chars <= self._max_line:
            return False
        prefix = "".join(_first_chars(self._partial, ID_SCAN_CHARS))[:ID_SCAN_CHARS]
        self._lines.append(f"{LINE_PAST_BOUND}{json.dumps(top_level_request_id(prefix, whole=False))}\n")
        self._partial.clear()
        self._discarding = True
        return True


def _unread_bytes(fd: int) -> int:
    """How many bytes ``fd`` (a pipe or a socket) holds unread; 0 if that cannot be told."""
    import fcntl  # POSIX only, as this reader
    import termios

    held = bytearray(4)
    try:
        fcntl.ioctl(fd, termios.FIONREAD, held)
    except OSError:
        return 0
    return int.from_bytes(held, sys.byteorder)


def _first_chars(pieces: list[str], count: int) -> list[str]:
    """The pieces that hold the first ``count`` characters of their concatenation."""
    taken, chars = [], 0
    for piece in pieces:
        if chars >= count:
            break
        taken.append(piece)
        chars += len(piece)
    return taken


class PipeWriter:
    """Whole messages to a non-blocking pipe, UTF-8 encoded; a message once started is written to its end."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def write(self, text: str) -> int:
        view = memoryview(text.encode("utf-8"))
        with anyio.CancelScope(shield=True):  # half a line on the wire would break the framing for good
            while view:
                try:
                    view = view[os.write(self._fd, view) :]
                except BlockingIOError:
                    await anyio.wait_writable(self._fd)
        return len(text)

    async def flush(self) -> None:
        """Nothing is buffered: each message was written whole."""


STREAM, FILE, TERMINAL = "stream", "file", "terminal"  # what a standard descriptor is, as read and written here


def _kind(fd: int) -> str | None:
    """A pipe or a socket (Node-based hosts hand their servers socket pairs as stdio), a regular file (a recorded
    session replayed: ``rimthan-mcp serve < requests.jsonl``), a terminal; None for anything else."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return None
    if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
        return STREAM
    if stat.S_ISREG(mode):
        return FILE
    return TERMINAL if os.isatty(fd) else None


def _backs(stream: TextIO | None, fd: int) -> bool:
    try:
        return stream is not None and stream.fileno() == fd
    except (AttributeError, OSError, ValueError):
        return False


def _claim(std: int, stream: TextIO | None, kinds: frozenset[str]) -> tuple[int, str] | None:
    """Divert ``std`` (fd 0 to the null device, fd 1 to stderr); a private duplicate of the wire and its kind,
    or None (left to the SDK). Only a pipe or a socket is made non-blocking: a terminal is shared with the
    shell, and a file never blocks."""
    kind = _kind(std)
    if sys.platform == "win32" or kind not in kinds or not _backs(stream, std):
        return None
    import fcntl  # POSIX only

    try:
        wire = fcntl.fcntl(std, fcntl.F_DUPFD_CLOEXEC, 3)
    except OSError:
        return None
    try:
        diversion = os.open(os.devnull, os.O_RDONLY) if std == 0 else os.dup(2)
        try:
            os.dup2(diversion, std)
        finally:
            os.close(diversion)
        if kind == STREAM:
            os.set_blocking(wire, False)
    except OSError:
        _release(std, (wire, kind))
        return None
    return wire, kind


def _release(std: int, claimed: tuple[int, str] | None) -> None:
    """Point ``std`` back at the wire (blocking again, as it was handed to us) and close the duplicate.

    What ``sys.stdout`` still buffers was printed while serving: flushed first, to stderr, never onto the wire.
    """
    if claimed is None:
        return
    wire, kind = claimed
    if std == 1:
        with suppress(AttributeError, OSError, ValueError):  # replaced, closed or gone meanwhile: nothing to flush
            sys.stdout.flush()
    if kind == STREAM:
        with suppress(OSError):
            os.set_blocking(wire, True)
    with suppress(OSError):
        os.dup2(wire, std)
    with suppress(OSError):
        os.close(wire)


@asynccontextmanager
async def pipe_wire(
    kept: deque[str] | None = None,
) -> AsyncIterator[tuple[anyio.AsyncFile[str] | None, anyio.AsyncFile[str] | None]]:
    """``(stdin, stdout)`` for ``stdio_server(stdin, stdout)``: each the wire read or written here when it is a
    pipe, a socket or a file (stdin: or a terminal), else None (the SDK's own).

    ``kept``: every line the SDK reads is appended to it as well (``stdio_guard.AnsweringStream`` takes them)."""
    stdin = _claim(0, sys.stdin, frozenset({STREAM, FILE, TERMINAL}))
    stdout = _claim(1, sys.stdout, frozenset({STREAM, FILE}))  # a terminal may block: the SDK writes from a thread
    try:
        # the SDK's transport uses these only as ``async for line in stdin``, ``stdout.write`` and ``stdout.flush``
        yield (
            None if stdin is None else cast("anyio.AsyncFile[str]", _lines(stdin, kept)),
            None if stdout is None else cast("anyio.AsyncFile[str]", PipeWriter(stdout[0])),
        )
    finally:
        _release(1, stdout)
        _release(0, stdin)


def _lines(claimed: tuple[int, str], kept: deque[str] | None) -> PipeLines:
    return PipeLines(claimed[0], kept=kept, ready_first=claimed[1] == TERMINAL)
