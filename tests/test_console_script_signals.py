"""Ctrl-C and SIGTERM while a console script starts, sent to the installed scripts as a user or a host sends them.

The scripts imported their command line (click, the MCP SDK, the core) before
any of Rimthan's code could handle a signal: Ctrl-C in that fifth of a second
printed Python's ``KeyboardInterrupt`` traceback, and SIGTERM to a server
still starting (imports, loading its releases) killed it with no word (143).
Each script now starts at ``rimthan_workflow_registry.entry``: Ctrl-C while it
loads says ``error: interrupted`` and a ``next:`` line and exits 130, and a
SIGTERM before the server serves stops it at once with one line and exit 0,
the status of a SIGTERM while serving. The signal is sent at points after the script's own
package was imported (``PYTHONPROFILEIMPORTTIME`` names each import on stderr
as it finishes), through the command line's imports and loading into serving.
Before the script's first instruction (the interpreter starting) a signal is
Python's own: that window is not Rimthan's to close.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from rimthan_clikit import refuse
from rimthan_workflow_registry.entry import INTERRUPTED_LINES, INTERRUPTED_STATUS
from rimthan_workflow_registry.errors import FailureCode
from rimthan_workflow_registry.remediation import ExitStatus
from support.bridge import bridge_params, verifier_args
from support.processes import wait_for_line
from support.servers import ServerWorld, build_world

BIN = Path(sys.executable).parent
HANG_GUARD = 120.0  # seconds: only so that a hung process fails the test instead of blocking it
# Seconds after the script's own package was imported (its entry's handlers are in place a few milliseconds
# later): the command line's imports (a fifth of a second and more), its loading, then serving.
AFTER_PACKAGE = (0.05, 0.1, 0.2, 0.4)
PACKAGE_IMPORTED = r"\|\s+rimthan_(workflow_mcp|host|packager)$"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("signals-world"))


def _argv(script: str, world: ServerWorld, tmp_path: Path) -> list[str]:
    """The console script's command: each of the three, the servers serving over stdio pipes."""
    if script.startswith("rimthan-mcp"):
        http = ["--transport", "http", "--port", "0"] if script.endswith("http") else []
        return [str(BIN / "rimthan-mcp"), "serve", *verifier_args(world, tmp_path / "state"), *http]
    if script == "rimthan-host":
        (tmp_path / "project").mkdir(exist_ok=True)
        params = bridge_params(tmp_path / "project", world, tmp_path / "state")
        return [params.command, *params.args]
    # A pull from a registry that never answers: the command cannot end before the signal, however fast it loads
    # (a verify, which ended within 50 ms of its package's import on an idle machine, made the test's timing).
    registry = silent_registry(tmp_path)
    reference = f"oci://{registry}/rimthan/research-decision:1.2.0"
    return [str(BIN / script), "pull", reference, "--plain-http", "--trust", str(world.trust), "--out", str(tmp_path)]


_LISTENING: list[socket.socket] = []  # held open (never accepted from) until the session ends


def silent_registry(tmp_path: Path) -> str:
    """``127.0.0.1:PORT`` of a socket that takes connections into its backlog and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    _LISTENING.append(listener)
    return f"127.0.0.1:{listener.getsockname()[1]}"


@contextmanager
def _started(argv: list[str]) -> Iterator[tuple[subprocess.Popen[bytes], list[str]]]:
    """``argv`` with its stdin and stdout pipes open, once its package was imported; its stderr lines."""
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
    process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    lines: list[str] = []
    assert process.stderr is not None
    stream = process.stderr
    reader = threading.Thread(
        target=lambda: lines.extend(line.decode("utf-8", "replace") for line in iter(stream.readline, b"")),
        daemon=True,
    )
    reader.start()
    try:
        wait_for_line(lambda: lines, PACKAGE_IMPORTED, timeout=HANG_GUARD)
        yield process, lines
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=HANG_GUARD)
        reader.join(timeout=HANG_GUARD)


def _signalled(argv: list[str], sig: int, after: float) -> tuple[int, str]:
    """The exit status and stderr (import times left out) of ``argv`` sent ``sig`` ``after`` seconds in."""
    with _started(argv) as (process, lines):
        threading.Event().wait(after)
        process.send_signal(sig)
        returncode = process.wait(timeout=HANG_GUARD)
    assert process.stdin is not None
    process.stdin.close()
    return returncode, "".join(line for line in lines if not line.startswith("import time:"))


@pytest.mark.parametrize("script", ["rimthan-mcp", "rimthan-host", "rimthan-pack"])
def test_ctrl_c_while_a_console_script_starts_is_one_refusal_never_a_traceback(
    world: ServerWorld, tmp_path: Path, script: str
) -> None:
    argv = _argv(script, world, tmp_path)
    statuses = []
    for after in AFTER_PACKAGE:
        returncode, stderr = _signalled(argv, signal.SIGINT, after)
        assert "Traceback" not in stderr, f"{after} s: {stderr[-3000:]}"
        statuses.append(returncode)
        assert "interrupted" in stderr, f"{after} s: {stderr[-3000:]}"
    assert statuses == [INTERRUPTED_STATUS] * len(AFTER_PACKAGE), statuses  # none can end before its signal


STOPPED = {
    "rimthan-mcp": "rimthan-mcp: stopped (SIGTERM): the calls in flight were answered",
    "rimthan-host": "rimthan-host: stopped (SIGTERM): the calls in flight were answered",
    "rimthan-mcp-http": "rimthan-mcp: stopped: calls in flight were answered",
}


@pytest.mark.parametrize("script", list(STOPPED))
def test_sigterm_while_a_server_starts_stops_it_at_once_with_one_line_and_exit_0(
    world: ServerWorld, tmp_path: Path, script: str
) -> None:
    """Before it serves: one line saying so, exit 0 (the status of a SIGTERM while serving); once it serves, the
    serving stop line. Never the default 143 with no word, never a traceback."""
    argv = _argv(script, world, tmp_path)
    program = script.removesuffix("-http")
    starting = f"{program}: stopped (SIGTERM) while starting, before it served: no call was answered"
    said = []
    for after in AFTER_PACKAGE:
        returncode, stderr = _signalled(argv, signal.SIGTERM, after)
        assert returncode == 0, f"{after} s: {returncode}: {stderr[-3000:]}"
        assert starting in stderr or STOPPED[script] in stderr, f"{after} s: {stderr[-3000:]}"
        assert "Traceback" not in stderr and "error:" not in stderr, f"{after} s: {stderr[-3000:]}"
        said.append(starting in stderr)
    assert said[0], "the first SIGTERM came while the command line loaded"


def test_the_entry_says_ctrl_c_as_the_command_line_does(capsys: pytest.CaptureFixture[str]) -> None:
    """The entry writes its lines before click is imported; they are the ones ``rimthan_clikit`` writes."""
    with pytest.raises(SystemExit) as exited:
        refuse(FailureCode.INTERRUPTED, None, "stopped by Ctrl-C", status=ExitStatus.INTERRUPTED)
    assert exited.value.code == INTERRUPTED_STATUS
    assert capsys.readouterr().err == INTERRUPTED_LINES
