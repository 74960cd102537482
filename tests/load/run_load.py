"""Load and fault test (``make load``): replicas, refresh, a corrupt release and a killed process under load.

Two ``rimthan-mcp serve --transport http`` processes on loopback share a
releases directory and one checkpoint key file (each keeps its own state
directory, as separate machines would). Thirty-two concurrent clients each
drive the packaged research-decision workflow to completion three times, with the
scripted harness (``rimthan_host.harness``); every tool call is one
stateless Streamable HTTP POST sent to a randomly chosen process - what
replicas behind an ordinary load balancer see. While they run:

1. research-decision 1.3.0 is published into the releases directory and both
   processes are refreshed (SIGHUP): runs already going stay on 1.2.0, new
   runs start on 1.3.0;
2. one process is killed (SIGKILL) and, later, restarted on the same port;
3. a corrupt 1.4.0 (validly signed, one byte flipped afterwards) is published
   and both are refreshed: both refuse it and keep serving 1.3.0.

Like a load balancer, the router sends a call to the other process when the
chosen one cannot be reached (connection refused while it is down) or does not
hold the release a checkpoint is pinned to (a restarted process holds only the
release it started on); both are counted and printed. New runs are admitted
again once both processes report the refreshed release. Everything is bounded
(``--clients``, ``--runs-per-client``, ``--deadline``). The script exits 1 unless:
0 failed calls, 0 runs lost, every run finished on the release it started on,
every fault step happened, and both processes end on 1.3.0.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import httpx2
import tomli_w
from rimthan_host.harness import CatalogueExamples, ToolRefused, WorkflowHarness
from rimthan_host.protocol import ToolCaller
from rimthan_packager.build import build_release
from rimthan_packager.keygen import generate_keypair
from rimthan_packager.signing import load_signing_key
from rimthan_workflow_registry.run.tokens import CheckpointKeyring

REPO = Path(__file__).resolve().parents[2]
SOURCES = REPO / "catalogues" / "research-decision"
CATALOGUE = "research-decision"
PROTOCOL = "2025-11-25"
ROUTES = ("desk-research", "user-interviews", "experiment")
START_SECONDS = 60.0
CORRUPTED_FILE = "catalogue/assets/instructions/interview.md"


# --------------------------------------------------------------------------- server processes


@dataclass
class Replica:
    """One ``rimthan-mcp serve --transport http`` process and its stderr (JSON log lines)."""

    name: str
    args: list[str]
    state_dir: Path
    port: int = 0
    process: subprocess.Popen[str] | None = None
    lines: list[str] = field(default_factory=list)
    up: bool = False
    generation: int = 0  # 1 for the first process, 2 after a restart

    @property
    def label(self) -> str:
        return self.name if self.generation <= 1 else f"{self.name} (restarted)"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self, release: Path) -> None:
        self.spawn(["--release", str(release)])

    def spawn(self, release_args: Sequence[str]) -> None:
        """``rimthan-mcp serve`` over HTTP on this replica's port (0: any), until it says where it listens."""
        command = [
            str(Path(sys.executable).with_name("rimthan-mcp")),
            "serve",
            "--transport",
            "http",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            *release_args,
            "--state-dir",
            str(self.state_dir),
            *self.args,
        ]
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        stream = self.process.stderr
        assert stream is not None
        threading.Thread(target=lambda: self.lines.extend(iter(stream.readline, "")), daemon=True).start()
        match = self.wait_for(r"listening on http://127\.0\.0\.1:(\d+)/mcp", after=len(self.lines) - 1)
        self.port = int(match.group(1))
        self.generation += 1
        self.up = True

    def wait_for(self, pattern: str, *, after: int = 0, timeout: float = START_SECONDS) -> re.Match[str]:
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.lines[max(after, 0) :]:
                if match := regex.search(line):
                    return match
            if self.process is not None and self.process.poll() is not None and not regex.search("".join(self.lines)):
                break
            time.sleep(0.05)
        raise RuntimeError(f"{self.name}: no line matching {pattern!r}:\n{''.join(self.lines[-20:])}")

    def kill(self) -> None:
        self.up = False
        assert self.process is not None
        self.process.kill()
        self.process.wait(timeout=30)

    def refresh(self) -> dict[str, Any]:
        """SIGHUP, then the ``refresh done`` log record it produced."""
        mark = len(self.lines)
        assert self.process is not None
        self.process.send_signal(signal.SIGHUP)
        match = self.wait_for(r'^\{.*"event": "refresh done".*\}$', after=mark)
        record: dict[str, Any] = json.loads(match.group(0))
        return record

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()


# --------------------------------------------------------------------------- routing calls


