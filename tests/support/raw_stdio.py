"""A raw JSON-RPC client over a server process's stdio: lines no SDK client would send, every wait bounded.

The SDK clients serialise only what JSON can carry, so they cannot send a
lone surrogate escape, ``NaN``, ``1e999`` or nesting past their parser's
limit; another language's client, or a hand-written one, can. :class:`RawStdio`
writes such lines as given and reads the answers itself: ``select`` cannot see
lines already held in a reader's buffer, so two answers arriving in one read
are split here, never by an unbounded ``readline``.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from support.refusal_contract import check_raw_answer


def initialize_lines(capabilities: dict[str, Any] | None = None) -> str:
    """The handshake's two lines for a 2025-11-25 client declaring ``capabilities``."""
    params = {
        "protocolVersion": "2025-11-25",
        "capabilities": capabilities or {},
        "clientInfo": {"name": "raw", "version": "0"},
    }
    return (
        json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}, separators=(",", ":"))
        + '\n{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
    )


class RawStdio:
    """Raw lines to ``process``'s stdin; its stdout's lines, each within a timeout."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self._unread = bytearray()

    def send(self, text: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(text.encode("utf-8"))
        self.process.stdin.flush()

    def initialize(self, timeout: float, capabilities: dict[str, Any] | None = None) -> None:
        """The handshake; fails unless the server answers it within ``timeout`` seconds."""
        self.send(initialize_lines(capabilities))
        assert b'"id":0' in (self.next_line(timeout) or b""), "no answer to initialize"

    def next_line(self, timeout: float) -> bytes | None:
        """The next line, or None if none comes within ``timeout`` seconds (or stdout closed)."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._unread:
            left = deadline - time.monotonic()
            chunk = os.read(fd, 1 << 16) if left > 0 and select.select([fd], [], [], left)[0] else b""
            if not chunk:
                return None
            self._unread += chunk
        line, _, rest = self._unread.partition(b"\n")
        self._unread = bytearray(rest)
        return bytes(line)

    def call(self, request_id: int, tool: str, arguments_json: str, timeout: float) -> dict[str, Any] | None:
        """One ``tools/call`` with ``arguments_json`` written as given: the answer for its id, or None in time."""
        self.send(
            f'{{"jsonrpc":"2.0","id":{request_id},"method":"tools/call","params":{{"name":{json.dumps(tool)},'
            f'"arguments":{arguments_json}}}}}\n'
        )
        answer = self.call_answer(request_id, timeout)
        check_raw_answer(tool, answer)
        return answer

    def call_answer(self, request_id: int | str, timeout: float) -> dict[str, Any] | None:
        """The answer for ``request_id`` (lines before it skipped), or None if none comes within ``timeout``."""
        deadline = time.monotonic() + timeout
        while (line := self.next_line(max(deadline - time.monotonic(), 0))) is not None:
            message: dict[str, Any] = json.loads(line)
            if message.get("id") == request_id:
                return message
        return None


@contextmanager
def raw_stdio_server(command: Sequence[str], timeout: float) -> Iterator[RawStdio]:
    """``command`` (a server over stdio pipes, its stderr discarded) initialised by hand; terminated at the end."""
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        raw = RawStdio(process)
        raw.initialize(timeout)
        yield raw
    finally:
        process.terminate()
        process.wait(timeout=30)
