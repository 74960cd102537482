"""Fleet test (``make fleet``): three replicas follow one OCI repository under load.

A real registry (Debian's ``docker-registry``) runs on loopback. Three
``rimthan-mcp serve --transport http --releases-from oci://...`` processes,
each with its own releases and state directory (as separate machines would)
and one shared checkpoint key file, start from what the repository holds:
research-decision 1.2.0. Thirty-two concurrent clients drive the packaged
workflow with the scripted harness (``rimthan_host.harness``); every tool call
is one stateless Streamable HTTP POST to a randomly chosen replica, as behind
a load balancer. While they run:

1. 1.3.0 is pushed to the registry and every replica is refreshed (SIGHUP):
   each pulls it, verifies it and activates it; runs already going stay on
   1.2.0 (every replica holds it), new runs start on 1.3.0;
2. a corrupt 1.4.0 is pushed (a consistent OCI artifact whose release does
   not verify: one file's bytes changed after signing) and every replica is
   refreshed: each refuses it, nothing lands in its releases directory, and
   1.3.0 stays active.

Bounded in count and time (``--clients``, ``--runs-per-client``,
``--deadline``). Exits 1 unless: 0 failed calls, 0 lost runs, every run
finished on the release it started on, runs on both releases, every replica
ends on 1.3.0, refused 1.4.0 and holds no 1.4.0 directory.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.to_thread

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
    load_parser,
    parse_load_args,
    prepare_releases,
    replica_args,
    report_runs,
)
from support.oci import push_corrupt  # noqa: E402
from support.registry import LocalRegistry, start_registry  # noqa: E402

REPOSITORY = "rimthan/research-decision"


class FollowingReplica(Replica):
    """A replica started with ``--releases-from`` only: it finds its release in the registry."""

    def start(self, release: Path | None = None) -> None:
        self.spawn([])


@dataclass
class Fleet(Load):
    registry: LocalRegistry | None = None

    @property
    def ref(self) -> str:
        assert self.registry is not None
        return self.registry.ref(REPOSITORY)

    def push(self, version: str) -> str:
        trust = load_trust(self.releases.trust)
        return push_release(self.releases.built[version], parse_reference(self.ref), trust, plain_http=True).oci_digest

    def push_corrupt(self) -> str:
        return push_corrupt(self.releases.corrupt, self.ref, load_trust(self.releases.trust), CORRUPTED_FILE)

    async def faults(self) -> None:
        if not await self.at_calls(0.1):
            return
        self.admitting = False  # hold new runs until every replica serves the new release
        digest = await anyio.to_thread.run_sync(self.push, "1.3.0")
        self.note(f"pushed research-decision 1.3.0 to {self.ref} ({digest[:19]}...)")
        await self.refresh_all("activated")
        self.expected_version = "1.3.0"
        self.admitting = True
        if not await self.at_calls(0.5):
            return
        digest = await anyio.to_thread.run_sync(self.push_corrupt)
        self.note(f"pushed a corrupt research-decision 1.4.0 ({digest[:19]}...): one file changed after signing")
        await self.refresh_all("rejected")
        self.events.append("all faults done")


def main(argv: Sequence[str] | None = None) -> int:
    parser = load_parser(__doc__, runs_per_client=2)
    parser.add_argument("--replicas", type=int, default=3)
    args = parse_load_args(parser, argv)
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
    common = report_runs(
        fleet,
        seconds,
        finals,
        rerouted=f"{stats.rerouted_unreachable} (unreachable), {stats.rerouted_pinned} (pinned)",
        head=[f"replicas              {len(fleet.replicas)} following {fleet.ref}"],
        extra=[
            f"1.4.0 refused         {fleet.rejected_codes}",
            f"1.4.0 left on disk    {len(left)} directories, {len(stray)} staging directories",
        ],
    )
    ok = (
        common
        and bool(fleet.rejected_codes)
        and all(codes for codes in fleet.rejected_codes.values())
        and not left
        and not stray
    )
    print("RESULT", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
