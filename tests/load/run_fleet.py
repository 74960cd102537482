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

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.to_thread

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "tests"), str(REPO / "tests" / "load")]

from rimthan_packager.build import build_release  # noqa: E402
from rimthan_packager.oci import push_release  # noqa: E402
from rimthan_packager.signing import generate_keypair, load_signing_key  # noqa: E402
from rimthan_workflow_registry.release.oci import parse_reference  # noqa: E402
from rimthan_workflow_registry.release.trust import load_trust  # noqa: E402
from rimthan_workflow_registry.run.tokens import CheckpointKeyring  # noqa: E402
from run_load import CATALOGUE, SOURCES, Load, Releases, Replica, _bumped_source  # noqa: E402
from support.oci import push_corrupt  # noqa: E402
from support.registry import LocalRegistry, start_registry  # noqa: E402

REPOSITORY = "rimthan/research-decision"
CORRUPTED_FILE = "catalogue/assets/instructions/interview.md"


class FollowingReplica(Replica):
    """A replica started with ``--releases-from`` only: it finds its release in the registry."""

    def start(self, release: Path | None = None) -> None:
        command = [
            str(Path(sys.executable).with_name("rimthan-mcp")),
            "serve",
            "--transport",
            "http",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
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
        match = self.wait_for(r"listening on http://127\.0\.0\.1:(\d+)/mcp", after=0)
        self.port = int(match.group(1))
        self.generation += 1
        self.up = True


@dataclass
class Fleet(Load):
    registry: LocalRegistry | None = None
    rejected_codes: dict[str, list[str]] | None = None

    @property
    def ref(self) -> str:
        assert self.registry is not None
        return self.registry.ref(REPOSITORY)

    def push(self, version: str) -> str:
        trust = load_trust(self.releases.trust)
        return push_release(self.releases.built[version], parse_reference(self.ref), trust, plain_http=True).oci_digest

    def push_corrupt(self) -> str:
        return push_corrupt(self.releases.corrupt, self.ref, load_trust(self.releases.trust), CORRUPTED_FILE)

    async def refresh_collect(self) -> None:
        self.rejected_codes = {}
        for replica in self.replicas:
            record = await anyio.to_thread.run_sync(replica.refresh)
            codes = [r["error"]["code"] for r in record["rejected"]]
            self.rejected_codes[replica.name] = codes
            self.note(f"{replica.name} refresh: {record['outcome']}, active {record['active']}, rejected {codes}")
            if record["outcome"] != "rejected":
                raise RuntimeError(f"{replica.name}: refresh {record['outcome']!r}, expected 'rejected'")

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
        await self.refresh_collect()
        self.events.append("all faults done")


def prepare(work: Path) -> Releases:
    """Sign 1.2.0, 1.3.0 and 1.4.0 (corrupted only in the registry); one shared checkpoint key file."""
    generated = generate_keypair(work / "keys" / "release-engineer")
    key = load_signing_key(generated.private_path)
    trust = work / "trust"
    trust.mkdir()
    shutil.copyfile(generated.public_path, trust / generated.public_path.name)
    built = {v: build_release(SOURCES / v, [key], work / "built").path for v in ("1.2.0", "1.3.0")}
    later = build_release(_bumped_source(work, "1.4.0"), [key], work / "built").path
    keys_file = work / "state-shared" / "checkpoint-keys.json"
    CheckpointKeyring.generate().save(keys_file)
    return Releases(built=built, corrupt=later, trust=trust, keys_file=keys_file)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--runs-per-client", type=int, default=2)
    parser.add_argument("--deadline", type=float, default=900.0, help="bound on the whole run, seconds")
    parser.add_argument("--calls-per-run", type=int, default=10, help="estimate, to place the faults")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args(argv)
    args.expected_calls = args.clients * args.runs_per_client * args.calls_per_run
    work = Path(tempfile.mkdtemp(prefix="rimthan-fleet-"))
    replicas: list[Replica] = []
    registry: LocalRegistry | None = None
    started = time.monotonic()
    try:
        releases = prepare(work)
        registry = start_registry(work / "registry")
        fleet = Fleet(args, work, releases, replicas, registry=registry)
        fleet.push("1.2.0")
        for n in range(args.replicas):
            name = f"replica-{chr(ord('a') + n)}"
            shared = [
                "--releases-from",
                fleet.ref,
                "--plain-http",
                "--releases-dir",
                str(work / f"releases-{name}"),
                "--trust",
                str(releases.trust),
                "--checkpoint-keys",
                str(releases.keys_file),
                "--log-level",
                "info",
            ]
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
    stats, outcomes = fleet.stats, fleet.outcomes
    lost = [o for o in outcomes if not o.completed]
    switched = [o for o in outcomes if o.completed and o.started_on != o.finished_on]
    by_release = Counter(o.started_on for o in outcomes if o.completed)
    crossed = [
        o
        for o in outcomes
        if o.completed and o.started_on == f"{CATALOGUE}@1.2.0" and o.finished_at_call > fleet.refreshed_at_call
    ]
    finals = {r.name: r.refresh() for r in fleet.replicas if r.up}
    left = sorted(str(p) for p in fleet.work.glob(f"releases-*/{CATALOGUE}-1.4.0"))
    stray = sorted(str(p) for p in fleet.work.glob("releases-*/.pull-*"))
    print()
    print(f"replicas              {len(fleet.replicas)} following {fleet.ref}")
    print(f"calls served          {stats.calls}  ({dict(stats.by_replica)})")
    print(f"failed calls          {stats.failed_calls}")
    print(f"rerouted calls        {stats.rerouted_unreachable} (unreachable), {stats.rerouted_pinned} (pinned)")
    print(f"runs                  {len(outcomes)} started, {len(outcomes) - len(lost)} completed, {len(lost)} lost")
    print(f"runs by release       {dict(by_release)}")
    print(f"finished elsewhere    {len(switched)} (every run must finish on the release it started on)")
    print(f"crossed the refresh   {len(crossed)} runs started on 1.2.0 finished after a replica activated 1.3.0")
    print(f"1.4.0 refused         {fleet.rejected_codes}")
    print(f"1.4.0 left on disk    {len(left)} directories, {len(stray)} staging directories")
    actives = ", ".join(f"{name}: {record['active']}" for name, record in finals.items())
    print(f"final active          {actives}")
    print(f"wall time             {seconds:.1f} s (informative only)")
    for failure in stats.failures[:10]:
        print(f"  failure: {failure}")
    for outcome in lost[:10]:
        print(f"  lost: client {outcome.client} run {outcome.index}: {outcome.error}")
    ok = (
        stats.failed_calls == 0
        and not lost
        and not switched
        and "all faults done" in fleet.events
        and set(by_release) == {f"{CATALOGUE}@1.2.0", f"{CATALOGUE}@1.3.0"}
        and len(finals) == len(fleet.replicas)
        and all(r["active"] == f"{CATALOGUE}@1.3.0" for r in finals.values())
        and bool(fleet.rejected_codes)
        and all(codes for codes in (fleet.rejected_codes or {}).values())
        and not left
        and not stray
    )
    print("RESULT", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
