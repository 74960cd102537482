"""The stdio wire served from the event loop over pipes and sockets: the same lines as the SDK's reader, whole
messages out, and the standard descriptors claimed while serving and given back afterwards.

Real pipes and real processes; the expected lines come from the text wrapper the SDK's own stdio transport reads
with (UTF-8, replacement characters, universal newlines).
"""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rimthan_workflow_mcp.stdio_guard import LINE_PAST_BOUND
from rimthan_workflow_mcp.stdio_pipes import ID_SCAN_CHARS, PipeLines, PipeWriter

# bytes that decide line ends and decoding: newlines of all three kinds, a two-byte letter (split or not),
# bytes that are never UTF-8, JSON text
PIECES = [b"\n", b"\r", b"\r\n", b"\xc3", b"\xa9", b"\xff", b"\xe2\x82", b"\xac", b"a", b'{"id":1}', b" "]
SDK_READER = "io.TextIOWrapper(buffer, encoding='utf-8', errors='replace')"


def _sdk_lines(data: bytes) -> list[str]:
    reader = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="replace")
    return list(iter(reader.readline, ""))


async def _pipe_lines(chunks: list[bytes], max_line: int | None = None) -> list[str]:
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    lines: list[str] = []
    try:

        async def feed() -> None:
            for chunk in chunks:  # one write per chunk, the reader running in between: lines arrive in pieces
                os.write(write_fd, chunk)
                await anyio.sleep(0)
            os.close(write_fd)

        async with anyio.create_task_group() as tg:
            tg.start_soon(feed)
            reader = PipeLines(read_fd) if max_line is None else PipeLines(read_fd, max_line=max_line)
            lines.extend([line async for line in reader])
    finally:
        os.close(read_fd)
    return lines


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(st.sampled_from(PIECES), max_size=6).map(b"".join), max_size=12))
def test_pipe_lines_are_the_sdk_readers_lines_however_the_bytes_arrive(chunks: list[bytes]) -> None:
    assert anyio.run(_pipe_lines, chunks) == _sdk_lines(b"".join(chunks)), SDK_READER


def test_a_line_far_longer_than_the_pipe_and_the_read_chunk_arrives_whole() -> None:
    line = b'{"jsonrpc":"2.0","id":3,"params":{"blob":"' + b"x" * 300_000 + b'"}}\n'
    chunks = [line[i : i + 4096] for i in range(0, len(line), 4096)] + [b"tail without newline"]
    assert anyio.run(_pipe_lines, chunks) == [line.decode(), "tail without newline"]


BOUND = 10_000  # a small bound (the server's is MAX_REQUEST_BODY_BYTES), so lines past it are quick to send
PAST_BOUND = [
    pytest.param(b'{"jsonrpc":"2.0","id":7,"method":"m","params":{"b":"', b'"}}', 7, id="id-first"),
    pytest.param(b'{"jsonrpc":"2.0","id":"call-7","method":"m","params":["', b'"]}', "call-7", id="string-id"),
    pytest.param(b'{"jsonrpc":"2.0","method":"m","params":{"b":"', b'"},"id":7}', None, id="id-after-params"),
    pytest.param(b'{"jsonrpc":"2.0","method":"m","id":' + b"7" * ID_SCAN_CHARS, b"}", None, id="id-cut-by-scan"),
]


@pytest.mark.parametrize(("head", "tail", "request_id"), PAST_BOUND)
@pytest.mark.parametrize("size", [BOUND + 1, 7 * BOUND], ids=["one-past", "far-past"])
@pytest.mark.parametrize("step", [1000, 4096, 16384], ids=["small-reads", "page-reads", "large-reads"])
def test_a_line_past_the_bound_becomes_its_refusal_and_the_next_line_is_whole(
    head: bytes, tail: bytes, request_id: int | str | None, size: int, step: int
) -> None:
    line = head + b"x" * (size - len(head) - len(tail)) + tail
    data = b'{"id":1}\n' + line + b'\n{"id":2}\r\n' + b"a" * BOUND
    chunks = [data[i : i + step] for i in range(0, len(data), step)]
    refusal = f"{LINE_PAST_BOUND}{json.dumps(request_id)}\n"
    assert anyio.run(_pipe_lines, chunks, BOUND) == ['{"id":1}\n', refusal, '{"id":2}\n', "a" * BOUND]


def test_a_line_at_the_bound_arrives_whole_and_an_unended_one_past_it_is_refused() -> None:
    at_bound = b"a" * BOUND + b"\n"  # the bound counts the line's characters before its newline
    chunks = [at_bound[:3000], at_bound[3000:], b"b" * (BOUND + 1)]
    assert anyio.run(_pipe_lines, chunks, BOUND) == [at_bound.decode(), f"{LINE_PAST_BOUND}null\n"]


