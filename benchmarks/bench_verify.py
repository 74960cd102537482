"""P1 and P1m: server load + full verification of a synthetic release, its time and its peak memory.

Ours: a fresh interpreter (``benchmarks.probe verify``) runs
``ReleaseProvider.open`` - what ``rimthan-mcp serve`` does before it serves:
walk, manifest, signatures, every file's size and SHA-256, catalogue rules,
query module. The figure is the in-process time of that call; interpreter
start and imports are reported beside it (and are what P5 is about).

Ours runs with a state directory of its own, as ``serve`` does: the first
(untimed, warm-up) load checks the catalogue schemas against the metaschema
and records the passes there; the timed loads are a server restarting on a
release it has served before. The first load's time is kept beside it.

Floor: ``openssl dgst -sha256`` over the same catalogue files in one process,
measured alternately with ours after one untimed run of each (warm page cache).

P1m: the probe's RSS high-water mark minus that of a bare interpreter.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from rimthan_workflow_registry.release import CATALOGUE_DIR, MANIFEST_NAME, parse_manifest

from .fixtures import BenchKeys, bare_peak_rss_kib, run_probe
from .floors import hash_floor
from .report import Figure
from .synthetic import BulkSpec
from .timing import paired

TARGET_RATIO = 1.0  # below the one-process floor on purpose: two cores, and hashing in threads releases the GIL
TARGET_RATIO_SMALL = 2.0  # a 1 MiB release: fixed costs (manifest, signatures, catalogue checks) dominate
TARGET_MEMORY_MIB = 64.0


def run_p1(
    spec: BulkSpec, release: Path, keys: BenchKeys, state_dir: Path, reps: int, profile: bool, with_memory: bool
) -> list[Figure]:
    manifest = parse_manifest((release / MANIFEST_NAME).read_bytes())
    expected = {f.path: f.sha256 for f in manifest.files}
    floor, processes = hash_floor(release / CATALOGUE_DIR, [f.path for f in manifest.files], expected)
    probes: list[dict[str, float]] = []

    def ours() -> float:
        result = run_probe(
            "verify", "--release", str(release), "--trust", str(keys.trust_dir), "--state-dir", str(state_dir)
        )
        probes.append(result)
        return float(result["action_s"])

    ours_sample, floor_sample = paired(ours, floor, reps)
    measured = probes[1:]  # the first was the warm-up
    details = {
        "files": spec.files,
        "bytes": spec.total_bytes,
        "ours_s": ours_sample.to_json(),
        "floor_s": floor_sample.to_json(),
        "openssl_processes": processes,
        "imports_and_setup_s": statistics.median(p["import_s"] for p in measured),
        "first_load_s": probes[0]["action_s"],
        "note": "timed loads reuse the state directory of the untimed first load (metaschema passes recorded); "
        "first_load_s is that first load, which checked every schema",
    }
    figures = [
        Figure(
            f"P1 {spec.label}",
            f"load + full verification of the {spec.label} release "
            "(ReleaseProvider.open in a fresh process, imports excluded)",
            ours_sample.median,
            floor_sample.median,
            "s",
            "ratio",
            TARGET_RATIO_SMALL if spec.small else TARGET_RATIO,
            floor_what="openssl dgst -sha256 over the same files, one process",
            details=details,
        )
    ]
    if profile and not figures[0].met:
        details["profile"] = run_probe(
            "verify",
            "--release",
            str(release),
            "--trust",
            str(keys.trust_dir),
            "--state-dir",
            str(state_dir),
            "--profile",
        )
    if with_memory:
        peak = max(p["peak_rss_kib"] for p in measured) / 1024
        bare = statistics.median(bare_peak_rss_kib() for _ in range(3)) / 1024
        figures.append(
            Figure(
                f"P1m {spec.label}",
                f"peak RSS of the process that loads and verifies the {spec.label} release",
                peak,
                bare,
                "MiB",
                "delta",
                TARGET_MEMORY_MIB,
                floor_what="peak RSS of a bare interpreter (same executable)",
                details={"peaks_mib": [p["peak_rss_kib"] / 1024 for p in measured]},
            )
        )
    return figures
