"""The installed ``rimthan-pack`` console script, run as an author types it (a subprocess, output captured)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent
RIMTHAN_PACK = str(BIN / "rimthan-pack")


def pack(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([RIMTHAN_PACK, *(str(a) for a in args)], capture_output=True, text=True, timeout=120, cwd=cwd)


def init_scaffold(parent: Path) -> Path:
    """A catalogue source ``rimthan-pack init`` made in ``parent/my-flow/0.1.0`` (the catalogue my-flow at 0.1.0)."""
    source = parent / "my-flow" / "0.1.0"
    made = pack("init", source)
    assert made.returncode == 0, made.stderr
    return source
