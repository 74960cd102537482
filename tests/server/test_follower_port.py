"""A follower whose ``--port`` is taken: ``rimthan-mcp serve --transport http --releases-from ...`` at start.

It pulled every tag of the repository (a download of up to 256 MiB a release) and only then found the port taken:
the refusal came after the pulls, which had filled its releases directory for a replica that never served. Now it
binds before the first pull and fails at once, with the same ``io_error`` and its ``next:`` line, nothing pulled.
"""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

from support.oci import push
from support.refusals import refusal
from support.registry import LocalRegistry
from support.servers import RIMTHAN_MCP, server_env


def test_a_follower_whose_port_is_taken_fails_before_it_pulls_anything(
    tmp_path: Path, registry: LocalRegistry, packaged_releases: dict[str, Path], trust: Path
) -> None:
    ref = registry.ref("rimthan/taken")
    push(packaged_releases["1.2.0"], ref, trust)
    releases = tmp_path / "releases"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        proc = subprocess.run(
            [str(RIMTHAN_MCP), "serve", "--releases-from", ref, "--plain-http", "--releases-dir", str(releases),
             "--trust", str(trust), "--state-dir", str(tmp_path / "state"), "--transport", "http",
             "--port", str(port)],
            capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL, env=server_env(), check=False,
        )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    said = refusal(proc.stderr)
    assert said.code == "io_error" and "Address already in use" in said.error, said
    assert said.next == "choose a free --port (0 picks one) or a --host this machine has", said
    assert '"pulled"' not in proc.stderr, proc.stderr
    assert not releases.exists() or not any(releases.iterdir()), sorted(releases.iterdir())
