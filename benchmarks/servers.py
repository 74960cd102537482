"""Starting ``rimthan-mcp serve`` and the floor servers (echo, mirror); the same SDK client connects to each.

All servers run as subprocesses of the same interpreter; over stdio the SDK
client spawns them, over HTTP we spawn them on a free port and wait for their
``listening on <url>`` line. Server stderr goes to a log file in the work dir
(shown if a server fails), never to the benchmark's output.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path

from mcp import Client

from .synthetic import REPO_ROOT

# One server-process helper for the tests and the benchmarks: tests/support/processes.py.
sys.path.insert(0, str(REPO_ROOT / "tests"))
from support.processes import (  # noqa: E402
    HttpServer as HttpServer,  # re-exported: the benchmarks name server processes through this module
)
from support.processes import http_server_process as http_server_process  # noqa: E402
from support.processes import serve_module_args, stdio_client_process  # noqa: E402

CLIENT_MODE = "auto"
WAIT_SECONDS = 60.0


@dataclass(frozen=True)
class ServerCommand:
    """How to start one server: interpreter arguments, and its stderr log."""

    name: str
    args: tuple[str, ...]
    log: Path


def rimthan_server(release: Path, trust: Path, state_dir: Path, log: Path) -> ServerCommand:
    """``rimthan-mcp serve`` on ``release``, exactly as an operator starts it (module form, same interpreter)."""
    return ServerCommand("rimthan-mcp", tuple(serve_module_args(release, trust, state_dir, log_level="warning")), log)


def echo_server(log: Path) -> ServerCommand:
    return ServerCommand("echo", ("-m", "benchmarks.echo_server"), log)


def mirror_server(tools: Path, log: Path, results: Path | None = None) -> ServerCommand:
    """The mirror (benchmarks/mirror_server.py) listing the tools saved in ``tools``; keyed by ``results`` if given."""
    keyed = ("--results", str(results)) if results else ()
    return ServerCommand("mirror", ("-m", "benchmarks.mirror_server", "--tools", str(tools), *keyed), log)


@asynccontextmanager
async def stdio_session(command: ServerCommand) -> AsyncIterator[Client]:
    """An SDK client connected over stdio to a freshly spawned ``command``."""
    command.log.parent.mkdir(parents=True, exist_ok=True)
    with command.log.open("a", encoding="utf-8") as errlog:
        async with stdio_client_process(
            sys.executable, command.args, errlog, mode=CLIENT_MODE, cwd=REPO_ROOT
        ) as client:
            yield client


@contextmanager
def http_process(command: ServerCommand) -> Iterator[HttpServer]:
    """Spawn ``command`` over Streamable HTTP on a free port; yield it (URL, process); SIGTERM it afterwards."""
    command.log.parent.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, *command.args, "--transport", "http", "--port", "0"]
    try:
        with http_server_process(argv, cwd=REPO_ROOT, timeout=WAIT_SECONDS) as server:
            try:
                yield server
            finally:
                lines = server.lines
    except AssertionError as exc:
        raise RuntimeError(f"{command.name} did not start over HTTP:\n{exc}") from exc
    command.log.write_text("".join(lines), encoding="utf-8")


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
    with http_process(command) as server:
        async with http_session(server.url) as client:
            yield client
