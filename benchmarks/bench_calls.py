"""P3 / P3h: one tool call through the SDK client, per tool, over a full packaged run; stdio and HTTP.

``rimthan-mcp serve`` runs the packaged research-decision 1.2.0 release; the
scripted harness drives complete runs (desk-research route, one validator
repair drill, as ``make demo`` does) through the SDK ``Client``. Beside each
of our calls, the same client calls the echo floor server's ``echo`` tool
with the very same arguments, over the same transport: same request bytes,
same client and SDK server machinery, none of our work. Per tool, the figure
is the median of our calls over the median of their echoes. The first run is
an untimed warm-up.

The echo and our call take turns going first (per tool, every other call):
where a call falls costs differently on this machine. An echo made right
after our call is slower than one made right before it (``start`` over
stdio: 1.76-1.86 ms against 1.21-1.38 ms in the same runs), while our call
moves little either way; with the echo always second, as this benchmark did
until December 2026, ``start`` read 1.46-1.66x, with it always first
1.91-2.06x. A fixed order hands one side the cheaper place; taking turns
gives each the same mix.

After both, the mirror (``mirror_server.py``) is loaded (untimed) with our
result; the same client calls it with the same arguments after our next
call and its echo: our result bytes and output schemas through the SDK, our
transport shortcuts and the client's checks, none of our work. The mirror's
median over the echo's is what a server returning these results pays for
them; ours over the mirror's is our server's work. ``make bench`` prints
both beside every P3 figure. Until December 2026 the mirror was called right
after its load, as no other call is: the load had just run the mirror's
request path (reading, parsing, dispatching), and a do-nothing server of
ours returning a cached ``start`` result read 1.07-1.25x the mirror so timed
(0.1-0.3 ms), in the same runs; timed a call later it is as cold as the echo
and our server are when their turn comes.

Where a tool is above target, the recorded calls are replayed in process
through the server's own ``call_tool`` under cProfile: that is the server-side
share (argument and result schema checks, routing, engine, serialisation).
"""

from __future__ import annotations

