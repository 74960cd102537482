"""Counting the verifier's resource listings: what the bridge's kept listing (``rimthan_host.kept_listing``) saves.

The real ``rimthan-mcp`` logs a ``resources listed`` record at debug for each ``resources/list`` it answers; these
helpers read its JSON records (from a bridge's stderr, which passes its child's through, or from a verifier's own
over HTTP), start a verifier over HTTP on a releases folder, and a real ``rimthan-host serve`` bridge at its URL.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from pathlib import Path
from typing import Any, TextIO, TypeVar

import anyio
from mcp.client.stdio import StdioServerParameters, stdio_client

from support.checked_client import CheckedClient
from support.processes import HttpServer, http_server_process
from support.servers import RIMTHAN_MCP, ServerWorld, server_env

LISTED = "resources listed"
RECORD_WAIT = 120  # polls, a quarter second apart, for a record or a reply to come (a hang guard only)
PROXY = str(Path(__file__).with_name("listen_proxy.py"))
T = TypeVar("T")


def records(lines: Iterable[str]) -> list[dict[str, Any]]:
    """The verifier's JSON log records among ``lines`` (a bridge's stderr prefixes each with ``rimthan-mcp: ``)."""
    stripped = (line.removeprefix("rimthan-mcp: ") for line in lines)
    return [json.loads(line) for line in stripped if line.startswith("{")]


def listings(lines: Iterable[str]) -> int:
    """How many resource listings the verifier answered, by its records among ``lines``."""
    return sum(1 for record in records(lines) if record.get("event") == LISTED)


def text(result: Any) -> str:
    """A tool result's text."""
    return "\n".join(getattr(c, "text", "") for c in result.content)


async def until(seen: Callable[[], Awaitable[bool]]) -> None:
    """Poll ``seen()`` until it holds; AssertionError after ``RECORD_WAIT`` polls."""
    for _ in range(RECORD_WAIT):
        if await seen():
            return
        await anyio.sleep(0.25)
    raise AssertionError("what was waited for did not come")


async def entered(stack: ExitStack, manager: AbstractContextManager[T]) -> T:
    """``manager`` entered on ``stack`` in a worker thread: a process start waited for, the event loop serving on."""
    return await anyio.to_thread.run_sync(stack.enter_context, manager)


def verifier_argv(world: ServerWorld, releases: Path, state: Path) -> list[str]:
    """The real ``rimthan-mcp serve`` on ``releases`` (new runs may migrate to the newest), logging at debug so each
    listing is seen."""
    argv = [RIMTHAN_MCP, "serve", "--releases-dir", str(releases), "--trust", str(world.trust)]
    return argv + ["--state-dir", str(state), "--migrate-to-newest", "--log-level", "debug"]


@contextmanager
def http_verifier(
    world: ServerWorld, releases: Path, state: Path, *, port: int = 0, extra: Sequence[str] = ()
) -> Iterator[HttpServer]:
    """:func:`verifier_argv` over Streamable HTTP on ``port`` (0: a free one); SIGTERM when done."""
    argv = [*verifier_argv(world, releases, state), "--transport", "http", "--port", str(port), *extra]
    with http_server_process(argv, env=server_env()) as server:
        yield server


@contextmanager
def listen_proxy(upstream: str, mode: str) -> Iterator[HttpServer]:
    """:mod:`support.listen_proxy` in front of the verifier at ``upstream``, in ``mode``."""
    with http_server_process([sys.executable, PROXY, upstream, mode], env=server_env()) as proxy:
        yield proxy


def bridge_at(url: str, project: Path, errlog: TextIO) -> CheckedClient:
    """A real SDK client of a real ``rimthan-host serve`` talking to the verifier at ``url``."""
    host = str(Path(sys.executable).with_name("rimthan-host"))
    params = StdioServerParameters(command=host, args=["serve", "--project", str(project), "--verifier-url", url])
    return CheckedClient(stdio_client(params, errlog=errlog))
