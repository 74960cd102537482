"""P5: server start until ``tools/list`` answers, on the packaged release, vs a bare SDK echo server.

Each measurement spawns a fresh server over stdio through the SDK client and
stops the clock when ``tools/list`` returns: interpreter start, imports,
loading and verifying the release (ours), building the runtime state, the
MCP handshake and the first request. Ours and the echo floor alternate after
one untimed start of each. Import time of both entry modules is recorded
beside it (``python -X importtime``), since that is most of a start.

Both sides start from compiled bytecode, as an installed package does
(``bytecode.py``: the runner compiles it before the first figure).
"""

from __future__ import annotations

import time
from pathlib import Path

import anyio

from .fixtures import BenchKeys
from .profiling import import_times
from .report import Figure
from .servers import ServerCommand, echo_server, rimthan_server, stdio_session
from .timing import paired

TARGET = 1.2
SERVER_MODULES = ("rimthan_workflow_mcp.cli",)
ECHO_MODULES = ("benchmarks.echo_server",)


async def _until_tools_listed(command: ServerCommand) -> float:
    started = time.perf_counter()
    async with stdio_session(command) as client:
        tools = await client.list_tools()
        elapsed = time.perf_counter() - started
    if not tools.tools:
        raise RuntimeError(f"{command.name} listed no tools")
    return elapsed


def run_p5(release: Path, keys: BenchKeys, state_dir: Path, work: Path, reps: int, profile: bool) -> Figure:
    logs = work / "p5" / "logs"
    ours_cmd = rimthan_server(release, keys.trust_dir, state_dir, logs / "rimthan-mcp.log")
    echo_cmd = echo_server(logs / "echo.log")
    ours, floor = paired(
        lambda: anyio.run(_until_tools_listed, ours_cmd), lambda: anyio.run(_until_tools_listed, echo_cmd), reps
    )
    details = {"ours_s": ours.to_json(), "floor_s": floor.to_json()}
    figure = Figure(
        "P5 start",
        "rimthan-mcp serve (stdio) on the packaged release until tools/list answers",
        ours.median,
        floor.median,
        "s",
        "ratio",
        TARGET,
        floor_what="a bare SDK low-level server with one echo tool, same client",
        details=details,
    )
    if profile:
        details["imports"] = import_times(SERVER_MODULES)
        details["echo_imports"] = import_times(ECHO_MODULES)
    return figure
