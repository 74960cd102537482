"""The installed ``rimthan-pack`` console script, run as an author types it (a subprocess, output captured)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
RIMTHAN_PACK = str(BIN / "rimthan-pack")


def pack(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([RIMTHAN_PACK, *(str(a) for a in args)], capture_output=True, text=True, timeout=120, cwd=cwd)


def git_work_tree(root: Path) -> Path:
    """A new git work tree at ``root`` (the calling test is skipped where git is not installed)."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def init_scaffold(parent: Path) -> Path:
    """A catalogue source ``rimthan-pack init`` made in ``parent/my-flow/0.1.0`` (the catalogue my-flow at 0.1.0)."""
    source = parent / "my-flow" / "0.1.0"
    made = pack("init", source)
    assert made.returncode == 0, made.stderr
    return source


def edit_text(path: Path, old: str, new: str) -> None:
    """``path`` with its first ``old`` replaced by ``new`` (which must be there)."""
    text = path.read_text("utf-8")
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1), "utf-8")


def asks_audience(source: Path) -> None:
    """The scaffold's plan step asks a question that is not research_route: ``audience``, team or board."""
    edit_text(
        source / "workflows" / "my-flow.toml",
        'instruction = "assets/instructions/plan.md"\nnext = "write-summary"\n',
        'instruction = "assets/instructions/plan.md"\n'
        'question = { field = "audience", prompt = "Who reads the summary?", choices = ["team", "board"] }\n\n'
        '[[steps.branches]]\ntarget = "write-summary"\nwhen = { field = "audience", one_of = ["team", "board"] }\n',
    )
    edit_text(
        source / "schemas" / "confirmed-state.schema.json",
        '"properties": {',
        '"properties": {\n    "audience": {"type": "string", "enum": ["team", "board"]},',
    )
