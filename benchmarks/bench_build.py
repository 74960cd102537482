"""P2: ``rimthan-pack build`` (the real CLI, a subprocess) vs hashing the source once plus one signature.

The build copies and fsyncs every file, writes manifest/SHA256SUMS/signature,
verifies the result with the one verification path and renames it into
place. The floor is what a build must physically do (see ``floors``):
``cp -R`` of the source, ``sync -f`` of the output file system, ``openssl
dgst -sha256`` over the source (one process), one Ed25519 signature, and for
the 1 MiB case a bare interpreter start. The last build is kept: P1 verifies
exactly that release. Finished outputs are retired, not deleted, until the
run is over (``trash.py``): a deletion of 10,000 files just before a timed
build or copy costs it seconds of kernel time.
"""

from __future__ import annotations

import hashlib
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from rimthan_workflow_registry.release import MANIFEST_NAME

from .fixtures import BenchKeys, run_probe, tool
from .floors import copy_and_sync, hash_floor, interpreter_start, library_imports, signature_floor
from .profiling import import_times, imported_libraries
from .report import Figure
from .synthetic import BulkSpec
from .timing import alternating, children_cpu, repeat, timed
from .trash import retire, trash_dir

TARGET = 1.5
TARGET_SMALL = 3.0  # the 1 MiB case: the floor includes a bare interpreter start
# What a build imports, for the profile of a figure above target. The release package's modules are imported on
# first use of one of its names (importlib), which ``-X importtime`` does not itemise: naming the verifier and the
# loader first puts their time under their own package instead of the packager's.
BUILD_MODULES = (
    "rimthan_packager.cli",
    "rimthan_workflow_registry.release.verify",
    "rimthan_workflow_registry.release.loader",
    "rimthan_packager.build",
)


@dataclass(frozen=True)
class BuildOutcome:
    figure: Figure
    release: Path


def source_digests(source: Path) -> dict[str, str]:
    """Relative path -> SHA-256 of every source file (what the floor must reproduce)."""
    out = {}
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
        out[path.relative_to(source).as_posix()] = digest.hexdigest()
    return out


def _libraries_a_build_imports(pack: str, source: Path, keys: BenchKeys, out: Path, trash: Path) -> list[str]:
    """The modules outside ours that one more (untimed) build imports: after the warm-up, as every timed one."""
    libraries = imported_libraries([pack, "build", str(source), "--key", str(keys.private_key), "--out", str(out)])
    retire(out, trash)
    return libraries


def run_p2(spec: BulkSpec, source: Path, keys: BenchKeys, work: Path, reps: int, profile: bool) -> BuildOutcome:
    """Time ``reps`` CLI builds beside the floor; keep the last release for P1."""
    pack = tool("rimthan-pack")
    root = work / "p2" / spec.label
    trash = trash_dir(work)  # outputs are retired, not deleted, until the run is over (see trash.py)
    if root.exists():
        retire(root, trash)
    root.mkdir(parents=True)
    counter = iter(range(1_000_000))
    kept: list[Path] = []

    def build_once() -> float:
        out = root / f"build-{next(counter)}"
        started = time.perf_counter()
        result = subprocess.run(
            [pack, "build", str(source), "--key", str(keys.private_key), "--out", str(out)],
            check=False,
            capture_output=True,
            text=True,
        )
        elapsed = time.perf_counter() - started
        if result.returncode != 0:
            raise RuntimeError(f"rimthan-pack build {source} failed:\n{result.stderr}")
        for old in kept:
            retire(old, trash)
        kept[:] = [out]
        return elapsed

    digests = source_digests(source)
    hashing, processes = hash_floor(source, sorted(digests), digests)
    build_once()  # untimed warm-up: cold .pyc, and the manifest the signature floor signs
    signing = signature_floor((next(kept[0].iterdir()) / MANIFEST_NAME).read_bytes())

    copying = copy_and_sync(source, work / "p2-floor" / spec.label, trash)
    starting = interpreter_start() if spec.small else None

    def floor() -> float:
        parts = [copying(), hashing(), signing.median]
        if starting is not None:
            parts.append(starting())
        return sum(parts)

    # at 1 MiB, the libraries a build imports are timed in the same rounds as the floor and the build
    libraries = _libraries_a_build_imports(pack, source, keys, root / "imports", trash) if spec.small else None
    extra = [library_imports(libraries)] if libraries is not None else []
    floor_cpu: list[float] = []
    ours_cpu: list[float] = []
    measures = [children_cpu(floor, floor_cpu), children_cpu(build_once, ours_cpu), *extra]
    floor_sample, ours, *imported = alternating(measures, reps, warmup=0)
    startup = repeat(timed(lambda: subprocess.run([pack, "--help"], check=True, capture_output=True)), 3)
    details = {
        "files": spec.files,
        "bytes": spec.total_bytes,
        "ours_s": ours.to_json(),
        "floor_s": floor_sample.to_json(),
        "signature_floor_s": signing.median,
        "openssl_processes": processes,
        "cli_startup_s": startup.median,
        # per pair (ours, then the floor measured right before it): where the file system's flush cost moves
        # between samples, both sides of one pair share it and the medians may not
        "pair_ratios": [o / f for o, f in zip(ours.values, floor_sample.values, strict=True)],
        # the CPU time (user + system) of the processes each measurement ran, beside its wall time: a build slower
        # in wall time but not in CPU time waited (for the disk, or for a core), it did not work more
        "ours_cpu_s": ours_cpu,
        "floor_cpu_s": floor_cpu,  # the signature's (in this process) is not in it
        "note": "ours is the wall time of the rimthan-pack build subprocess (interpreter start and imports "
        "included); it copies and fsyncs every file, then verifies the release it wrote",
    }
    if libraries is not None:
        details["library_imports_s"] = imported[0].median  # an interpreter importing only them (library_imports)
        details["library_modules"] = libraries
    figure = Figure(
        f"P2 {spec.label}",
        f"rimthan-pack build of the {spec.label} synthetic catalogue (CLI)",
        ours.median,
        floor_sample.median,
        "s",
        "ratio",
        TARGET_SMALL if spec.small else TARGET,
        floor_what="cp -R + sync -f of the output file system + openssl dgst -sha256 (one process) + one "
        "Ed25519 signature" + (" + python3 -c pass" if spec.small else ""),
        details=details,
    )
    if profile and not figure.met:
        details["profile"] = run_probe(
            "build", "--source", str(source), "--key", str(keys.private_key), "--out", str(root), "--profile"
        )
        details["imports"] = import_times(BUILD_MODULES)  # a build's imports are not in its profile (probe.py)
        for leftover in root.glob("probe-build-*"):
            retire(leftover, trash)
    return BuildOutcome(figure, next(kept[0].iterdir()))