import json
import shutil
import statistics
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from rimthan_host.harness import (
    CatalogueExamples,
    ToolCaller,
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
from .mirror_server import LOAD
from .profiling import profile_call
from .report import Figure
from .servers import ServerCommand, echo_server, mirror_server, rimthan_server, session
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


@dataclass(frozen=True)
class Call:
    """One timed call of ours: the tool, its arguments, and our result (``CallToolResult`` as compact JSON)."""

    name: str
    arguments: dict[str, Any]
    result: str


class _Keeping:
    """An SDK client whose last ``call_tool`` result is kept, to be replayed through the mirror."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.last: types.CallToolResult | None = None

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        self.last = await self.client.call_tool(name, arguments)
        return self.last


def _as_json(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


@dataclass
class CallTimings:
    """Per tool: our calls, the echo and mirror calls made beside each, and whether that echo went first.

    ``sequence`` lists every call the client made, in order (``"echo start"``,
    ``"ours start"``, ``"load start"``, ``"mirror start"``...), untimed ones included.
    """

    ours: dict[str, list[float]] = field(default_factory=lambda: {t: [] for t in TOOLS})
    echo: dict[str, list[float]] = field(default_factory=lambda: {t: [] for t in TOOLS})
    mirror: dict[str, list[float]] = field(default_factory=lambda: {t: [] for t in TOOLS})
    echo_first: dict[str, list[bool]] = field(default_factory=lambda: {t: [] for t in TOOLS})
    recorded: list[Call] = field(default_factory=list)
    sequence: list[str] = field(default_factory=list)


class _Floors:
    """The echo and the mirror, each timed on one of our calls (``rimthan-mcp`` is timed by the caller)."""

    def __init__(self, echo: Client, mirror: Client) -> None:
        self.echo = echo
        self.mirror = mirror
        self.reflect = client_caller(mirror)  # as our call is made and checked: through the harness's caller

    async def time_echo(self, name: str, arguments: dict[str, Any]) -> float:
        """Seconds for the echo of ``arguments`` (those of our call of ``name``)."""
        started = time.perf_counter()
        echoed = await self.echo.call_tool(ECHO, arguments)
        ended = time.perf_counter()
        if echoed.is_error:
            raise RuntimeError(f"the echo floor refused {name}'s arguments")
        return ended - started

    async def load_mirror(self, call: Call) -> None:
        """Give the mirror our result of ``call`` (untimed); its next call returns it."""
        await self.mirror.call_tool(LOAD, {"result": json.loads(call.result)})

    async def time_mirror(self, call: Call, ours: dict[str, Any]) -> float:
        """Seconds for the mirror's return of our result of ``call``, loaded (:meth:`load_mirror`) a call earlier."""
        mirror_started = time.perf_counter()
        reflected = await self.reflect(call.name, call.arguments)
        mirror_ended = time.perf_counter()
        if reflected != ours:
            raise RuntimeError(f"the mirror did not return our {call.name} result")
        return mirror_ended - mirror_started


@dataclass(frozen=True)
class ServedBy:
    """How our server and the mirror are started (the experiments run them instrumented)."""

    ours: Callable[[Path, Path, Path, Path], ServerCommand] = rimthan_server
    mirror: Callable[[Path, Path], ServerCommand] = mirror_server


@asynccontextmanager
async def _servers(
    transport: str, release: Path, keys: BenchKeys, state_dir: Path, work: Path, served_by: ServedBy
) -> AsyncIterator[tuple[Client, _Floors]]:
    """``rimthan-mcp`` and, over the same transport, the echo and the mirror of our tool definitions."""
    logs = work / "logs"
    ours_cmd = served_by.ours(release, keys.trust_dir, state_dir, logs / f"rimthan-mcp-{transport}.log")
    tools = work / f"tools-{transport}.json"
    async with (
        session(ours_cmd, transport) as client,
        session(echo_server(logs / f"echo-{transport}.log"), transport) as echo,
    ):
        tools.write_text(json.dumps([_as_json(t) for t in (await client.list_tools()).tools]), "utf-8")
        async with session(served_by.mirror(tools, logs / f"mirror-{transport}.log"), transport) as mirror:
            yield client, _Floors(echo, mirror)


class _Driver:
    """The calls of one transport's runs: each of ours beside its echo, and the mirror of the call before it.

    The mirror is loaded (untimed) with our result as soon as we have it and
    timed after our next call and its echo, so no timed call follows its own
    server's previous call: each finds its server as the others left it.
    """

    def __init__(self, timings: CallTimings, client: Client, floors: _Floors) -> None:
        self.timings = timings
        self.floors = floors
        self.keeping = _Keeping(client)
        self.inner = client_caller(self.keeping)
        self.timing = False  # whether calls are recorded (the first run warms up)
        self.echo_first = dict.fromkeys(TOOLS, False)  # per tool, whether its last call's echo went before ours
        # The mirror loaded with our last result: (our call, our result, recorded).
        self.loaded: tuple[Call, dict[str, Any], bool] | None = None

    def _log(self, op: str, name: str) -> None:
        self.timings.sequence.append(f"{op} {TOOLS[name]}")

    async def _ours(self, name: str, arguments: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        self._log("ours", name)
        started = time.perf_counter()
        result = await self.inner(name, arguments)
        return time.perf_counter() - started, result

    async def _echo(self, name: str, arguments: dict[str, Any]) -> float:
        self._log("echo", name)
        return await self.floors.time_echo(name, arguments)

    async def _mirror_loaded(self) -> None:
        if self.loaded is None:
            return
        (made, result, recorded), self.loaded = self.loaded, None
        self._log("mirror", made.name)
        mirror = await self.floors.time_mirror(made, result)
        if recorded:
            self.timings.mirror[made.name].append(mirror)

    async def _load(self, made: Call, result: dict[str, Any]) -> None:
        self._log("load", made.name)
        await self.floors.load_mirror(made)
        self.loaded = (made, result, self.timing)

    async def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Our call of ``name`` (the harness's caller), its echo (before or after, in turn), the last call's mirror."""
        self.echo_first[name] = first = not self.echo_first[name]
        if first:
            echo = await self._echo(name, arguments)
            ours, result = await self._ours(name, arguments)
        else:
            ours, result = await self._ours(name, arguments)
            echo = await self._echo(name, arguments)
        # A string, not the parsed result: the client's heap (and its GC passes) stays as without it.
        made = Call(name, arguments, json.dumps(_as_json(self.keeping.last), separators=(",", ":")))
        self.keeping.last = None  # freed here, untimed, not inside our next timed call
        await self._mirror_loaded()
        await self._load(made, result)
        if self.timing:
            for kept, value in ((self.timings.ours, ours), (self.timings.echo, echo)):
                kept[name].append(value)
            self.timings.echo_first[name].append(first)
            self.timings.recorded.append(made)
        return result

    async def finish(self) -> None:
        """The last call's mirror, after an untimed echo (as every other mirror call follows two calls)."""
        if self.loaded is not None:
            made = self.loaded[0]
            await self._echo(made.name, made.arguments)
            await self._mirror_loaded()


async def packaged_run(call: ToolCaller, release: Path, project: Path) -> str:
    """One packaged run of ``release`` through the host kit's harness, each call made by ``call``: its final status."""
    examples = CatalogueExamples(
        {VERSION: release / "catalogue" / "examples"}, fail_once=DRILL, answers={"research_route": ROUTE}
    )
    harness = WorkflowHarness(call, examples, project_dir=project)
    return (await harness.run(await harness.start(WORKFLOW, initial_version=VERSION))).status


async def recorded_run(client: Client, release: Path, project: Path) -> tuple[str, list[str]]:
    """One packaged run through ``client``: its final status and the tools it called, in order."""
    made: list[str] = []
    inner = client_caller(client)

    async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        made.append(name)
        return await inner(name, arguments)

    return await packaged_run(call, release, project), made


async def drive_calls(
    transport: str,
    release: Path,
    keys: BenchKeys,
    state_dir: Path,
    work: Path,
    runs: int,
    served_by: ServedBy = ServedBy(),  # frozen: one shared default is safe
) -> CallTimings:
    """``runs`` packaged runs (after one untimed) through ``rimthan-mcp``, each call echoed (before or after, in turn)
    and mirrored."""
    timings = CallTimings()
    async with _servers(transport, release, keys, state_dir, work, served_by) as (client, floors):
        driver = _Driver(timings, client, floors)
        for run in range(runs + 1):
            driver.timing = run > 0
            examples = CatalogueExamples(
                {VERSION: release / "catalogue" / "examples"}, fail_once=DRILL, answers={"research_route": ROUTE}
            )
            project = work / "projects" / f"{transport}-{run}"
            if project.exists():
                shutil.rmtree(project)
            harness = WorkflowHarness(driver.call, examples, project_dir=project)
            final = await harness.run(await harness.start(WORKFLOW, initial_version=VERSION))
            if final.status != "completed":
                raise RuntimeError(f"the packaged run over {transport} did not complete")
        await driver.finish()
    return timings


class InProcess:
    """The served release in this process, to replay recorded calls through the server's ``call_tool``.

    Checkpoints are HMAC'd with the serving process's keys, so the replay uses
    the key file that server created in the state directory.
    """

    def __init__(self, release: Path, keys: BenchKeys, state_dir: Path) -> None:
        from rimthan_workflow_mcp.provider import ReleaseProvider
        from rimthan_workflow_mcp.server import call_tool, runtime_state

        keyring = CheckpointKeyring.load(state_dir / KEYS_FILE)
        self._state = runtime_state(ReleaseProvider.open(release, trust=load_trust(keys.trust_dir), keyring=keyring))
        self._call_tool = call_tool

    def call(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """One call through the server's ``call_tool``, as served (never raises: a refusal is an error result)."""
        result: types.CallToolResult = self._call_tool(self._state, name, arguments)
        return result

    def replay(self, recorded: list[Call], *, pause: float = 0.0) -> dict[str, list[float]]:
        """Seconds of each recorded call, per tool; ``pause``: seconds idle before each (as between served calls)."""
        per_tool: dict[str, list[float]] = {t: [] for t in TOOLS}
        for call in recorded:
            if pause:
                time.sleep(pause)
            started = time.perf_counter()
            result = self.call(call.name, call.arguments)
            per_tool[call.name].append(time.perf_counter() - started)
            if result.is_error:
                raise RuntimeError(f"replaying {call.name} in process was refused: {result.structured_content}")
        return per_tool


def _server_profile(replaying: InProcess, recorded: list[Call]) -> dict[str, Any]:
    """The recorded calls replayed in process, back to back, warm: what one call costs the server, profiled."""
    replaying.replay(recorded)
    in_process = {TOOLS[t]: statistics.median(v) for t, v in replaying.replay(recorded).items() if v}
    summary = profile_call(lambda: replaying.replay(recorded))
    summary["in_process_call_s"] = in_process
    return summary


def _mirror(timings: CallTimings, tool: str, ours: float, echo: float) -> dict[str, Any]:
    mirror = statistics.median(timings.mirror[tool])
    return {
        "median_s": mirror,
        "over_echo": mirror / echo,
        "ours_over_mirror": ours / mirror,
        "result_bytes": statistics.median(len(c.result) for c in timings.recorded if c.name == tool),
    }


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
        timings = anyio.run(drive_calls, transport, release, keys, state_dir, work / "p3", runs)
        label = "P3" if transport == "stdio" else "P3h"
        rows = []
        for tool, short in TOOLS.items():
            ours, echo = statistics.median(timings.ours[tool]), statistics.median(timings.echo[tool])
            details = {
                "calls": len(timings.ours[tool]),
                "ours_s": timings.ours[tool],
                "echo_s": timings.echo[tool],
                "mirror_s": timings.mirror[tool],
                "echo_first": timings.echo_first[tool],
                "mirror": _mirror(timings, tool, ours, echo),
            }
            rows.append(
                Figure(
                    f"{label} {short}",
                    f"{tool} through the SDK client over {transport}, median over {runs} packaged run(s)",
                    ours,
                    echo,
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
            above[0].details["profile"] = _server_profile(InProcess(release, keys, state_dir), timings.recorded)
    return figures


def render_mirror(figures: list[Figure]) -> str:
    """Each call's mirror beside its echo and ours, and for figures above target what the target leaves us.

    ``left`` is the time the target allows beyond the mirror (``target x echo -
    mirror``): what a server returning our results may spend on its own work.
    ``ours`` is what our server spends (ours - mirror). A negative ``left``
    would mean that no server returning these results meets the target here.
    """
    rows = [f for f in figures if "mirror" in f.details]
    if not rows:
        return ""
    lines = [
        "the same results from a server that does none of our work (the mirror, benchmarks/mirror_server.py):",
        f"  {'figure':<13} {'result':>8} {'mirror':>9} {'mirror/echo':>11} {'ours/mirror':>11} {'left':>9} {'ours':>9}",
    ]
    for f in rows:
        m = f.details["mirror"]
        assert f.floor is not None
        left, spent = f.target * f.floor - m["median_s"], f.ours - m["median_s"]
        lines.append(
            f"  {f.id:<13} {m['result_bytes'] / 1000:>6.1f} kB {m['median_s'] * 1000:>6.2f} ms "
            f"{m['over_echo']:>10.2f}x {m['ours_over_mirror']:>10.2f}x {left * 1000:>6.2f} ms {spent * 1000:>6.2f} ms"
        )
    beyond = [f.id for f in rows if not f.met and f.details["mirror"]["over_echo"] > f.target]
    if beyond:
        lines.append(
            f"  above target with the mirror itself above it ({len(beyond)}): {', '.join(beyond)}: "
            "no server returning these results reaches the target on this machine"
        )
    return "\n".join(lines)
