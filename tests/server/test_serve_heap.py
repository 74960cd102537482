"""What a server built at start-up is out of the cyclic collector's passes once it serves.

The releases a server verified and loaded live as long as it does. Left to
the collector, every full pass walked them again: under P6's load one pass
over the packaged release took about 50 ms of the event loop, once per few
thousand calls. ``serving_began`` freezes them (``gc.freeze``); the test runs
the installed ``rimthan-mcp serve`` and asks, as it exits, whether the
collector still sees the release it served.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.servers import ServerWorld, build_world, serve_args

BIN = Path(sys.executable).parent

# Runs the installed script as its own process would (same file, run as __main__); as it exits, how many of the
# verified releases it holds the collector still walks, and how many it holds at all.
_SEEN_AT_EXIT = """
import atexit, gc, json, runpy, sys

def seen():
    from rimthan_workflow_registry.release import VerifiedRelease
    walked = sum(isinstance(o, VerifiedRelease) for o in gc.get_objects())
    gc.unfreeze()
    held = sum(isinstance(o, VerifiedRelease) for o in gc.get_objects())
    print(json.dumps({"walked": walked, "held": held}), file=sys.stderr, flush=True)

atexit.register(seen)
script, *sys.argv[1:] = sys.argv[1:]
sys.argv[0] = script
runpy.run_path(script, run_name="__main__")
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("heap-world"))


def test_a_serving_server_keeps_its_loaded_release_out_of_the_collectors_passes(
    world: ServerWorld, tmp_path: Path
) -> None:
    args = serve_args(world, world.built["1.2.0"], state_dir=tmp_path / "state")[3:]  # after "-m MODULE serve"
    run = subprocess.run(
        [sys.executable, "-c", _SEEN_AT_EXIT, str(BIN / "rimthan-mcp"), "serve", *args, "--transport", "stdio"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}"},
    )
    assert run.returncode == 0, run.stderr
    assert "transport stdio" in run.stderr  # the control: it served (stdin ended at once)
    counts = json.loads(run.stderr.strip().splitlines()[-1])
    assert counts["held"] >= 1  # the control: the release it served is still there to be seen
    assert counts["walked"] == 0
