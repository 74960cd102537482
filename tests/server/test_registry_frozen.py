"""A real registry that takes requests and answers nothing (its process stopped: SIGSTOP), under a follower and a pull.

Found: the operator's line quoted the HTTP client's connection pool, ``listing tags: no connection to the
registry (_HTTPPool(host='127.0.0.1', port=N): Read timed out. (read timeout=30.0))`` from a follower, and
``fetching the manifest: _HTTPPool(host=...): Read timed out. ...`` from ``rimthan-pack pull``: a class name
of ours and no plain reason. Both now say the registry did not answer within the read timeout.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rimthan_workflow_registry.release.oci_bounds import REQUEST_TIMEOUT
from support.oci import push
from support.processes import wait_for_line
from support.refusals import refusal
from support.registry import LocalRegistry

RIMTHAN_MCP = Path(sys.executable).parent / "rimthan-mcp"
RIMTHAN_PACK = Path(sys.executable).parent / "rimthan-pack"
WAIT = 120.0  # a safety net against a hung process only: the read timeout (30 s) ends each wait first
SILENT = f"the registry did not answer within {REQUEST_TIMEOUT:g} s (read timeout)"


@contextmanager
def frozen(registry: LocalRegistry) -> Iterator[None]:
    """The registry's process stopped: the kernel still accepts connections, nothing answers."""
    os.kill(registry.process.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(registry.process.pid, signal.SIGCONT)


def _warning(log: Path, event: str) -> dict[str, object]:
    """The first JSON line of ``log`` saying ``event`` (the read timeout ends the wait long before WAIT)."""
    line = wait_for_line(lambda: log.read_text("utf-8").splitlines(), f'^{{.*"event": "{event}"', timeout=WAIT)
    found: dict[str, object] = json.loads(line.string)
    return found


def test_a_registry_that_answers_nothing_is_said_plainly_by_a_follower_and_by_pull(
    tmp_path: Path, registry: LocalRegistry, packaged_releases: dict[str, Path], trust: Path
) -> None:
    ref = registry.ref("rimthan/frozen")
    push(packaged_releases["1.2.0"], ref, trust)  # tagged 1.2.0, its version
    log = tmp_path / "follower-stderr.log"
    with log.open("wb") as err:
        follower = subprocess.Popen(
            [str(RIMTHAN_MCP), "serve", "--transport", "http", "--port", "0", "--refresh-interval", "1",
             "--releases-from", ref, "--plain-http", "--releases-dir", str(tmp_path / "releases"),
             "--trust", str(trust), "--state-dir", str(tmp_path / "state")],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
        )  # fmt: skip
    try:
        _warning(log, "serving")
        with frozen(registry):
            pull = subprocess.Popen(  # beside the follower's wait: both end by one read timeout
                [str(RIMTHAN_PACK), "pull", ref + ":1.2.0", "--trust", str(trust), "--out", str(tmp_path / "pulled"),
                 "--plain-http"],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )  # fmt: skip
            warned = _warning(log, "registry unreachable; serving what is held")
            _, stderr = pull.communicate(timeout=WAIT)
    finally:
        follower.terminate()
        follower.wait(timeout=WAIT)
    assert warned["error"] == {"code": "oci_registry_error", "message": f"listing tags: {SILENT}", "path": ref}
    assert pull.returncode == 1, stderr
    said = refusal(stderr)
    assert said.error == f"error: oci_registry_error: {ref}:1.2.0: fetching the manifest: {SILENT}", said
    assert not (tmp_path / "pulled").exists()
