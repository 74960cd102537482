"""docs/fleet.md's loopback walkthrough runs as written: a registry, a push, a following replica, a second push.

The walkthrough was a ``text`` block no test ran, so it drifted from the commands it shows (and was fixed by hand).
Its block is now fenced ``sh walkthrough`` (tests/docs/test_doc_examples.py runs single commands; this block is a
sequence with processes left running), and this test runs it (tests/support/walkthrough.py): the ``config.yml``
shown above it is written as shown, each command runs in order in a project laid out as the page says
(private-keys/dev.key, trusted as keys/local, both packaged releases built into releases/), with the installed
console scripts for ``uv run X``, the registry's and the replica's ports swapped for free ones and the ``/tmp``
paths for the test's own. A command ending in ``&`` is started and left running (stopped with SIGTERM at the
end); one with ``# OUTPUT`` is run again until it prints OUTPUT (JSON compared as JSON): the registry and the
replica take a moment to start, and the replica activates 1.3.0 at its next refresh. Every other command must
exit 0 without an ``error:`` line.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.registry import free_port, require_registry
from support.releases import build_release, make_keypair, packaged_source, trust_dir
from support.walkthrough import as_here, run_walkthrough, walkthrough_env

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs/fleet.md"
BLOCKS = re.compile(r"^```yaml\n(?P<config>.*?)\n```\n\n```sh walkthrough\n(?P<script>.*?)\n```$", re.S | re.M)
REGISTRY, REPLICA = 5000, 8765  # the ports the page shows


def _project(directory: Path) -> Path:
    """A checkout after ``make demo``: the development key in private-keys, trusted as keys/local, and both releases
    built with it."""
    dev = make_keypair(directory / "private-keys", "dev")
    trust_dir(directory / "keys/local", dev)
    for version in ("1.2.0", "1.3.0"):
        build_release(packaged_source(version), directory / "releases", [dev])
    return directory


@pytest.mark.slow  # about 15 s, most of it the replica's --refresh-interval: in make test, not make test-quick
def test_the_fleet_walkthrough_runs_as_written(tmp_path: Path) -> None:
    require_registry()
    found = BLOCKS.search(PAGE.read_text("utf-8"))
    assert found is not None, "docs/fleet.md: no ```yaml config.yml block followed by the ```sh walkthrough block"
    project = _project(tmp_path / "project")
    ports = {REGISTRY: free_port(), REPLICA: free_port()}
    (project / "config.yml").write_text(as_here(found["config"], tmp_path, {REGISTRY: ports[REGISTRY]}) + "\n")
    logged = run_walkthrough(as_here(found["script"], tmp_path, ports), project, walkthrough_env(tmp_path), tmp_path)
    replica = "\n".join(log for command, log in logged.items() if "rimthan-mcp serve" in command)
    assert '"outcome": "activated"' in replica and "research-decision@1.3.0" in replica, replica
