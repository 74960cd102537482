"""P2 at 1 MiB: what the build would read without click, and where its scatter comes from.

``python -m benchmarks.experiments.p2_small [--rounds N]`` builds the
1 MiB synthetic catalogue (as ``make bench``, seeded) and times, in rounds that
take turns (the order rotates every round), after one untimed warm-up of each:

* ``floor``   P2's floor, as the bench measures it: ``cp -R`` + ``sync -f``,
              ``openssl dgst -sha256`` (one process), one Ed25519 signature
              (median, in process) and ``python3 -c pass``;
* ``cli``     ``rimthan-pack build SOURCE --key KEY --out DIR``, the console script;
* ``bare``    the same build through the same functions the command calls
              (``remembered_checks``, the collector paused, ``load_signing_key``,
              ``build_release``, then ``gc.freeze``), from a minimal
              ``python -c`` entry that imports no click (checked: the child
              says whether ``click`` is in ``sys.modules`` and the run stops if it is);
* ``click``   an interpreter importing click and exiting, and ``pass`` one doing nothing (the floor's
              part): their difference is what click costs alone.

Per measurement it keeps the wall time, the CPU time of the children it ran
(user + system, ``RUSAGE_CHILDREN``) and ``Dirty:`` from ``/proc/meminfo``
just before it (the page cache's unwritten bytes: what a ``sync -f`` or an
``fsync`` may have to wait for). The floor, ``cli`` and ``bare`` are also
measured "settled" (``floor~s``, ``cli~s``, ``bare~s``, in the same rounds):
after a global ``sync``, untimed, so that each starts with no one's
write-back pending (the floor's ``sync -f`` flushes every dirty page of the
file system, a neighbour's too). ``bare`` also reports, from inside its
process, its CPU time up to its call of ``build_release`` (interpreter start
and imports) and in it.

It prints, per side, the median and range of wall and CPU time, each side's
ratio to its floor (settled to settled), per round: median, range and
interquartile range, and whether the wall time follows ``Dirty`` (the rounds
with the least before them against those with the most).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rimthan_workflow_registry.release import MANIFEST_NAME

from ..bench_build import source_digests
from ..bytecode import compile_bytecode
from ..config import MiB
from ..fixtures import BenchKeys, make_keys, tool
from ..floors import copy_and_sync, hash_floor, interpreter_start, signature_floor
from ..synthetic import BulkSpec, bulk_source
from ..trash import purge, retire, trash_dir

# The build as `rimthan-pack build` runs it (cli.build / cli._build), minus click: argv is SOURCE KEY OUT.
BARE_BUILD = """\
import gc, sys, time
gc.disable()
from pathlib import Path
from rimthan_packager.user_cache import remembered_checks
from rimthan_packager.signing import load_signing_key
from rimthan_packager.build import build_release, source_date_epoch
from rimthan_workflow_registry.release import verify_release
imported = time.process_time()
with remembered_checks():
    key = load_signing_key(Path(sys.argv[2]))
    result = build_release(Path(sys.argv[1]), [key], Path(sys.argv[3]), created=source_date_epoch())
