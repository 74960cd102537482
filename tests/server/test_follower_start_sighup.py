"""SIGHUP to a follower still starting: ``rimthan-mcp serve --releases-from ...`` while its first pull runs.

SIGHUP asks a server to refresh; before the server's own handling was in place its default action killed the
process (exit 129) with no word: a fleet's tooling that signals every replica after a push killed each one that
was restarting. Now a SIGHUP while the server starts is kept, and the server refreshes once it serves.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

from support.hostile_registry import BOUNDED_WAIT, HeldFront
from support.processes import stop, wait_for_line
from support.servers import RIMTHAN_MCP, server_env


def test_a_sighup_while_a_follower_starts_is_a_refresh_once_it_serves_not_its_end(
    tmp_path: Path, held: HeldFront, trust: Path
) -> None:
    log = tmp_path / "server.log"
    argv = [RIMTHAN_MCP, "serve", "--releases-from", held.ref("rimthan/held"), "--plain-http",
            "--releases-dir", str(tmp_path / "releases"), "--trust", str(trust),
            "--state-dir", str(tmp_path / "state"), "--transport", "http", "--port", "0"]  # fmt: skip
    with log.open("w") as into:
        server = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stderr=into, env=server_env())
    try:
        assert held.asked.wait(BOUNDED_WAIT), "the follower never asked its registry"
        server.send_signal(signal.SIGHUP)  # while the first pull still runs
        held.released.set()
        wait_for_line(lambda: log.read_text().splitlines(), r'"event": "refresh done"')
        alive = server.poll()
    finally:
        stop(server)
    assert alive is None, log.read_text()
    done = [json.loads(line) for line in log.read_text().splitlines() if '"refresh done"' in line]
    assert [record["trigger"] for record in done] == ["SIGHUP"], done
    assert done[0]["active"] == "research-decision@1.2.0", done
