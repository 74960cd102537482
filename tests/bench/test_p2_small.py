"""P2's experiment without click builds what the CLI builds, and imports no click doing it.

``benchmarks.experiments.p2_small`` times the build through the functions
``rimthan-pack build`` calls, from a minimal entry: the figure it gives is
only "the build without click" if it is the same build. Builds are
reproducible (``SOURCE_DATE_EPOCH``): the same source and key give the same
manifest digest.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the benchmarks are a package at the repository root
from benchmarks.experiments.p2_small import BARE_BUILD  # noqa: E402
from benchmarks.fixtures import make_keys, tool  # noqa: E402
from benchmarks.synthetic import BASE_SOURCE  # noqa: E402


def test_the_build_without_click_is_the_clis_build(tmp_path: Path) -> None:
    keys = make_keys(tmp_path)
    env = {**os.environ, "SOURCE_DATE_EPOCH": "1767225600", "XDG_CACHE_HOME": str(tmp_path / "cache")}
    key = str(keys.private_key)
    cli = subprocess.run(
        [tool("rimthan-pack"), "build", str(BASE_SOURCE), "--key", key, "--out", str(tmp_path / "cli"), "--json"],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    bare = subprocess.run(
        [sys.executable, "-c", BARE_BUILD, str(BASE_SOURCE), key, str(tmp_path / "bare")],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    digest, imported, working, clicked = bare.stdout.split()
    assert f'"manifest_digest": "{digest}"' in cli.stdout  # the same release, byte for byte
    assert clicked == "False"  # and no click imported for it
    assert float(imported) > 0 and float(working) > 0  # its CPU split: start and imports, then build_release
