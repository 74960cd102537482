"""Waiting for a test's server to listen: a hang guard long enough for a loaded machine, and no wait at all for a
server that has exited.

``http_server_process`` waited 30 s for the ``listening on`` line: a follower pulling its first release on a loaded
2-core machine took longer, and a correct server failed the test. The guard is now 120 s, so a server that exits
without listening must not wait it out: the wait ends as its stderr does, with what it said.
"""

from __future__ import annotations

import sys

import pytest
from support.processes import WAIT_SECONDS, http_server_process

EXITS = "import sys; sys.stderr.write('error: no release verifies\\n'); sys.exit(1)"
LISTENS_THEN_EXITS = (
    "import sys; sys.stderr.write('listening on http://127.0.0.1:9/mcp\\n'); sys.stderr.flush(); "
    "sys.stdin.read(); sys.stderr.write('error: state directory gone\\n'); sys.exit(1)"
)


def test_a_server_that_exits_before_listening_fails_at_once_with_its_stderr() -> None:
    refused = pytest.raises(AssertionError, match="ended without a stderr line matching")
    with refused as failed, http_server_process([sys.executable, "-c", EXITS]):
        pass  # never reached
    assert "error: no release verifies" in str(failed.value)


def test_the_start_guard_is_long_enough_for_a_loaded_machine() -> None:
    assert WAIT_SECONDS >= 120


def test_waiting_on_a_server_that_exited_after_listening_fails_at_once_with_its_stderr() -> None:
    with http_server_process([sys.executable, "-c", LISTENS_THEN_EXITS]) as server:
        server.process.wait()  # stdin is /dev/null: it exits once it has said it listens
        with pytest.raises(AssertionError, match="ended without a stderr line matching") as failed:
            server.wait_for('"refresh done"')
    assert "error: state directory gone" in str(failed.value)
