"""Crash safety: a ``rimthan-pack build`` killed at any point never leaves a partial release visible.

The packager writes into a hidden ``.<name>-<version>.building-*`` directory
beside the destination, fsyncs it, verifies it, and only then renames it into
place. These tests start the real installed CLI on a large synthetic catalogue
(thousands of files, so a build takes long enough to interrupt), SIGKILL it at
chosen points - found by watching the output directory, not by timing - and
check that under the final name there is nothing (or, if the build had already
published, a complete release that verifies), that anything else left behind is
a hidden temporary directory, and that a later build succeeds and verifies.
No timings are asserted.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.releases import REPO_ROOT, KeyPair, make_keypair, scaffold_source, trust_dir

BULK_FILES = 3000
NAME = "bulk-0.1.0"
TEMP_PREFIX = f".{NAME}.building-"
POLL_SECONDS = 0.0005
DEADLINE_SECONDS = 120.0  # a safety net against a hung child only; never asserted


def _cli() -> list[str]:
    local = Path(sys.executable).with_name("rimthan-pack")
    return [str(local if local.exists() else REPO_ROOT / ".venv" / "bin" / "rimthan-pack")]


@dataclass(frozen=True)
class Bench:
    source: Path
    key: KeyPair
    trust: Path


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Bench:
    """A catalogue source with thousands of extra files, and a signing key (both in tmp)."""
    root = tmp_path_factory.mktemp("crash")
    source = scaffold_source(root / "source", "bulk")
    bulk = source / "assets" / "bulk"
    bulk.mkdir(parents=True)
    for index in range(BULK_FILES):
        (bulk / f"f{index:05d}.md").write_text(f"# Reference note {index}\n\n" + "evidence line\n" * 40, "utf-8")
    key = make_keypair(root / "keys", "builder")
    return Bench(source=source, key=key, trust=trust_dir(root / "trust", key))


def _work_dirs(out: Path) -> list[Path]:
    try:
        return sorted(p for p in out.iterdir() if p.name.startswith(TEMP_PREFIX))
    except FileNotFoundError:
        return []


Stage = Callable[[Path], bool]


def _in_work(predicate: Callable[[Path], bool]) -> Stage:
    return lambda out: any(predicate(work) for work in _work_dirs(out))


STAGES: dict[str, Stage] = {
    # the temporary directory has just been created
    "work_dir_created": _in_work(lambda work: True),
    # half of the catalogue files have been copied (files are copied in sorted order)
    "catalogue_half_copied": _in_work(lambda work: (work / "catalogue/assets/bulk/f01500.md").exists()),
    # the manifest is written, signatures not yet
    "manifest_written": _in_work(lambda work: (work / "manifest.json").exists()),
    # signed, and the self-check (verify_release over every file) is running
    "signed_self_checking": _in_work(
        lambda work: (work / "signatures").is_dir() and any((work / "signatures").iterdir())
    ),
}


def _start_build(bench: Bench, out: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*_cli(), "build", str(bench.source), "--key", str(bench.key.private_path), "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _kill_when(proc: subprocess.Popen[bytes], out: Path, stage: Stage) -> bool:
    """SIGKILL ``proc`` as soon as ``stage`` holds; ``True`` if it was still running (interrupted)."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    while proc.poll() is None and time.monotonic() < deadline:
        if stage(out):
            proc.send_signal(signal.SIGSTOP)  # freeze it exactly here, then kill: no clean-up can run
            proc.kill()
            break
        time.sleep(POLL_SECONDS)
    proc.communicate(timeout=DEADLINE_SECONDS)
    return proc.returncode == -signal.SIGKILL


def _kill_after(proc: subprocess.Popen[bytes], seconds: float) -> bool:
    try:
        proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
    proc.communicate(timeout=DEADLINE_SECONDS)
    return proc.returncode == -signal.SIGKILL


def _verify(bench: Bench, release: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*_cli(), "verify", str(release), "--trust", str(bench.trust)],
        capture_output=True,
        text=True,
        timeout=DEADLINE_SECONDS,
    )


def _assert_nothing_partial(bench: Bench, out: Path) -> None:
    """Only a complete, verifying release may carry the final name; anything else is a hidden temp dir."""
    final = out / NAME
    if final.exists():
        result = _verify(bench, final)
        assert result.returncode == 0, f"a partial release is visible under {final}: {result.stderr}"
    leftovers = sorted(p.name for p in out.iterdir() if p.name != NAME) if out.exists() else []
    assert all(name.startswith(TEMP_PREFIX) for name in leftovers), leftovers


def _assert_rebuild_succeeds(bench: Bench, out: Path) -> None:
    """A later build into the same directory (temp leftovers and all) publishes a release that verifies."""
    if (out / NAME).exists():  # the killed build had already published: releases are never rebuilt in place
        return
    build = subprocess.run(
        [*_cli(), "build", str(bench.source), "--key", str(bench.key.private_path), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=DEADLINE_SECONDS,
    )
    assert build.returncode == 0, build.stderr
    verified = _verify(bench, out / NAME)
    assert verified.returncode == 0, verified.stderr
    assert verified.stdout.startswith("verified bulk@0.1.0 sha256:")
    assert not [p for p in (out / NAME).rglob("*") if p.name.startswith(TEMP_PREFIX)]


@pytest.mark.parametrize(
    "stage",
    [
        "signed_self_checking",
        pytest.param("work_dir_created", marks=pytest.mark.slow),
        pytest.param("catalogue_half_copied", marks=pytest.mark.slow),
        pytest.param("manifest_written", marks=pytest.mark.slow),
    ],
)
def test_build_killed_at_a_stage_leaves_no_partial_release(bench: Bench, tmp_path: Path, stage: str) -> None:
    out = tmp_path / "releases"
    interrupted = _kill_when(_start_build(bench, out), out, STAGES[stage])
    assert interrupted, f"the build finished before reaching {stage!r}; the catalogue is too small to interrupt"
    assert not (out / NAME).exists()
    assert _work_dirs(out), "the killed build should have left its hidden work directory"
    _assert_nothing_partial(bench, out)
    _assert_rebuild_succeeds(bench, out)


@pytest.mark.slow
@pytest.mark.parametrize("delay", [0.05, 0.4, 0.8, 1.2, 1.6, 2.0])
def test_build_killed_after_a_delay_leaves_nothing_or_a_complete_release(
    bench: Bench, tmp_path: Path, delay: float
) -> None:
    """Wherever the kill lands (even before the work dir exists, or after publishing) the invariant holds."""
    out = tmp_path / "releases"
    _kill_after(_start_build(bench, out), delay)
    _assert_nothing_partial(bench, out)
    _assert_rebuild_succeeds(bench, out)


@pytest.mark.slow
def test_repeated_kills_then_one_build_publishes_exactly_one_release(bench: Bench, tmp_path: Path) -> None:
    """Several interrupted builds into one directory, then a clean one: one release, hidden leftovers only."""
    out = tmp_path / "releases"
    for stage in ("work_dir_created", "manifest_written"):
        assert _kill_when(_start_build(bench, out), out, STAGES[stage])
    assert len(_work_dirs(out)) == 2
    _assert_nothing_partial(bench, out)
    _assert_rebuild_succeeds(bench, out)
    # an operator's scan for releases (<name>-<version>, not hidden) finds only the published one
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == [NAME]