def test_a_message_larger_than_the_pipe_is_written_whole_while_the_reader_drains_slowly() -> None:
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    message = "".join(f"{i:07d}é" for i in range(40_000)) + "\n"  # ~320 KB of UTF-8, five times a pipe
    received = bytearray()

    def drain() -> None:
        with os.fdopen(read_fd, "rb", buffering=0) as pipe:
            while chunk := pipe.read(4096):
                received.extend(chunk)

    reader = threading.Thread(target=drain)
    reader.start()

    async def write() -> None:
        writer = PipeWriter(write_fd)
        assert await writer.write(message) == len(message)
        await writer.flush()

    try:
        anyio.run(write)
    finally:
        os.close(write_fd)
        reader.join(timeout=30)
    assert bytes(received) == message.encode("utf-8")


CLAIM_SCRIPT = """
import os, sys, anyio
from rimthan_workflow_mcp.stdio_pipes import pipe_wire

async def main():
    async with pipe_wire() as wire:
        assert wire is not None, "pipes on fd 0 and fd 1 must take the event-loop path"
        stdin, stdout = wire
        os.write(1, b"stray write to fd 1\\n")  # a print or a child process while serving: not the wire
        print("stray print while serving")     # buffered by sys.stdout: flushed before fd 1 is the wire again
        assert os.read(0, 10) == b""           # fd 0 reads the null device meanwhile
        async for line in stdin:
            await stdout.write("echo " + line)
    os.write(1, b"fd 1 is the wire again\\n")

anyio.run(main)
"""


# as hosts launch servers: sys.stdout block-buffered on a pipe or socket (so a stray print waits in its buffer)
BUFFERED = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}


def _over_pipes(script: str, data: bytes) -> tuple[int, bytes, bytes]:
    command = [sys.executable, "-c", script]
    done = subprocess.run(command, input=data, capture_output=True, timeout=60, check=False, env=BUFFERED)
    return done.returncode, done.stdout, done.stderr


def _over_sockets(script: str, data: bytes) -> tuple[int, bytes, bytes]:
    """As a Node-based host launches a server: a socket pair on each of stdin and stdout."""
    ours_in, theirs_in = socket.socketpair()
    ours_out, theirs_out = socket.socketpair()
    with ours_in, theirs_in, ours_out, theirs_out:
        process = subprocess.Popen(
            [sys.executable, "-c", script],
            stdin=theirs_in.fileno(),
            stdout=theirs_out.fileno(),
            stderr=subprocess.PIPE,
            env=BUFFERED,
        )
        theirs_in.close()
        theirs_out.close()
        ours_in.sendall(data)
        ours_in.shutdown(socket.SHUT_WR)
        received = b"".join(iter(lambda: ours_out.recv(65536), b""))
        _, err = process.communicate(timeout=60)
    return process.returncode, received, err


@pytest.mark.parametrize("launch", [_over_pipes, _over_sockets], ids=["pipes", "sockets"])
def test_serving_claims_fd_0_and_1_and_gives_them_back(
    launch: Callable[[str, bytes], tuple[int, bytes, bytes]],
) -> None:
    returncode, out, err = launch(CLAIM_SCRIPT, b"one\ntwo\r\n")
    assert returncode == 0, err.decode()
    assert out == b"echo one\necho two\nfd 1 is the wire again\n"
    assert b"stray write to fd 1" in err
    assert b"stray print while serving" in err


@pytest.mark.parametrize(
    ("stdin_kind", "stdout_kind", "ours"),
    [("file", "pipe", "True True"), ("terminal", "pipe", "True True"), ("pipe", "terminal", "True False")],
)
def test_stdin_is_read_here_unless_odd_and_stdout_written_here_unless_a_terminal(
    tmp_path: Path, stdin_kind: str, stdout_kind: str, ours: str
) -> None:
    """A file or a terminal as stdin, or a terminal as stdout, gave both streams to the SDK's threaded path."""
    requests, said = tmp_path / "requests", tmp_path / "said"
    requests.write_bytes(b"")
    script = (
        "import anyio, sys\n"
        "from rimthan_workflow_mcp.stdio_pipes import pipe_wire\n"
        "async def main():\n"
        "    async with pipe_wire() as wire:\n"
        "        open(sys.argv[1], 'w').write(f'{wire[0] is not None} {wire[1] is not None}')\n"
        "anyio.run(main)\n"
    )
    controller, terminal = os.openpty()
    try:
        with requests.open("rb") as file:
            stdin = {"file": file.fileno(), "terminal": terminal, "pipe": subprocess.PIPE}[stdin_kind]
            stdout = terminal if stdout_kind == "terminal" else subprocess.PIPE
            command = [sys.executable, "-c", script, str(said)]
            done = subprocess.run(command, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE, timeout=60)
    finally:
        os.close(controller)
        os.close(terminal)
    assert said.read_text() == ours, done.stderr.decode()
