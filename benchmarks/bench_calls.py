"""P3 / P3h: one tool call through the SDK client, per tool, over a full packaged run; stdio and HTTP.

``rimthan-mcp serve`` runs the packaged research-decision 1.2.0 release; the
scripted harness drives complete runs (desk-research route, one validator
repair drill, as ``make demo`` does) through the SDK ``Client``. Right after
each of our calls, the same client calls the echo floor server's ``echo``
tool with the very same arguments, over the same transport: same request
bytes, same client and SDK server machinery, none of our work. Per tool, the
figure is the median of our calls over the median of their echoes. The first
run is an untimed warm-up.

Where a tool is above target, the recorded calls are replayed in process
through the server's own ``call_tool`` under cProfile: that is the server-side
share (argument and result schema checks, routing, engine, serialisation).
"""

from __future__ import annotations

import shutil
import statistics
import time
from pathlib import Path
from typing import Any

import anyio
from rimthan_host.harness import (
    CatalogueExamples,
    WorkflowHarness,
    client_caller,
)
from rimthan_packager.build import build_release
from rimthan_packager.signing import load_signing_key
from rimthan_workflow_mcp.cli import KEYS_FILE
from rimthan_workflow_mcp.tool_contracts import (
    CONTINUE_WORKFLOW,
    PREPARE_STEP_VALIDATION,
    START_WORKFLOW,
    SUBMIT_STEP_VALIDATION,
)
from rimthan_workflow_registry.release import load_trust
from rimthan_workflow_registry.run import CheckpointKeyring

from .echo_server import ECHO
from .fixtures import BenchKeys
from .profiling import profile_call
from .report import Figure
from .servers import echo_server, rimthan_server, session
from .synthetic import BASE_SOURCE

TARGET = 1.5
TOOLS = {
    START_WORKFLOW: "start",
    CONTINUE_WORKFLOW: "continue",
    PREPARE_STEP_VALIDATION: "prepare",
    SUBMIT_STEP_VALIDATION: "submit",
}
WORKFLOW = "research"
VERSION = "1.2.0"
ROUTE = "desk-research"
DRILL = frozenset({"decision-critic"})


def packaged_release(keys: BenchKeys, work: Path) -> Path:
    """The packaged research-decision 1.2.0 catalogue, built and signed with this run's key."""
    out = work / "packaged"
    if out.exists():
        shutil.rmtree(out)
    return build_release(BASE_SOURCE, [load_signing_key(keys.private_key)], out).path


Recorded = list[tuple[str, dict[str, Any]]]


async def _drive(
    transport: str, release: Path, keys: BenchKeys, state_dir: Path, work: Path, runs: int
) -> tuple[dict[str, list[float]], dict[str, list[float]], Recorded]:
    logs = work / "logs"
    ours_cmd = rimthan_server(release, keys.trust_dir, state_dir, logs / f"rimthan-mcp-{transport}.log")
    ours: dict[str, list[float]] = {t: [] for t in TOOLS}
    echo: dict[str, list[float]] = {t: [] for t in TOOLS}
    recorded: Recorded = []
    timing = {"on": False}
    async with (
        session(ours_cmd, transport) as client,
        session(echo_server(logs / f"echo-{transport}.log"), transport) as floor,
    ):
        inner = client_caller(client)

        async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
            started = time.perf_counter()
            result = await inner(name, arguments)
            middle = time.perf_counter()
            echoed = await floor.call_tool(ECHO, arguments)
            ended = time.perf_counter()
            if echoed.is_error:
                raise RuntimeError(f"the echo floor refused {name}'s arguments")
            if timing["on"]:
                ours[name].append(middle - started)
                echo[name].append(ended - middle)
                recorded.append((name, arguments))
            return result

        for run in range(runs + 1):
            timing["on"] = run > 0
            examples = CatalogueExamples({VERSION: release / "catalogue" / "examples"}, ROUTE, fail_once=DRILL)
            project = work / "projects" / f"{transport}-{run}"
            if project.exists():
                shutil.rmtree(project)
            harness = WorkflowHarness(call, examples, project_dir=project)
            final = await harness.run(await harness.start(WORKFLOW, initial_version=VERSION))
            if final.get("status") != "completed":
                raise RuntimeError(f"the packaged run over {transport} did not complete")
    return ours, echo, recorded


def _server_profile(release: Path, keys: BenchKeys, keyring: CheckpointKeyring, recorded: Recorded) -> dict[str, Any]:
    """The recorded calls replayed in process through the server's ``call_tool`` (what one call costs it).

    Checkpoints are HMAC'd with the serving process's keys, so the replay uses
    the key file that server created in the state directory.
    """
    from rimthan_workflow_mcp.provider import ReleaseProvider
    from rimthan_workflow_mcp.server import call_tool, runtime_state

    state = runtime_state(ReleaseProvider.open(release, trust=load_trust(keys.trust_dir), keyring=keyring))
    per_tool: dict[str, list[float]] = {t: [] for t in TOOLS}

    def replay() -> None:
        for name, arguments in recorded:
            started = time.perf_counter()
            result = call_tool(state, name, arguments)
            per_tool[name].append(time.perf_counter() - started)
            if result.is_error:
                raise RuntimeError(f"replaying {name} in process was refused: {result.structured_content}")

    replay()
    for values in per_tool.values():
        values.clear()
    replay()
    in_process = {TOOLS[t]: statistics.median(v) for t, v in per_tool.items() if v}
    summary = profile_call(replay)
    summary["in_process_call_s"] = in_process
    return summary


def run_p3(
    release: Path,
    keys: BenchKeys,
    state_dir: Path,
    work: Path,
    runs: int,
    profile: bool,
    transports: tuple[str, ...] = ("stdio", "http"),
) -> list[Figure]:
    figures: list[Figure] = []
    for transport in transports:
        ours, echo, recorded = anyio.run(_drive, transport, release, keys, state_dir, work / "p3", runs)
        label = "P3" if transport == "stdio" else "P3h"
        rows = []
        for tool, short in TOOLS.items():
            details = {"calls": len(ours[tool]), "ours_s": ours[tool], "echo_s": echo[tool]}
            rows.append(
                Figure(
                    f"{label} {short}",
                    f"{tool} through the SDK client over {transport}, median over {runs} packaged run(s)",
                    statistics.median(ours[tool]),
                    statistics.median(echo[tool]),
                    "s",
                    "ratio",
                    TARGET,
                    floor_what=f"the SDK echo tool over {transport}, same client, same arguments",
                    details=details,
                )
            )
        figures += rows
        above = [f for f in rows if not f.met]
        if profile and transport == "stdio" and above:
            keyring = CheckpointKeyring.load(state_dir / KEYS_FILE)
            above[0].details["profile"] = _server_profile(release, keys, keyring, recorded)
    return figures
