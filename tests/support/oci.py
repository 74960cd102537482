"""Helpers for tests that publish releases to the loopback registry with the real ``rimthan-pack``.

Functions
    pack(*args) -> CompletedProcess           the installed ``rimthan-pack`` console script
    push(release, ref, trust, *extra) -> str  push with --plain-http; returns the OCI manifest digest
    pull(ref, trust, out, *extra) -> CompletedProcess
    one_line_error(proc, code)                assert exit 1 and the two-line refusal naming ``code``
    tree_bytes(directory) -> dict[str, bytes] every regular file under a directory, by relative path
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

RIMTHAN_PACK = Path(sys.executable).parent / "rimthan-pack"


def pack(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(RIMTHAN_PACK), *(str(a) for a in args)], capture_output=True, text=True, timeout=120, check=False
    )


def push(release: Path, ref: str, trust: Path, *extra: str) -> str:
    proc = pack("push", release, ref, "--trust", trust, "--plain-http", *extra)
    assert proc.returncode == 0, proc.stderr
    digest = proc.stdout.strip().splitlines()[-1]
    assert digest.startswith("sha256:") and len(digest) == 71, proc.stdout
    return digest


def pull(ref: str, trust: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return pack("pull", ref, "--trust", trust, "--out", out, "--plain-http", *extra)


def one_line_error(proc: subprocess.CompletedProcess[str], code: str) -> str:
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 2, proc.stderr
    assert lines[0].startswith(f"error: {code}: "), lines[0]
    assert lines[1].startswith("next: "), lines[1]
    assert "Traceback" not in proc.stderr
    return lines[0]


def tree_bytes(directory: Path) -> dict[str, bytes]:
    return {p.relative_to(directory).as_posix(): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}
