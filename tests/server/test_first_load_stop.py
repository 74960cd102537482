"""SIGTERM while a follower's first sync waits on a frozen registry, before the server serves: it stops at once.

A refresh's sync and verification run under the server's stop (``provider.stopping``, ``oci_stop``). The first
load at start (the first sync in ``start_following``, then ``open_provider``) runs on the main thread under the
console script's start-up handling instead (``rimthan_workflow_registry.entry``): a SIGTERM there unwinds it
(``StoppedStarting``), the read under way included, every ``finally`` on the way runs (a download directory
removed), and the process says it stopped while starting and exits 0. This keeps that so for the slowest start,
a registry that answers nothing: the process stopped (SIGSTOP) before the follower starts, behind a loopback front
that tells when the first request reached it.

What is asserted is the one line, the exit status and that no download is left; the wait allowed is half the read
timeout a stop that did not reach the sync would wait out, never a measured time.
"""

from __future__ import annotations

import http.server
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from rimthan_workflow_registry.release.oci_bounds import REQUEST_TIMEOUT
from support.hostile_registry import BOUNDED_WAIT, HostileRegistry, forward
from support.oci import push
from support.registry import LocalRegistry

RIMTHAN_MCP = Path(sys.executable).parent / "rimthan-mcp"
STARTING = "rimthan-mcp: stopped (SIGTERM) while starting, before it served: no call was answered"
FROZEN_WAIT = REQUEST_TIMEOUT / 2  # a stop that did not reach the sync waits out the read timeout


def test_sigterm_during_a_first_sync_waiting_on_a_frozen_registry_stops_the_start(
    tmp_path: Path,
    trust: Path,
    registry: LocalRegistry,
    packaged_releases: dict[str, Path],
    hostile: Callable[..., HostileRegistry],
) -> None:
    push(packaged_releases["1.2.0"], registry.ref("rimthan/first"), trust)
    asked = threading.Event()

    def answer(handler: http.server.BaseHTTPRequestHandler, front: HostileRegistry) -> None:
        asked.set()
        forward(handler, front, registry.host)

    front = hostile(answer)
    releases, log = tmp_path / "releases", tmp_path / "stderr.log"
    os.kill(registry.process.pid, signal.SIGSTOP)
    try:
        with log.open("wb") as err:
            process = subprocess.Popen(
                [str(RIMTHAN_MCP), "serve", "--transport", "http", "--port", "0",
                 "--releases-from", front.ref("rimthan/first"), "--plain-http", "--releases-dir", str(releases),
                 "--trust", str(trust), "--state-dir", str(tmp_path / "state")],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
            )  # fmt: skip
        try:
            assert asked.wait(BOUNDED_WAIT), "the first sync never asked the registry"
            process.send_signal(signal.SIGTERM)
            try:
                status = process.wait(timeout=FROZEN_WAIT)
            except subprocess.TimeoutExpired:
                pytest.fail(f"the starting follower did not stop within {FROZEN_WAIT:g} s: it waits for its registry")
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    finally:
        os.kill(registry.process.pid, signal.SIGCONT)
    text = log.read_text("utf-8")
    assert status == 0, text
    assert STARTING in text, text
    assert "Traceback" not in text, text
    assert not list(releases.glob(".pull-*")), text