@dataclass
class Stats:
    calls: int = 0
    failed_calls: int = 0
    rerouted_unreachable: int = 0
    rerouted_pinned: int = 0
    by_replica: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)


class Router:
    """Each call to a random replica; the other one if the first cannot serve it (as a load balancer would)."""

    def __init__(self, replicas: Sequence[Replica], http: httpx2.AsyncClient, stats: Stats) -> None:
        self.replicas = list(replicas)
        self.http = http
        self.stats = stats
        self._ids = iter(range(1, 1 << 62))

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        order = random.sample(self.replicas, len(self.replicas))
        last: Exception | None = None
        for attempt, replica in enumerate(order):
            if not replica.up:
                if attempt + 1 < len(order):
                    self.stats.rerouted_unreachable += 1
                continue
            try:
                result = await self._post(replica, tool, arguments)
            except httpx2.TransportError as exc:  # the process is gone (killed) or not yet back
                last = exc
                self.stats.rerouted_unreachable += 1
                continue
            payload = result.get("structuredContent") or {}
            if result.get("isError"):
                error = payload.get("error") or {"code": "unknown", "message": json.dumps(result)[:300]}
                if error.get("code") == "pinned_release_unavailable" and attempt + 1 < len(order):
                    self.stats.rerouted_pinned += 1
                    continue
                self._fail(f"{tool} on {replica.name}: {error.get('code')}: {error.get('message')}")
                raise ToolRefused(tool, error)
            self.stats.calls += 1
            self.stats.by_replica[replica.label] += 1
            return payload
        self._fail(f"{tool}: no replica could serve it ({last!r})")
        raise RuntimeError(f"{tool}: no replica could serve it")

    def _fail(self, message: str) -> None:
        self.stats.failed_calls += 1
        self.stats.failures.append(message)

    async def _post(self, replica: Replica, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        body = {
            "jsonrpc": "2.0",
            "id": next(self._ids),
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        }
        response = await self.http.post(
            replica.url,
            json=body,
            headers={"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": PROTOCOL},
        )
        if response.status_code != 200:
            raise ToolRefused(tool, {"code": f"http_{response.status_code}", "message": response.text[:300]})
        message = response.json()
        if "error" in message:
            raise ToolRefused(tool, {"code": "jsonrpc_error", "message": json.dumps(message["error"])[:300]})
        result: dict[str, Any] = message["result"]
        return result


# --------------------------------------------------------------------------- the releases


@dataclass(frozen=True)
class Releases:
    built: dict[str, Path]
    corrupt: Path
    trust: Path
    keys_file: Path


def _bumped_source(work: Path, version: str) -> Path:
    source = work / "sources" / "research-decision" / version  # the layout a build checks: NAME/VERSION
    shutil.copytree(SOURCES / "1.3.0", source)
    catalogue = tomllib.loads((source / "catalogue.toml").read_text("utf-8"))
    catalogue["catalogue"]["version"] = version
    (source / "catalogue.toml").write_text(tomli_w.dumps(catalogue), "utf-8")
    return source


def replica_args(releases_dir: Path, releases: Releases) -> list[str]:
    """What every replica is started with: its releases directory, the trust, the shared key file, info logs."""
    return [
        "--releases-dir",
        str(releases_dir),
        "--trust",
        str(releases.trust),
        "--checkpoint-keys",
        str(releases.keys_file),
        "--log-level",
        "info",
    ]


def prepare_releases(work: Path, *, corrupt_on_disk: bool = True) -> Releases:
    """Sign 1.2.0, 1.3.0 and 1.4.0; one shared checkpoint key file.

    ``corrupt_on_disk`` flips one byte of the signed 1.4.0 (published into a
    releases directory); otherwise it is corrupted where it is pushed.
    """
    generated = generate_keypair(work / "keys" / "release-engineer")
    key = load_signing_key(generated.private_path)
    trust = work / "trust"
    trust.mkdir()
    shutil.copyfile(generated.public_path, trust / generated.public_path.name)
    built = {v: build_release(SOURCES / v, [key], work / "built").path for v in ("1.2.0", "1.3.0")}
    corrupt = build_release(_bumped_source(work, "1.4.0"), [key], work / "built").path
    if corrupt_on_disk:
        target = corrupt / CORRUPTED_FILE
        data = bytearray(target.read_bytes())
        data[len(data) // 2] ^= 0x20
        target.write_bytes(bytes(data))
    keys_file = work / "state-shared" / "checkpoint-keys.json"
    CheckpointKeyring.generate().save(keys_file)
    return Releases(built=built, corrupt=corrupt, trust=trust, keys_file=keys_file)


# --------------------------------------------------------------------------- the run


@dataclass
class RunOutcome:
    client: int
    index: int
    started_on: str | None = None
    finished_on: str | None = None
    completed: bool = False
    error: str | None = None
    finished_at_call: int = 0


@dataclass
class Load:
    args: argparse.Namespace
    work: Path
    releases: Releases
    replicas: list[Replica]
    stats: Stats = field(default_factory=Stats)
    outcomes: list[RunOutcome] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    expected_version: str = "1.2.0"
    refreshed_at_call: int = 0
    admitting: bool = True  # False while a refresh rolls out: new runs wait, runs in flight go on
    done_clients: int = 0
    rejected_codes: dict[str, list[str]] = field(default_factory=dict)  # by replica, from the last rejecting refresh

    @property
    def releases_dir(self) -> Path:
        return self.work / "releases"

    def publish(self, path: Path) -> Path:
        target = self.releases_dir / path.name
        shutil.copytree(path, target)
        return target

    def note(self, message: str) -> None:
        self.events.append(f"[calls {self.stats.calls:5d}] {message}")
        print(self.events[-1], flush=True)

    async def client(self, number: int, router: Router) -> None:
        examples = {v: SOURCES / v / "examples" for v in ("1.2.0", "1.3.0")}
        for index in range(self.args.runs_per_client):
            outcome = RunOutcome(number, index)
            self.outcomes.append(outcome)
            while not self.admitting:
                await anyio.sleep(0.02)
            version = self.expected_version
            project = self.work / "projects" / f"client-{number:02d}-run-{index}"
            harness = WorkflowHarness(
                self.caller(number, index, router),
                CatalogueExamples(examples, answers={"research_route": ROUTES[(number + index) % 3]}),
                project_dir=project,
            )
            try:
                started = await harness.start("research", initial_version=version)
                outcome.started_on = started.release
                final = await harness.run(started)
                outcome.finished_on = final.release
                outcome.completed = final.status == "completed"
                outcome.finished_at_call = router.stats.calls
            except Exception as exc:  # a lost run: recorded and reported, the others go on
                outcome.error = f"{type(exc).__name__}: {exc}"
        self.done_clients += 1

    def caller(self, number: int, index: int, router: Router) -> ToolCaller:
        """How run ``index`` of client ``number`` sends its tool calls: through the router."""
        return router.call

    async def at_calls(self, fraction: float) -> bool:
        """Wait until ``fraction`` of the expected calls were served; False if the clients finished first."""
        target = int(fraction * self.args.expected_calls)
        while self.stats.calls < target:
            if self.done_clients == self.args.clients:
                return False
            await anyio.sleep(0.02)
        return True

    async def refresh_all(self, expect_outcome: str) -> None:
        for replica in self.replicas:
            if not replica.up:
                continue
            record = await anyio.to_thread.run_sync(replica.refresh)
            rejected = [r["error"]["code"] for r in record["rejected"]]
            self.note(
                f"{replica.name} refresh: {record['outcome']}, active {record['active']}"
                + (f", rejected {rejected}" if rejected else "")
            )
            if record["outcome"] != expect_outcome:
                raise RuntimeError(f"{replica.name}: refresh {record['outcome']!r}, expected {expect_outcome!r}")
            if expect_outcome == "rejected":
                self.rejected_codes[replica.name] = rejected
            if expect_outcome == "activated" and not self.refreshed_at_call:
                self.refreshed_at_call = self.stats.calls  # from here a replica's active release is 1.3.0

    async def faults(self) -> None:
        """The scripted faults, each at a point in the run measured in served calls (not time)."""
        b = self.replicas[1]
        if not await self.at_calls(0.1):
            return
        self.admitting = False  # hold new runs until both replicas serve the new release
        self.publish(self.releases.built["1.3.0"])
        self.note("published research-decision 1.3.0")
        await self.refresh_all("activated")
        self.expected_version = "1.3.0"
        self.admitting = True
        if not await self.at_calls(0.3):
            return
        await anyio.to_thread.run_sync(b.kill)
        self.note(f"killed {b.name} (SIGKILL)")
        if not await self.at_calls(0.35):
            return
        await anyio.to_thread.run_sync(b.start, self.releases_dir / f"{CATALOGUE}-1.3.0")
        self.note(f"restarted {b.name} on port {b.port} with research-decision 1.3.0")
        if not await self.at_calls(0.6):
            return
        self.publish(self.releases.corrupt)
        self.note("published a corrupt research-decision 1.4.0 (signed, then one byte flipped)")
        await self.refresh_all("rejected")
        self.events.append("all faults done")

    async def run(self) -> None:
        limits = httpx2.Limits(max_connections=self.args.clients * 2, max_keepalive_connections=self.args.clients)
        async with httpx2.AsyncClient(timeout=120.0, limits=limits) as http:
            router = Router(self.replicas, http, self.stats)
            with anyio.fail_after(self.args.deadline):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self.faults)
                    for number in range(self.args.clients):
                        tg.start_soon(self.client, number, router)


def load_parser(doc: str | None, *, runs_per_client: int) -> argparse.ArgumentParser:
    """The bounds every load script takes (clients, runs, deadline); the script adds its own."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--runs-per-client", type=int, default=runs_per_client)
    parser.add_argument("--deadline", type=float, default=900.0, help="bound on the whole run, seconds")
    parser.add_argument("--calls-per-run", type=int, default=10, help="estimate, to place the faults")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    return parser


def parse_load_args(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    args = parser.parse_args(argv)
    args.expected_calls = args.clients * args.runs_per_client * args.calls_per_run
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_load_args(load_parser(__doc__, runs_per_client=3), argv)
    work = Path(tempfile.mkdtemp(prefix="rimthan-load-"))
    replicas: list[Replica] = []
    started = time.monotonic()
    try:
        releases = prepare_releases(work)
        (work / "releases").mkdir()
        shared = replica_args(work / "releases", releases)
        replicas = [Replica(name, shared, work / f"state-{name}") for name in ("replica-a", "replica-b")]
        load = Load(args, work, releases, replicas)
        first = load.publish(releases.built["1.2.0"])
        for replica in replicas:
            replica.start(first)
        load.note(
            f"2 replicas on loopback ({', '.join(r.url for r in replicas)}) serving research-decision 1.2.0; "
            f"{args.clients} clients x {args.runs_per_client} runs"
        )
        anyio.run(load.run)
        return report(load, time.monotonic() - started)
    finally:
        for replica in replicas:
            replica.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def report(load: Load, seconds: float) -> int:
    finals = {r.name: r.refresh() for r in load.replicas if r.up}
    ok = report_runs(
        load,
        seconds,
        finals,
        rerouted=f"{load.stats.rerouted_unreachable} (process down), {load.stats.rerouted_pinned} "
        "(pinned release not held by the restarted process)",
    )
    print("RESULT", "PASS" if ok else "FAIL")
    return 0 if ok else 1


def crossed_runs(load: Load) -> list[RunOutcome]:
    """Completed runs started on 1.2.0 that finished after a replica activated 1.3.0."""
    return [
        o
        for o in load.outcomes
        if o.completed and o.started_on == f"{CATALOGUE}@1.2.0" and o.finished_at_call > load.refreshed_at_call
    ]


def report_runs(
    load: Load,
    seconds: float,
    finals: dict[str, dict[str, Any]],
    *,
    rerouted: str,
    head: Sequence[str] = (),
    extra: Sequence[str] = (),
) -> bool:
    """Print what every load script reports; True when its common conditions hold.

    0 failed calls, 0 runs lost, every run finished on the release it started
    on, runs on both releases, every fault step happened, every replica ends
    on 1.3.0. ``head`` and ``extra`` are the script's own lines.
    """
    stats, outcomes = load.stats, load.outcomes
    lost = [o for o in outcomes if not o.completed]
    switched = [o for o in outcomes if o.completed and o.started_on != o.finished_on]
    by_release = Counter(o.started_on for o in outcomes if o.completed)
    crossed = crossed_runs(load)
    print()
    for line in head:
        print(line)
    print(f"calls served          {stats.calls}  ({dict(stats.by_replica)})")
    print(f"failed calls          {stats.failed_calls}")
    print(f"rerouted calls        {rerouted}")
    print(f"runs                  {len(outcomes)} started, {len(outcomes) - len(lost)} completed, {len(lost)} lost")
    print(f"runs by release       {dict(by_release)}")
    print(f"finished elsewhere    {len(switched)} (every run must finish on the release it started on)")
    print(f"crossed the refresh   {len(crossed)} runs started on 1.2.0 finished after a replica activated 1.3.0")
    for line in extra:
        print(line)
    actives = ", ".join(f"{name}: {record['active']}" for name, record in finals.items())
    print(f"final active          {actives}")
    print(f"wall time             {seconds:.1f} s (informative only)")
    for failure in stats.failures[:10]:
        print(f"  failure: {failure}")
    for outcome in lost[:10]:
        print(f"  lost: client {outcome.client} run {outcome.index}: {outcome.error}")
    return (
        stats.failed_calls == 0
        and not lost
        and not switched
        and "all faults done" in load.events
        and set(by_release) == {f"{CATALOGUE}@1.2.0", f"{CATALOGUE}@1.3.0"}
        and len(finals) == len(load.replicas)
        and all(r["active"] == f"{CATALOGUE}@1.3.0" for r in finals.values())
    )


if __name__ == "__main__":
    sys.exit(main())
