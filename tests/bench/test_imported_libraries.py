"""``imported_libraries`` lists what a Python program imported, none of ours, or says why it could not.

P2's library floor imports exactly these names in a fresh interpreter; a
program that failed would give a list of what it imported before failing,
so a failure stops the benchmark with the program's own error.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the benchmarks are a package at the repository root
from benchmarks.profiling import imported_libraries  # noqa: E402


def test_the_modules_a_program_imported_are_listed_without_ours() -> None:
    names = imported_libraries(["-c", "import rimthan_workflow_registry.errors"])
    assert "enum" in names  # what our module imported is listed (a bare interpreter does not import enum) ...
    assert not [name for name in names if name.startswith("rimthan")]  # ... and our modules are not
    assert "json" not in imported_libraries(["-c", "pass"])  # the control: only what the program imported


def test_a_program_that_fails_stops_with_its_own_error() -> None:
    with pytest.raises(RuntimeError, match="failed under -X importtime:(.|\n)*no rimthan here"):
        imported_libraries(["-c", "raise SystemExit('no rimthan here')"])
