"""Starting ``rimthan-mcp serve`` and the echo floor server, and connecting the same SDK client to either.

Both servers run as subprocesses of the same interpreter; over stdio the SDK
client spawns them, over HTTP we spawn them on a free port and wait for their
``listening on <url>`` line. Server stderr goes to a log file in the work dir
(shown if a server fails), never to the benchmark's output.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path

from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from .synthetic import REPO_ROOT

CLIENT_MODE = "auto"
LISTENING = re.compile(r"listening on (http://\S+)")
WAIT_SECONDS = 60.0


@dataclass(frozen=True)
class ServerCommand:
    """How to start one server: interpreter arguments, and its stderr log."""

    name: str
    args: tuple[str, ...]
    log: Path


def rimthan_server(release: Path, trust: Path, state_dir: Path, log: Path) -> ServerCommand:
    """``rimthan-mcp serve`` on ``release``, exactly as an operator starts it (module form, same interpreter)."""
    return ServerCommand(
        "rimthan-mcp",
        (
            "-m",
            "rimthan_workflow_mcp",
            "serve",
            "--release",
            str(release),
            "--trust",
            str(trust),
            "--state-dir",
            str(state_dir),
            "--log-level",
            "warning",
        ),
        log,
    )


def echo_server(log: Path) -> ServerCommand:
    return ServerCommand("echo", ("-m", "benchmarks.echo_server"), log)


@asynccontextmanager
async def stdio_session(command: ServerCommand) -> AsyncIterator[Client]:
    """An SDK client connected over stdio to a freshly spawned ``command``."""
    command.log.parent.mkdir(parents=True, exist_ok=True)
    params = StdioServerParameters(
        command=sys.executable, args=list(command.args), cwd=str(REPO_ROOT), env={"PYTHONUNBUFFERED": "1"}
    )
    with command.log.open("a", encoding="utf-8") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode=CLIENT_MODE) as client:
            yield client


@contextmanager
def http_process(command: ServerCommand) -> Iterator[str]:
    """Spawn ``command`` over Streamable HTTP on a free port; yield its URL; SIGTERM it afterwards."""
    command.log.parent.mkdir(parents=True, exist_ok=True)
    process = subprocess.Popen(
        [sys.executable, *command.args, "--transport", "http", "--port", "0"],
        cwd=REPO_ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    assert process.stderr is not None
    stream = process.stderr
    reader = threading.Thread(target=lambda: lines.extend(iter(stream.readline, "")), daemon=True)
    reader.start()
    try:
        yield _wait_for_url(command, process, lines)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        reader.join(timeout=5)
        command.log.write_text("".join(lines), encoding="utf-8")


def _wait_for_url(command: ServerCommand, process: subprocess.Popen[str], lines: list[str]) -> str:
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        for line in list(lines):
            match = LISTENING.search(line)
            if match:
                return match.group(1)
        if process.poll() is not None:
            break
        time.sleep(0.02)
    raise RuntimeError(f"{command.name} did not start over HTTP:\n{''.join(lines)}")


@asynccontextmanager
async def http_session(url: str) -> AsyncIterator[Client]:
    async with Client(url, mode=CLIENT_MODE) as client:
        yield client


@asynccontextmanager
async def session(command: ServerCommand, transport: str) -> AsyncIterator[Client]:
    """A client over ``transport`` (``stdio`` | ``http``) to a fresh ``command`` server."""
    if transport == "stdio":
        async with stdio_session(command) as client:
            yield client
        return
    with http_process(command) as url:
        async with http_session(url) as client:
            yield client
