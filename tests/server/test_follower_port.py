"""A follower whose ``--port`` is taken: ``rimthan-mcp serve --transport http --releases-from ...`` at start.

It pulled every tag of the repository (a download of up to 256 MiB a release) and only then found the port taken:
the refusal came after the pulls, which had filled its releases directory for a replica that never served. Now it
binds before the first pull and fails at once, with the same ``io_error`` and its ``next:`` line, nothing pulled.
"""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest
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


def _while_first_starts(held: HeldFront, first: list[str], second: list[str], log: Path) -> tuple[str, str]:
    """Start ``first`` (a follower held at its first pull: bound, not listening), run ``second`` meanwhile; then let
    the first go on. The second's stderr, and the URL the first says it listens on."""
    with log.open("w") as into:
        started = subprocess.Popen(first, stdin=subprocess.DEVNULL, stderr=into, env=server_env())
    try:
        assert held.asked.wait(BOUNDED_WAIT), "the first replica never asked its registry"  # bound before its sync
        try:
            done = subprocess.run(second, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                                  env=server_env(), check=False)  # fmt: skip
        except subprocess.TimeoutExpired as running:
            raise AssertionError(f"the second server shares the port: {(running.stderr or b'')[-300:]!r}") from None
        held.released.set()
        listening = wait_for_line(lambda: log.read_text().splitlines(), r"listening on (\S+)").group(1)
    finally:
        stop(started)
    assert done.returncode == 1, done.stderr
    return done.stderr, listening


def _refused_as_in_use(stderr: str, authority: str) -> None:
    said = refusal(stderr)
    assert said.error == f"error: io_error: {authority}: Address already in use (by another server starting there)", \
        said  # fmt: skip
    assert said.next == "choose a free --port (0 picks one) or a --host this machine has", said


def _server(tmp_path: Path, name: str, host: str, port: int, source: list[str], trust: Path) -> list[str]:
    return [str(RIMTHAN_MCP), "serve", *source, "--trust", str(trust), "--state-dir", str(tmp_path / name / "state"),
            "--transport", "http", "--host", host, "--port", str(port)]  # fmt: skip


def _follower(tmp_path: Path, name: str, ref: str) -> list[str]:
    return ["--releases-from", ref, "--plain-http", "--releases-dir", str(tmp_path / name / "releases")]


def test_a_second_server_on_the_port_of_one_still_starting_is_refused_at_once(
    tmp_path: Path, registry: LocalRegistry, held: HeldFront, trust: Path
) -> None:
    """Bound with SO_REUSEADDR and not yet listening (pulling, verifying), a replica let a second one bind its port
    too (Linux allows it): the second pulled, and whichever listened second was refused after its pulls, or the
    second served while the first, already running, died at its listen. Now the second is refused at once, saying
    the port and that another server is starting there, nothing pulled; the first starts as usual."""
    port = free_port()
    first = _server(tmp_path, "a", "127.0.0.1", port, _follower(tmp_path, "a", held.ref("rimthan/held")), trust)
    second = _server(tmp_path, "b", "127.0.0.1", port, _follower(tmp_path, "b", registry.ref("rimthan/held")), trust)
    stderr, listening = _while_first_starts(held, first, second, tmp_path / "first.log")
    _refused_as_in_use(stderr, f"127.0.0.1:{port}")
    assert not (tmp_path / "b" / "releases").exists() or not any((tmp_path / "b" / "releases").iterdir())
    assert listening == f"http://127.0.0.1:{port}/mcp", listening


@pytest.mark.parametrize("wildcard", ["0.0.0.0", "::"])
def test_a_server_on_an_address_a_starting_wildcard_covers_is_refused_at_once(
    tmp_path: Path, held: HeldFront, packaged_releases: dict[str, Path], trust: Path, wildcard: str
) -> None:
    """The claim was per address: with a replica starting on ``0.0.0.0:P`` (or ``[::]:P``, which takes IPv4 too),
    one started on ``127.0.0.1:P`` bound, served, and the first, once its pull was done, died at its listen. Now
    the second is refused at once with the same line as on the same address; the first starts as usual."""
    port = free_port()
    first = _server(tmp_path, "a", wildcard, port, _follower(tmp_path, "a", held.ref("rimthan/held")), trust)
    local = ["--releases-dir", str(packaged_releases["1.2.0"].parent)]
    second = _server(tmp_path, "b", "127.0.0.1", port, local, trust)
    stderr, listening = _while_first_starts(held, first, second, tmp_path / "first.log")
    _refused_as_in_use(stderr, f"127.0.0.1:{port}")
    authority = f"[{wildcard}]:{port}" if ":" in wildcard else f"{wildcard}:{port}"
    assert listening == f"http://{authority}/mcp", listening
