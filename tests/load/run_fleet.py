"""Fleet test (``make fleet``): three replicas follow one OCI repository under load.

A real registry (Debian's ``docker-registry``) runs on loopback. Three
``rimthan-mcp serve --transport http --releases-from oci://...`` processes,
each with its own releases and state directory (as separate machines would)
and one shared checkpoint key file, start from what the repository holds:
research-decision 1.2.0. Thirty-two concurrent clients drive the packaged
workflow with the scripted harness (``rimthan_host.harness``); every tool call
is one stateless Streamable HTTP POST to a randomly chosen replica, as behind
a load balancer. While they run:

1. half of the first runs (``--held-runs``) start on 1.2.0, make three calls
   and are held there; once all are held, 1.3.0 is pushed to the registry and
   every replica is refreshed (SIGHUP): each pulls it, verifies it and
   activates it. Only when every replica reports 1.3.0 active are the held
   runs released: they finish on random replicas that all serve 1.3.0, each
   call served from the 1.2.0 release the run is pinned to. Other runs already
   going stay on 1.2.0 as well, new runs start on 1.3.0;
2. a corrupt 1.4.0 is pushed (a consistent OCI artifact whose release does
   not verify: one file's bytes changed after signing) and every replica is
   refreshed: each refuses it, nothing lands in its releases directory, and
   1.3.0 stays active.

Bounded in count and time (``--clients``, ``--runs-per-client``,
``--deadline``; a held run waits at most ``--hold-timeout``). Exits 1
unless: 0 failed calls, 0 lost runs, every run finished on the release it
started on, runs on both releases, at least the held runs crossed the refresh
(started on 1.2.0, finished after 1.3.0 was activated), every replica ends on
1.3.0, refused 1.4.0 and holds no 1.4.0 directory.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
from rimthan_host.protocol import ToolCaller

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "tests"), str(REPO / "tests" / "load")]

from rimthan_packager.oci import push_release  # noqa: E402
from rimthan_workflow_registry.release.oci import parse_reference  # noqa: E402
from rimthan_workflow_registry.release.trust import load_trust  # noqa: E402
from run_load import (  # noqa: E402
    CATALOGUE,
    CORRUPTED_FILE,
    Load,
    Replica,
    Router,
    crossed_runs,
    load_parser,
    parse_load_args,
    prepare_releases,
    replica_args,
    report_runs,
)
from support.oci import push_corrupt  # noqa: E402
from support.registry import LocalRegistry, start_registry  # noqa: E402

REPOSITORY = "rimthan/research-decision"
HELD_AFTER_CALLS = 3  # a held run's start and two more calls, before the refresh


@dataclass
class Hold:
    """Runs held mid-way on 1.2.0 until every replica has activated 1.3.0 (created in the event loop)."""

    runs: int
    timeout: float
    arrived: int = 0
    all_arrived: anyio.Event = field(default_factory=anyio.Event)
    released: anyio.Event = field(default_factory=anyio.Event)

    def holding(self, call: ToolCaller) -> ToolCaller:
        """``call``, except that the call after the first HELD_AFTER_CALLS waits for the release."""
        made = 0

        async def held(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
            nonlocal made
            if made == HELD_AFTER_CALLS:
                await self.hold()
            made += 1
            return await call(tool, arguments)

        return held

    async def hold(self) -> None:
        self.arrived += 1
        if self.arrived == self.runs:
            self.all_arrived.set()
        with anyio.move_on_after(self.timeout):
            await self.released.wait()
        if not self.released.is_set():
            raise RuntimeError(f"held run: the replicas did not all activate 1.3.0 within {self.timeout:.0f} s")

    async def all_held(self) -> bool:
        """Wait (bounded) until every held run is waiting; False if some never got there."""
        with anyio.move_on_after(self.timeout):
            await self.all_arrived.wait()
        return self.all_arrived.is_set()


class FollowingReplica(Replica):
    """A replica started with ``--releases-from`` only: it finds its release in the registry."""

    def start(self, release: Path | None = None) -> None:
        self.spawn([])


@dataclass
class Fleet(Load):
    registry: LocalRegistry | None = None
    hold: Hold | None = None

    @property
    def held(self) -> Hold:
        assert self.hold is not None, "created when the run starts"
        return self.hold

    @property
    def ref(self) -> str:
        assert self.registry is not None
        return self.registry.ref(REPOSITORY)

    def push(self, version: str) -> str:
        trust = load_trust(self.releases.trust)
        return push_release(self.releases.built[version], parse_reference(self.ref), trust, plain_http=True).oci_digest

    def push_corrupt(self) -> str:
        return push_corrupt(self.releases.corrupt, self.ref, load_trust(self.releases.trust), CORRUPTED_FILE)

    def caller(self, number: int, index: int, router: Router) -> ToolCaller:
        """The first run of the first ``--held-runs`` clients is held across the refresh."""
        return self.held.holding(router.call) if index == 0 and number < self.held.runs else router.call

    async def run(self) -> None:
        self.hold = Hold(self.args.held_runs, self.args.hold_timeout)
        await super().run()

    async def faults(self) -> None:
        held = self.held
        if not await held.all_held():
            self.note(f"only {held.arrived} of {held.runs} runs to hold got there")
        self.note(f"{held.arrived} runs started on 1.2.0 held after {HELD_AFTER_CALLS} calls each")
        self.admitting = False  # hold new runs until every replica serves the new release
        digest = await anyio.to_thread.run_sync(self.push, "1.3.0")
        self.note(f"pushed research-decision 1.3.0 to {self.ref} ({digest[:19]}...)")
        await self.refresh_all("activated")
        self.expected_version = "1.3.0"
        self.admitting = True
        held.released.set()
        self.note(f"every replica active on 1.3.0: {held.arrived} held runs released")
        if not await self.at_calls(0.5):
            return
        digest = await anyio.to_thread.run_sync(self.push_corrupt)
        self.note(f"pushed a corrupt research-decision 1.4.0 ({digest[:19]}...): one file changed after signing")
        await self.refresh_all("rejected")
        self.events.append("all faults done")


def main(argv: Sequence[str] | None = None) -> int:
    parser = load_parser(__doc__, runs_per_client=2)
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--held-runs", type=int, help="first runs held across the refresh (default: half the clients)")
    parser.add_argument("--hold-timeout", type=float, default=300.0, help="bound on holding them, seconds")
    args = parse_load_args(parser, argv)
    if args.held_runs is None:
        args.held_runs = max(1, args.clients // 2)
    args.held_runs = min(args.held_runs, args.clients)
    work = Path(tempfile.mkdtemp(prefix="rimthan-fleet-"))
    replicas: list[Replica] = []
    registry: LocalRegistry | None = None
    started = time.monotonic()
    try:
        releases = prepare_releases(work, corrupt_on_disk=False)  # corrupted where it is pushed
        registry = start_registry(work / "registry")
        fleet = Fleet(args, work, releases, replicas, registry=registry)
        fleet.push("1.2.0")
        for n in range(args.replicas):
            name = f"replica-{chr(ord('a') + n)}"
            shared = ["--releases-from", fleet.ref, "--plain-http", *replica_args(work / f"releases-{name}", releases)]
            replicas.append(FollowingReplica(name, shared, work / f"state-{name}"))
        for replica in replicas:
            assert isinstance(replica, FollowingReplica)  # it finds its release in the registry
            replica.start()
        fleet.note(
            f"registry {registry.host}; {len(replicas)} replicas following {fleet.ref} "
            f"({', '.join(r.url for r in replicas)}); {args.clients} clients x {args.runs_per_client} runs"
        )
        anyio.run(fleet.run)
        return report(fleet, time.monotonic() - started)
    finally:
        for replica in replicas:
            replica.stop()
        if registry is not None:
            registry.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def report(fleet: Fleet, seconds: float) -> int:
    finals = {r.name: r.refresh() for r in fleet.replicas if r.up}
    left = sorted(str(p) for p in fleet.work.glob(f"releases-*/{CATALOGUE}-1.4.0"))
    stray = sorted(str(p) for p in fleet.work.glob("releases-*/.pull-*"))
    stats = fleet.stats
    held, crossed = fleet.held, len(crossed_runs(fleet))
    common = report_runs(
        fleet,
        seconds,
        finals,
        rerouted=f"{stats.rerouted_unreachable} (unreachable), {stats.rerouted_pinned} (pinned)",
        head=[f"replicas              {len(fleet.replicas)} following {fleet.ref}"],
        extra=[
            f"held across it        {held.arrived} of {held.runs} runs held on 1.2.0 after {HELD_AFTER_CALLS} calls "
            f"until every replica activated 1.3.0 (crossed the refresh must be >= {held.runs})",
            f"1.4.0 refused         {fleet.rejected_codes}",
            f"1.4.0 left on disk    {len(left)} directories, {len(stray)} staging directories",
        ],
    )
    ok = (
        common
        and held.arrived == held.runs
        and crossed >= held.runs
        and bool(fleet.rejected_codes)
        and all(codes for codes in fleet.rejected_codes.values())
        and not left
        and not stray
    )
    print("RESULT", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