gc.freeze()
gc.enable()
print(result.manifest_digest, imported, time.process_time() - imported, 'click' in sys.modules)
"""


@dataclass
class Side:
    """One side's measurements: wall seconds, children's CPU seconds, Dirty KiB before each."""

    name: str
    run: Callable[[], object]
    settle: bool = False  # an untimed global sync before each measurement
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    dirty: list[int] = field(default_factory=list)


def dirty_kib() -> int:
    with open("/proc/meminfo", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("Dirty:"):
                return int(line.split()[1])
    return -1


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(side: Side, extra_cpu: float = 0.0) -> None:
    if side.settle:
        subprocess.run(["sync"], check=True)
    side.dirty.append(dirty_kib())
    cpu = _children_cpu()
    started = time.perf_counter()
    side.run()
    side.wall.append(time.perf_counter() - started + extra_cpu)
    side.cpu.append(_children_cpu() - cpu + extra_cpu)


# the bare build's own CPU seconds up to its call of build_release (interpreter start and imports) and in it
SPLIT: dict[str, list[float]] = {"start and imports": [], "build_release (its lazy imports included)": []}


def _builder(argv_of: Callable[[Path], list[str]], root: Path, trash: Path, bare: bool) -> Callable[[], None]:
    counter = iter(range(1_000_000))

    def run() -> None:
        out = root / f"build-{next(counter)}"
        result = subprocess.run(argv_of(out), check=False, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"build failed:\n{result.stderr}")
        if bare:
            _, imported, working, clicked = result.stdout.split()
            if clicked != "False":
                raise RuntimeError("the bare build imported click")
            for taken, value in zip(SPLIT.values(), (imported, working), strict=True):
                taken.append(float(value))
        retire(out, trash)

    return run


def _sides(source: Path, keys: BenchKeys, work: Path, trash: Path) -> tuple[list[Side], float]:
    """The floor first, then every side; the floor, ``cli`` and ``bare`` again, settled (``~s``)."""
    pack = tool("rimthan-pack")
    root = work / "builds"
    root.mkdir(parents=True)
    key = str(keys.private_key)
    cli = _builder(lambda out: [pack, "build", str(source), "--key", key, "--out", str(out)], root, trash, False)
    bare = _builder(lambda out: [sys.executable, "-c", BARE_BUILD, str(source), key, str(out)], root, trash, True)
    digests = source_digests(source)
    hashing, _ = hash_floor(source, sorted(digests), digests)
    warm = root / "warm"
    subprocess.run([pack, "build", str(source), "--key", key, "--out", str(warm)], check=True, capture_output=True)
    signing = signature_floor((next(warm.iterdir()) / MANIFEST_NAME).read_bytes()).median
    retire(warm, trash)
    copying = copy_and_sync(source, work / "floor", trash)
    starting = interpreter_start()

    def floor() -> None:
        copying()
        hashing()
        starting()

    plain = [Side("floor", floor), Side("cli", cli), Side("bare", bare)]
    plain += [Side("click", interpreter_start("import click")), Side("pass", starting)]
    return plain + [Side(f"{side.name}~s", side.run, settle=True) for side in plain[:3]], signing


def _ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1e3:6.1f} ms ({min(values) * 1e3:.1f}-{max(values) * 1e3:.1f})"


def _spread(values: list[float]) -> str:
    quarters = statistics.quantiles(values, n=4)
    middle = f"IQR {quarters[0]:.2f}-{quarters[2]:.2f}"
    return f"{statistics.median(values):.2f}x (range {min(values):.2f}-{max(values):.2f}, {middle})"


def _summary(floor: Side, side: Side) -> str:
    ratios = [o / f for o, f in zip(side.wall, floor.wall, strict=True)]
    cpu = [o / f for o, f in zip(side.cpu, floor.cpu, strict=True)]
    return (
        f"{side.name:8} wall {_ms(side.wall)}  cpu {_ms(side.cpu)}  Dirty before {statistics.median(side.dirty)} KiB "
        f"(max {max(side.dirty)})\n{'':8} over {floor.name}: wall {_spread(ratios)}, cpu {_spread(cpu)}"
    )


def _follows_dirty(side: Side) -> str:
    """The wall times of the rounds with the most Dirty before them against those with the least."""
    ranked = sorted(zip(side.dirty, side.wall, strict=True))
    half = len(ranked) // 2
    low = statistics.median(w for _, w in ranked[:half]) * 1e3
    high = statistics.median(w for _, w in ranked[-half:]) * 1e3
    return f"{side.name}: median wall {low:.1f} ms in the rounds with the least Dirty, {high:.1f} ms the most"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.experiments.p2_small", description=__doc__)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)
    compile_bytecode()  # as make bench: every measured process starts from compiled bytecode
    with tempfile.TemporaryDirectory(prefix="p2-small-") as scratch:
        work = Path(scratch)
        trash = trash_dir(work)
        source = bulk_source(work / "source", BulkSpec(100, 1 * MiB))
        everyone, signing = _sides(source, make_keys(work), work, trash)
        for side in everyone:  # untimed warm-up of each
            side.run()
        for turn in range(args.rounds):
            shift = turn % len(everyone)
            for side in everyone[shift:] + everyone[:shift]:
                measure(side, signing if side.name.startswith("floor") else 0.0)
        print(f"load average at the end {os.getloadavg()}, {args.rounds} rounds; signature {signing * 1e6:.0f} us")
        floors = {False: everyone[0], True: everyone[5]}
        for side in everyone:
            print(
                _summary(floors[side.settle], side)
                if side not in floors.values()
                else f"{side.name:8} wall "
                f"{_ms(side.wall)}  cpu {_ms(side.cpu)}  Dirty before {statistics.median(side.dirty)} KiB"
            )
        for part, values in SPLIT.items():
            print(f"bare, in its own process: {part} {_ms(values)} of CPU")
        for side in everyone:
            if side.name.split("~")[0] in ("floor", "cli", "bare"):
                print(_follows_dirty(side))
        purge(trash)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
