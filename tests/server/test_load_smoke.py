"""The load script (``make load``) at a small size, so it cannot rot: replicas, refresh, kill, corrupt release."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

LOAD = Path(__file__).resolve().parents[1] / "load" / "run_load.py"


def test_load_script_passes_at_a_small_size() -> None:
    run = subprocess.run(
        [sys.executable, str(LOAD), "--clients", "4", "--runs-per-client", "2", "--deadline", "240"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    lines = run.stdout.splitlines()
    assert "failed calls          0" in lines
    assert "runs                  8 started, 8 completed, 0 lost" in lines
    assert any(line.startswith("finished elsewhere    0 ") for line in lines)
    assert lines[-1] == "RESULT PASS"
