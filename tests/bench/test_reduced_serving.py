"""The ``reduced`` instrument serves as ``rimthan-mcp`` does, each ``call_tool`` inside a ``functools.reduce``.

``benchmarks/experiments/reduced_serving.py`` (``p3_server_callgrind --ours``
counts that function's instructions as our part of a call): a packaged run
through the real server, started under the instrument, completes with the
harness's checks, and the instrument wrapped every call it served.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the benchmarks are a package at the repository root
from benchmarks import bench_calls  # noqa: E402
from benchmarks.experiments.wrapped_serving import wrapped  # noqa: E402
from benchmarks.fixtures import make_keys  # noqa: E402
from benchmarks.servers import rimthan_server, stdio_session  # noqa: E402


def test_a_packaged_run_completes_and_every_call_went_through_the_reduce(tmp_path: Path) -> None:
    keys = make_keys(tmp_path / "secrets")
    release = bench_calls.packaged_release(keys, tmp_path)
    out = tmp_path / "reduced.json"
    command = wrapped("reduced", out, rimthan_server(release, keys.trust_dir, tmp_path / "state", tmp_path / "log"))

    async def go() -> tuple[str, list[str]]:
        async with stdio_session(command) as client:
            return await bench_calls.recorded_run(client, release, tmp_path / "project")

    status, made = anyio.run(go)
    assert status == "completed"
    assert "rimthan.continue_workflow" in made
    assert json.loads(out.read_text("utf-8")) == {"calls": len(made)}
