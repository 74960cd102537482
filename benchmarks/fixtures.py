"""The run's throwaway signing key and trust directory, and subprocess plumbing.

The key lives in a temporary directory outside the repository and is deleted
when the run ends, so every run signs its own releases (nothing signed is
reused between runs, and no private key is ever written into the tree).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rimthan_packager.keygen import generate_keypair

from .synthetic import REPO_ROOT


@dataclass(frozen=True)
class BenchKeys:
    private_key: Path
    trust_dir: Path
    key_id: str


def make_keys(directory: Path) -> BenchKeys:
    """An Ed25519 key pair in ``directory`` and a trust directory holding its public half."""
    generated = generate_keypair(directory / "keys" / "bench")
    trust = directory / "trust"
    trust.mkdir(parents=True)
    shutil.copyfile(generated.public_path, trust / generated.public_path.name)
    return BenchKeys(private_key=generated.private_path, trust_dir=trust, key_id=generated.key_id)


def tool(name: str) -> str:
    """A console script of this environment (``rimthan-pack``, ``rimthan-mcp``)."""
    candidate = Path(sys.executable).parent / name
    found = str(candidate) if candidate.exists() else shutil.which(name)
    if found is None:
        raise RuntimeError(f"{name} is not installed in this environment; run `make setup`")
    return found


def run_probe(*args: str) -> dict[str, Any]:
    """``python -m benchmarks.probe ARGS`` in a fresh interpreter; its one JSON line."""
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.probe", *args], cwd=REPO_ROOT, check=False, capture_output=True, text=True
    )
    if result.returncode != 0:
        raise RuntimeError(f"probe {' '.join(args[:1])} failed (exit {result.returncode}):\n{result.stderr}")
    report: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return report


def bare_peak_rss_kib() -> int:
    """Peak RSS of a bare interpreter (same executable, same measurement, nothing imported)."""
    from .probe import BARE_CODE

    result = subprocess.run([sys.executable, "-c", BARE_CODE], check=True, capture_output=True, text=True)
    return int(result.stdout.strip())
