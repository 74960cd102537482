"""Server processes for tests and benchmarks: one way to start, watch and stop them.

``benchmarks/servers.py`` imports this module too (it puts ``tests/`` on
``sys.path``), so the test suite and ``make bench`` start and stop servers with
the same code.
"""

from __future__ import annotations

import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp.client.stdio import StdioServerParameters, stdio_client

from support.checked_client import CheckedClient

WAIT_SECONDS = 120.0  # a hang guard only: a follower on a loaded 2-core machine once took over 30 s to start
LISTENING = r"listening on (http://\S+)"


def serve_options(
    release: Path,
    trust: Path,
    state_dir: Path,
    *,
    log_level: str = "info",
    releases_dir: Path | None = None,
    migration_target: Path | None = None,
    extra: Sequence[str] = (),
) -> list[str]:
    """``rimthan-mcp serve``'s options for ``release``, as an operator starts it."""
    args = ["--release", str(release), "--trust", str(trust), "--state-dir", str(state_dir), "--log-level", log_level]
    if releases_dir is not None:
        args += ["--releases-dir", str(releases_dir)]
    if migration_target is not None:
        args += ["--migration-target", str(migration_target)]
    return args + list(extra)


def serve_module_args(release: Path, trust: Path, state_dir: Path, **options: Any) -> list[str]:
    """Interpreter arguments for ``python -m rimthan_workflow_mcp serve`` (options as :func:`serve_options`)."""
    return ["-m", "rimthan_workflow_mcp", "serve", *serve_options(release, trust, state_dir, **options)]


def wait_for_line(
    lines: Callable[[], list[str]],
    pattern: str,
    *,
    after: int = 0,
    timeout: float = WAIT_SECONDS,
    ended: Callable[[], bool] = lambda: False,
) -> re.Match[str]:
    """The first line (from index ``after``) matching ``pattern``; AssertionError on timeout, or at once when
    ``ended()`` says no line can come any more (the process exited and its stderr was read to the end)."""
    deadline = time.monotonic() + timeout
    regex = re.compile(pattern)
    while time.monotonic() < deadline:
        over = ended()  # before reading the lines: a line read last is still seen
        for line in lines()[after:]:
            match = regex.search(line)
            if match:
                return match
        if over:
            raise AssertionError(f"ended without a stderr line matching {pattern!r}:\n{''.join(lines())}")
        time.sleep(0.05)
    raise AssertionError(f"no stderr line matched {pattern!r} within {timeout:g} s:\n{''.join(lines())}")


@dataclass
class HttpServer:
    """A server process listening over Streamable HTTP, and everything it wrote to stderr."""

    process: subprocess.Popen[str]
    url: str
    lines: list[str] = field(default_factory=list)
    ended: Callable[[], bool] = lambda: False  # the process exited and its stderr was read to the end

    @property
    def pid(self) -> int:
        return self.process.pid

    def stderr(self) -> str:
        return "".join(self.lines)

    def wait_for(self, pattern: str, *, after: int = 0, timeout: float = WAIT_SECONDS) -> re.Match[str]:
        """The first stderr line (from index ``after``) matching ``pattern``; fails the test on timeout, or at once
        with the server's stderr when it has exited."""
        return wait_for_line(lambda: self.lines, pattern, after=after, timeout=timeout, ended=self.ended)

    def refresh(self) -> None:
        """SIGHUP, and wait for its ``refresh done`` line."""
        seen = len(self.lines)
        self.process.send_signal(signal.SIGHUP)
        self.wait_for('"refresh done"', after=seen)


def stop(process: subprocess.Popen[Any]) -> None:
    """SIGTERM ``process`` (one a test started), SIGKILL after 10 s; wait for it."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def http_server_process(
    argv: Sequence[str],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = WAIT_SECONDS,
) -> Iterator[HttpServer]:
    """Start ``argv`` (which must log ``listening on <url>``), yield it, then SIGTERM it (SIGKILL after 10 s)."""
    process = subprocess.Popen(
        list(argv),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=None if env is None else dict(env),
    )
    lines: list[str] = []
    assert process.stderr is not None
    stream = process.stderr
    reader = threading.Thread(target=lambda: lines.extend(iter(stream.readline, "")), daemon=True)
    reader.start()
    try:

        def ended() -> bool:
            return not reader.is_alive()

        match = wait_for_line(lambda: lines, LISTENING, timeout=timeout, ended=ended)
        yield HttpServer(process=process, url=match.group(1), lines=lines, ended=ended)
    finally:
        stop(process)
        reader.join(timeout=5)


def stdio_client_process(
    command: str, args: Sequence[str], errlog: object, *, mode: str = "auto", cwd: Path | None = None
) -> CheckedClient:
    """An SDK client that spawns ``command args`` over stdio, its stderr going to ``errlog`` (a real file)."""
    params = StdioServerParameters(
        command=command, args=list(args), cwd=None if cwd is None else str(cwd), env={"PYTHONUNBUFFERED": "1"}
    )
    return CheckedClient(stdio_client(params, errlog=errlog), mode=mode)  # type: ignore[arg-type]
