"""docs/packager.md runs as written: a new catalogue of two workflows, co-signed, pushed, pulled, then retired.

Its two ``sh walkthrough`` blocks run in order in one empty project
(tests/support/walkthrough.py: the installed console scripts for ``uv run X``,
the registry's and the replica's ports swapped for free ones, the ``/tmp``
paths for the test's own), after the ``config.yml`` and ``keys/trust.toml``
the page shows are written as shown. The first goes from ``init`` to a
release alice built and bob co-signed (2-of-2), pushed to a real registry and
pulled back; the second retires it as the page says: a fixed newer version
published while a replica follows the registry, which activates it and keeps
the mistaken release for the runs pinned to it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.registry import free_port, require_registry
from support.walkthrough import as_here, run_walkthrough, walkthrough_blocks, walkthrough_env

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs/packager.md"
SHOWN = re.compile(r"^```(?P<kind>yaml|toml)\n(?P<text>.*?)\n```$", re.S | re.M)
FILES = {"yaml": "config.yml", "toml": "keys/trust.toml"}  # where the page's yaml and toml blocks are written
REGISTRY, REPLICA = 5000, 8765  # the ports the page shows


@pytest.mark.slow  # a build, a co-signature, a push and a pull twice, and a replica's refresh
def test_the_packager_walkthrough_runs_as_written(tmp_path: Path) -> None:
    require_registry()
    text = PAGE.read_text("utf-8")
    blocks = walkthrough_blocks(PAGE)
    assert len(blocks) == 2, "docs/packager.md: a walkthrough from init to pull, then one that retires a release"
    project = tmp_path / "project"
    ports = {REGISTRY: free_port(), REPLICA: free_port()}
    for shown in SHOWN.finditer(text):
        written = project / FILES[shown["kind"]]
        written.parent.mkdir(parents=True, exist_ok=True)
        written.write_text(as_here(shown["text"], tmp_path, {}) + "\n", "utf-8")
    (project / "config.yml").write_text((project / "config.yml").read_text().replace("5000", str(ports[REGISTRY])))
    script = as_here("\n".join(blocks), tmp_path, ports)  # one run: the registry of the first serves the second
    logged = run_walkthrough(script, project, walkthrough_env(tmp_path), tmp_path)
    assert sorted(p.name for p in (tmp_path / "tmp/pulled/triage-0.1.0/signatures").iterdir()) == sorted(
        p.name for p in (project / "releases/triage-0.1.0/signatures").iterdir()
    )  # both signatures came back with the pull
    replica = "\n".join(log for command, log in logged.items() if "rimthan-mcp serve" in command)
    assert '"outcome": "activated"' in replica and "triage@0.1.1" in replica, replica
