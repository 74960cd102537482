"""One benchmark run: generate the synthetic sources, measure every figure, print and save the results."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Collection
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rimthan_packager.build import build_release
from rimthan_packager.signing import load_signing_key

from .bench_build import run_p2
from .bench_calls import packaged_release, render_mirror, run_p3
from .bench_engine import run_p4
from .bench_start import run_p5
from .bench_throughput import render_p6_mirror, run_p6
from .bench_verify import run_p1
from .bytecode import compile_bytecode
from .config import Plan
from .fixtures import BenchKeys, make_keys
from .profiling import render_imports, render_profile
from .report import (
    Figure,
    machine,
    render_cpu,
    render_libraries,
    render_notes,
    render_table,
    render_verdict,
    versions,
    write_json,
)
from .synthetic import REPO_ROOT, bulk_source, long_source
from .trash import purge, quiet_wait, retire, trash_dir

DEFAULT_WORK = REPO_ROOT / "benchmarks" / "work"
DEFAULT_OUT = REPO_ROOT / "benchmarks" / "out" / "results.json"
BUDGET_SECONDS = 600
GROUPS = ("P1", "P2", "P3", "P4", "P5", "P6")  # P3 covers P3 (stdio) and P3h (HTTP)


def _say(message: str) -> None:
    print(f"bench: {message}", flush=True)


def _release_for_p1(source: Path, keys: BenchKeys, work: Path, label: str) -> Path:
    """A release of ``source`` when P2 (which normally provides it) is not part of this run."""
    out = work / "p1" / label
    if out.exists():
        shutil.rmtree(out)
    return build_release(source, [load_signing_key(keys.private_key)], out).path


def _bulk(
    plan: Plan, keys: BenchKeys, work: Path, only: Collection[str], figures: list[Figure], step: Callable[[str], None]
) -> None:
    for index, spec in enumerate(plan.bulk):
        step(f"generating the {spec.label} catalogue (seed {spec.seed})")
        source = bulk_source(work / "sources" / spec.label, spec)
        release = None
        if "P2" in only:
            step(f"P2 {spec.label}: {plan.reps_build} CLI builds beside the cp + sync + hash + signature floor")
            outcome = run_p2(spec, source, keys, work, plan.reps_build, plan.profile)
            figures.append(outcome.figure)
            release = outcome.release
        if "P1" in only:
            release = release or _release_for_p1(source, keys, work, spec.label)
            step(f"P1 {spec.label}: {plan.reps_verify} fresh-process loads beside openssl")
            state_dir = work / "p1-state" / spec.label  # activation floor + schema checks, like a server's
            shutil.rmtree(state_dir, ignore_errors=True)
            figures.extend(
                run_p1(spec, release, keys, state_dir, plan.reps_verify, plan.profile, with_memory=index == 0)
            )
        # releases signed by this run's throwaway key: no reuse. Retired, not deleted: the next spec's builds
        # would create their files among the inodes just freed (trash.py)
        for built in (
            work / "p2" / spec.label,
            work / "p1" / spec.label,
            work / "p2-floor" / spec.label,
            work / "p1-state" / spec.label,
        ):
            if built.exists():
                retire(built, trash_dir(work))


def _order(figures: list[Figure]) -> list[Figure]:
    rank = {"P1": 0, "P1m": 1, "P2": 2, "P3": 3, "P3h": 4, "P4": 5, "P5": 6, "P6": 7}
    return sorted(figures, key=lambda f: (rank.get(f.id.split()[0], 9), figures.index(f)))


def _profiles(figures: list[Figure]) -> str:
    lines = []
    for figure in figures:
        summary = figure.details.get("profile")
        if summary and "categories" in summary:
            lines.append(render_profile(figure.id, summary))
        for key, what in (("imports", "imports"), ("echo_imports", "floor imports")):
            if figure.details.get(key):
                lines.append(render_imports(f"{figure.id} {what}", figure.details[key]))
        if "library_imports_s" in figure.details:
            lines.append(render_libraries(figure))
        if "ours_cpu_s" in figure.details:
            lines.append(render_cpu(figure))
    return "\n".join(lines)


def _recorded(figure: Figure, where: dict[str, Any], libraries: dict[str, str | None]) -> dict[str, Any]:
    """A figure as JSON with the machine, the versions and the date it was measured on (figures move)."""
    return {**figure.to_json(), "machine": where, "versions": libraries}


def run(
    plan: Plan, *, only: Collection[str] = GROUPS, work: Path = DEFAULT_WORK, out: Path = DEFAULT_OUT
) -> dict[str, Any]:
    started = time.perf_counter()
    began = datetime.now(UTC).isoformat(timespec="seconds")
    work.mkdir(parents=True, exist_ok=True)
    figures: list[Figure] = []

    def step(message: str) -> None:
        _say(f"[{time.perf_counter() - started:6.1f}s] {message}")

    step("compiling the bytecode every measured process imports (bytecode.py)")
    compiled = compile_bytecode()
    with tempfile.TemporaryDirectory(prefix="rimthan-bench-keys-") as secrets:
        keys = make_keys(Path(secrets))
        if {"P1", "P2"} & set(only):
            if (wait := quiet_wait(work)) > 0:
                step(f"waiting {wait:.0f} s: the last run's deleted outputs are recent to the file system (trash.py)")
                time.sleep(wait)
            _bulk(plan, keys, work, only, figures, step)
        if "P4" in only:
            step(
                f"P4: driving the {plan.long.steps}-step synthetic workflow, replaying step 2 and step "
                f"{plan.long.steps}"
            )
            source = long_source(work / "sources" / plan.long.label, plan.long)
            figures.extend(run_p4(plan.long, source, keys, work, plan.reps_engine, plan.profile))
        if {"P3", "P5", "P6"} & set(only):
            step("building the packaged research-decision 1.2.0 release for the server figures")
            release = packaged_release(keys, work)
            state_dir = Path(secrets) / "state"  # checkpoint HMAC keys: outside the repository, deleted after
            if "P5" in only:
                step(f"P5: {plan.reps_start} server starts until tools/list answers, beside the echo server")
                figures.append(run_p5(release, keys, state_dir, work, plan.reps_start, plan.profile))
            if "P3" in only:
                step(
                    f"P3/P3h: {plan.reps_calls} packaged run(s) per transport through the SDK client, "
                    "each call beside an echo"
                )
                figures.extend(run_p3(release, keys, state_dir, work, plan.reps_calls, plan.profile))
            if "P6" in only:
                step(f"P6: {plan.rounds_throughput} round(s) of 32 concurrent HTTP clients, beside the echo server")
                figures.extend(run_p6(release, keys, state_dir, work, plan.rounds_throughput))
    purge(trash_dir(work))  # the build figures' finished outputs, deleted only now (trash.py)
    figures = _order(figures)
    where, libraries = machine(), versions()
    elapsed = time.perf_counter() - started
    document = {
        "format": "rimthan.bench-results/1",
        "plan": plan.name,
        "started": began,
        "duration_s": elapsed,
        "machine": where,
        "versions": libraries,
        "bytecode_compiled": compiled,
        "figures": [_recorded(f, where, libraries) for f in figures],
    }
    write_json(out, document)
    print()
    print(render_table(figures))
    print()
    print(render_notes(figures))
    print()
    print(render_verdict(figures))
    for mirror in (render_mirror(figures), render_p6_mirror(figures)):
        if mirror:
            print("\n" + mirror)
    profiles = _profiles([f for f in figures if not f.met])
    if profiles:
        print("\nwhere the time goes (figures above target):")
        print(profiles)
    print(f"\nbench: {plan.name} run took {elapsed:.0f}s; results in {out}")
    if elapsed > BUDGET_SECONDS:
        print(f"bench: warning: over the {BUDGET_SECONDS}s budget")
    return document
