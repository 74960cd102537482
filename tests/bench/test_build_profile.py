"""P2's profile shows the build ``rimthan-pack build`` runs, and what it imports.

A figure above target carries a profile of its work. For P2 that is
``python -m benchmarks.probe build --profile``: ``build_release`` under
cProfile. The CLI runs it with the schema-check passes earlier builds left in
the user cache, so a rebuild never checks a schema against the metaschema;
the probe must do the same, or the profile charges JSON Schema with time the
timed builds never spend. The build's imports, which the profile does not
see, are summarised beside it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from support.releases import KeyPair

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))  # the benchmarks are a package at the repository root
from benchmarks.bench_build import BUILD_MODULES  # noqa: E402
from benchmarks.profiling import import_times  # noqa: E402

JSON_SCHEMA = "JSON Schema (jsonschema/referencing)"


def _profiled_build(source: Path, key: Path, out: Path, cache: Path) -> dict[str, float]:
    out.mkdir(parents=True, exist_ok=True)
    argv = ["build", "--source", str(source), "--key", str(key), "--out", str(out), "--profile"]
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.probe", *argv],
        cwd=REPO_ROOT,
        env={**os.environ, "XDG_CACHE_HOME": str(cache)},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    return {row["category"]: row["seconds"] for row in summary["categories"]}


def test_the_profile_of_a_rebuild_spends_nothing_on_schema_checks(
    tmp_path: Path, scaffold: Path, keypair: KeyPair
) -> None:
    cache = tmp_path / "cache"
    first = _profiled_build(scaffold, keypair.private_path, tmp_path / "first", cache)
    assert first.get(JSON_SCHEMA, 0.0) > 0  # the control: bytes never seen are checked, and that shows
    pack = Path(sys.executable).parent / "rimthan-pack"
    subprocess.run(
        [str(pack), "build", str(scaffold), "--key", str(keypair.private_path), "--out", str(tmp_path / "cli")],
        env={**os.environ, "XDG_CACHE_HOME": str(cache)},
        capture_output=True,
        timeout=120,
        check=True,
    )
    again = _profiled_build(scaffold, keypair.private_path, tmp_path / "again", cache)
    assert JSON_SCHEMA not in again
    assert sum(again.values()) > 0
    assert again.get("SHA-256 hashing", 0.0) > 0  # every file is hashed (by cryptography), and counted as hashing


def test_the_build_imports_are_itemised_under_their_own_packages() -> None:
    """The release package's modules (imported on first use of a name) count under the core, not the packager."""
    summary = import_times(BUILD_MODULES, top=50)
    packages = {row["package"]: row["seconds"] for row in summary["top_packages"]}
    assert summary["total_s"] > 0
    # (each under its own name: their own times are close, and which is larger is no property of the build)
    assert packages["rimthan_workflow_registry"] > 0 and packages["rimthan_packager"] > 0
    assert {"click", "cryptography"} <= set(packages)
