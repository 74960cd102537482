"""A follower whose ``--port`` is taken: ``rimthan-mcp serve --transport http --releases-from ...`` at start.

It pulled every tag of the repository (a download of up to 256 MiB a release) and only then found the port taken:
the refusal came after the pulls, which had filled its releases directory for a replica that never served. Now it
binds before the first pull and fails at once, with the same ``io_error`` and its ``next:`` line, nothing pulled.
"""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

from support.hostile_registry import BOUNDED_WAIT, HeldFront
from support.oci import push
from support.processes import stop, wait_for_line
from support.refusals import refusal
from support.registry import LocalRegistry, free_port
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


def test_a_second_server_on_the_port_of_one_still_starting_is_refused_at_once(
    tmp_path: Path, registry: LocalRegistry, held: HeldFront, trust: Path
) -> None:
    """Bound with SO_REUSEADDR and not yet listening (pulling, verifying), a replica let a second one bind its port
    too (Linux allows it): the second pulled, and whichever listened second was refused after its pulls, or the
    second served while the first, already running, died at its listen. Now the second is refused at once, saying
    the port and that another server is starting there, nothing pulled; the first starts as usual."""
    port = free_port()

    def replica(name: str, ref: str) -> list[str]:
        return [str(RIMTHAN_MCP), "serve", "--releases-from", ref, "--plain-http",
                "--releases-dir", str(tmp_path / name / "releases"), "--trust", str(trust),
                "--state-dir", str(tmp_path / name / "state"), "--transport", "http", "--port", str(port)]  # fmt: skip

    log = tmp_path / "first.log"
    with log.open("w") as into:
        first = subprocess.Popen(replica("a", held.ref("rimthan/held")), stdin=subprocess.DEVNULL, stderr=into,
                                 env=server_env())  # fmt: skip
    try:
        assert held.asked.wait(BOUNDED_WAIT), "the first replica never asked its registry"  # bound before its sync
        try:
            second = subprocess.run(replica("b", registry.ref("rimthan/held")), capture_output=True, text=True,
                                    timeout=60, stdin=subprocess.DEVNULL, env=server_env(), check=False)  # fmt: skip
        except subprocess.TimeoutExpired as running:
            raise AssertionError(f"the second replica shares the port: {(running.stderr or b'')[-300:]!r}") from None
        held.released.set()
        listening = wait_for_line(lambda: log.read_text().splitlines(), r"listening on (\S+)").group(1)
    finally:
        stop(first)
    assert second.returncode == 1, second.stderr
    said = refusal(second.stderr)
    assert said.error == f"error: io_error: 127.0.0.1:{port}: Address already in use (by another server starting " \
        "there)", said  # fmt: skip
    assert said.next == "choose a free --port (0 picks one) or a --host this machine has", said
    assert not (tmp_path / "b" / "releases").exists() or not any((tmp_path / "b" / "releases").iterdir())
    assert listening == f"http://127.0.0.1:{port}/mcp", listening
