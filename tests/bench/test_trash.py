"""Build outputs are retired between figures and deleted once a run is over; the next run waits for the deletion.

On this machine's ext4 (no journal) a file created within 360 s of many
deletions scans past the inodes they freed (``benchmarks/trash.py``), so no
timed build may follow a deletion of outputs: neither the next size's builds
in the same run (they are retired, not deleted) nor the next run's (it waits
until the last purge's inodes are no longer recent).
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the benchmarks are a package at the repository root
from benchmarks.config import QUICK  # noqa: E402
from benchmarks.fixtures import make_keys  # noqa: E402
from benchmarks.runner import _bulk  # noqa: E402
from benchmarks.trash import PURGED_AT, RECENT_DELETION_S, purge, quiet_wait, trash_dir  # noqa: E402


def test_each_sizes_outputs_are_retired_not_deleted(tmp_path: Path) -> None:
    work = tmp_path / "work"
    plan = dataclasses.replace(QUICK, profile=False)
    _bulk(plan, make_keys(tmp_path / "keys"), work, {"P2"}, [], lambda message: None)

    for spec in plan.bulk:
        assert not (work / "p2" / spec.label).exists() and not (work / "p2-floor" / spec.label).exists()
        retired = [p for p in trash_dir(work).iterdir() if p.name.endswith(f"-{spec.label}")]
        assert len(retired) == 2, (spec.label, retired)  # the builds' directory and the floor's copy
        assert sum(1 for p in retired for _ in p.rglob("manifest.json")) == 1  # the size's last build, whole


def test_a_run_waits_until_the_last_purge_is_no_longer_recent(tmp_path: Path) -> None:
    assert RECENT_DELETION_S >= 60 + 300  # ext4's RECENTCY_MIN + RECENTCY_DIRTY (fs/ext4/ialloc.c, Linux 5.7 on)
    work = tmp_path / "work"
    assert quiet_wait(work) == 0.0  # no purge noted
    retired = trash_dir(work) / "old-build"
    retired.mkdir(parents=True)
    purge(trash_dir(work))

    assert not trash_dir(work).exists()
    purged = float((work / PURGED_AT).read_text("utf-8"))
    assert 0 < quiet_wait(work) <= RECENT_DELETION_S
    assert quiet_wait(work, now=purged + 10) == RECENT_DELETION_S - 10
    assert quiet_wait(work, now=purged + RECENT_DELETION_S + 1) == 0.0
    assert quiet_wait(work, now=purged - 100) == RECENT_DELETION_S  # a clock set back never waits longer
    (work / PURGED_AT).write_text("not a time", "utf-8")
    assert quiet_wait(work) == 0.0
