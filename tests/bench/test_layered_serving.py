"""The ``layered`` instrument serves over HTTP as ``rimthan-mcp`` does, each layer of a call inside its marker.

``benchmarks/experiments/layered_serving.py`` (``p3_server_callgrind
--layers`` counts each marker's instructions as its layer's): a marked
coroutine returns, raises and is cancelled as the coroutine itself; a
packaged run over Streamable HTTP through the real server, started under the
instrument, completes with the harness's checks, and the instrument wrapped
every call it served.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the benchmarks are a package at the repository root
from benchmarks import bench_calls  # noqa: E402
from benchmarks.experiments.layered_serving import LAYERS, marked  # noqa: E402
from benchmarks.experiments.wrapped_serving import wrapped  # noqa: E402
from benchmarks.fixtures import make_keys  # noqa: E402
from benchmarks.servers import http_process, http_session, rimthan_server  # noqa: E402


@pytest.mark.parametrize("layer", sorted({name for name, _ in LAYERS.values()}))
def test_a_marked_coroutine_returns_raises_and_is_cancelled_as_itself(layer: str) -> None:
    async def waits_then(value: int) -> int:
        await anyio.sleep(0)
        if value < 0:
            raise ValueError(value)
        return value * 2

    async def go() -> tuple[int, str, bool]:
        counted = marked(layer, waits_then)
        doubled = await counted(21)
        with pytest.raises(ValueError) as raised:
            await counted(-1)
        with anyio.move_on_after(0.01) as scope:
            await marked(layer, anyio.sleep)(60)
        return doubled, str(raised.value), scope.cancelled_caught

    assert anyio.run(go) == (42, "-1", True)


def test_a_packaged_run_over_http_completes_and_every_call_went_through_its_marker(tmp_path: Path) -> None:
    keys = make_keys(tmp_path / "secrets")
    release = bench_calls.packaged_release(keys, tmp_path)
    out = tmp_path / "layered.json"
    command = wrapped("layered", out, rimthan_server(release, keys.trust_dir, tmp_path / "state", tmp_path / "log"))

    async def go(url: str) -> tuple[str, list[str]]:
        async with http_session(url) as client:
            return await bench_calls.recorded_run(client, release, tmp_path / "project")

    with http_process(command) as server:
        status, made = anyio.run(go, server.url)
    assert status == "completed"
    assert "rimthan.continue_workflow" in made
    assert json.loads(out.read_text("utf-8")) == {"calls": len(made)}
