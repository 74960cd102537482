"""What a follower's first sync (its start) says when part of it fails: true at the moment it is said.

A real registry behind a loopback proxy that fails the blobs of the first version tag's pull (HTTP 500) until
the follower asks for the next tag: the installed ``rimthan-mcp`` starts with an empty releases directory.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from support.hostile_registry import HostileRegistry, forward, send_json, start_hostile
from support.oci import push
from support.registry import LocalRegistry
from support.servers import server_env

RIMTHAN_MCP = Path(sys.executable).parent / "rimthan-mcp"


def _blobs_fail_until(asked: str, upstream: str) -> Any:
    """An answer: the registry at ``upstream``, but every blob fails with HTTP 500 until a path holding ``asked``
    is requested (then everything is passed through)."""
    reached = threading.Event()

    def answer(handler: Any, proxy: HostileRegistry) -> None:
        if asked in handler.path:
            reached.set()
        if "/blobs/" in handler.path and not reached.is_set():
            send_json(handler, {"errors": [{"code": "UNKNOWN", "message": "storage failing"}]}, status=500)
        else:
            forward(handler, proxy, upstream)

    return answer


def test_a_pull_failing_at_start_with_nothing_held_says_so_and_the_next_tag_serves(
    tmp_path: Path, registry: LocalRegistry, packaged_releases: dict[str, Path], trust: Path
) -> None:
    """1.2.0's pull fails while nothing is held: the warning said "pull failed; will retry", kept back from the
    log until the start knew something was held. Now it is said as it happens, in words true then; 1.3.0 is
    pulled after it and serves."""
    ref = registry.ref("rimthan/first-sync")
    for version in ("1.2.0", "1.3.0"):
        push(packaged_releases[version], f"{ref}:{version}", trust)
    proxy = start_hostile(_blobs_fail_until("/manifests/1.3.0", registry.host))
    releases = tmp_path / "releases"
    try:
        done = subprocess.run(
            [str(RIMTHAN_MCP), "serve", "--releases-from", proxy.ref("rimthan/first-sync"), "--plain-http",
             "--releases-dir", str(releases), "--trust", str(trust), "--state-dir", str(tmp_path / "state")],
            capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL, env=server_env(),
        )  # fmt: skip
    finally:
        proxy.stop()
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    records = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    failed = [r for r in records if r["event"].startswith("pull failed")]
    assert [(r["level"], r["event"]) for r in failed] == [("warning", "pull failed; nothing held to serve yet")]
    assert failed[0]["error"]["code"] == "oci_registry_error" and ":1.2.0@" in failed[0]["reference"], failed
    pulled = [r for r in records if r["event"] == "pulled"]
    assert [r["reference"].split("@")[0].rsplit(":", 1)[1] for r in pulled] == ["1.3.0"], pulled
    assert records.index(failed[0]) < records.index(pulled[0])
    assert "research-decision@1.3.0" in done.stderr and "[active]" in done.stderr, done.stderr
