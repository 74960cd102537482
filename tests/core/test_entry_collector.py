"""A console script imports its command line with the cyclic collector off, and freezes what the imports made.

Imports allocate much and free almost no cycles: with the collector on, a
``rimthan-pack build`` ran about 40 collections while click, cryptography and
the core were imported, each one walking every object the imports had made so
far. ``rimthan_workflow_registry.entry`` now turns the collector off for the
import and freezes its objects before ``main`` runs with the collector as the
caller left it, so the command's own collections never walk them again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.releases import KeyPair

BIN = Path(sys.executable).parent

_COMMAND_LINE = """
import gc, json
AT_IMPORT = gc.isenabled()
def main():
    print(json.dumps({"at_import": AT_IMPORT, "in_main": gc.isenabled(), "frozen": gc.get_freeze_count()}))
    return 0
"""


def _entry_run(tmp_path: Path, *, collector_on: bool) -> dict[str, object]:
    (tmp_path / "probe_command_line.py").write_text(_COMMAND_LINE, encoding="utf-8")
    code = (
        "import gc, sys\n"
        + ("" if collector_on else "gc.disable()\n")
        + "from rimthan_workflow_registry.entry import run\n"
        "sys.exit(run('probe_command_line'))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert run.returncode == 0, run.stderr
    report: dict[str, object] = json.loads(run.stdout)
    return report


@pytest.mark.parametrize("collector_on", [True, False])
def test_the_command_line_is_imported_with_the_collector_off_and_its_objects_frozen(
    tmp_path: Path, collector_on: bool
) -> None:
    report = _entry_run(tmp_path, collector_on=collector_on)
    assert report["at_import"] is False
    assert report["in_main"] is collector_on  # as the caller left it
    assert isinstance(report["frozen"], int) and report["frozen"] > 0


# Runs the installed script as its own process would (same file, run as __main__), with a collector callback
# that notes each collection made while the entry imports the command line (before the command's main runs)
# and each one made once the command runs (its main on the stack), until the interpreter's exit.
_COUNTING = """
import atexit, gc, json, runpy, sys
noted_in = {"import": [], "command": []}
def noted(phase, info):
    if phase != "start":
        return
    frame, names = sys._getframe(0).f_back, []
    while frame is not None:
        names.append((frame.f_code.co_filename.rsplit("/", 1)[-1], frame.f_code.co_name))
        frame = frame.f_back
    if ("cli.py", "main") in names:
        noted_in["command"].append(info["generation"])
    elif ("entry.py", "run") in names:
        noted_in["import"].append(info["generation"])
gc.callbacks.append(noted)
atexit.register(lambda: print(json.dumps(noted_in), file=sys.stderr))
script, *sys.argv[1:] = sys.argv[1:]
sys.argv[0] = script
runpy.run_path(script, run_name="__main__")
"""


def _counted_build(tmp_path: Path, scaffold: Path, keypair: KeyPair) -> dict[str, list[int]]:
    argv = [str(BIN / "rimthan-pack"), "build", str(scaffold), "--key", str(keypair.private_path)]
    run = subprocess.run(
        [sys.executable, "-c", _COUNTING, *argv, "--out", str(tmp_path / "r")],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}"},
    )
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "r").is_dir()
    noted: dict[str, list[int]] = json.loads(run.stderr.strip().splitlines()[-1])
    return noted


def test_an_installed_build_runs_no_collection_while_its_command_line_is_imported(
    tmp_path: Path, scaffold: Path, keypair: KeyPair
) -> None:
    assert _counted_build(tmp_path, scaffold, keypair)["import"] == []


def test_an_installed_build_runs_no_collection_from_its_command_to_its_exit(
    tmp_path: Path, scaffold: Path, keypair: KeyPair
) -> None:
    """The pause spans remembered_checks' imports (six collections ran there), and what the build made is frozen
    at its end: the collection the collector started once on again walked every object the build had made."""
    assert _counted_build(tmp_path, scaffold, keypair)["command"] == []


# Imports the entry module in a fresh interpreter with a collection on every allocation the collector sees, noting
# each one made while signal (its enums) is being imported, and the collector's state after.
_IMPORTING_THE_ENTRY = """
import gc, json, sys
assert "signal" not in sys.modules  # (else the entry's import of it would make nothing)
{setup}
during_signal = []
def noted(phase, info):
    frame = sys._getframe(0).f_back
    while frame is not None:
        if phase == "start" and frame.f_code.co_filename.endswith(("signal.py", "enum.py")):
            during_signal.append(info["generation"])
            return
        frame = frame.f_back
gc.callbacks.append(noted)
gc.set_threshold(1)
import rimthan_workflow_registry.entry
gc.callbacks.remove(noted)
print(json.dumps({{"during_signal": len(during_signal), "enabled": gc.isenabled()}}))
"""


@pytest.mark.parametrize("collector_on", [True, False])
def test_the_entry_imports_signal_with_the_collector_off_and_leaves_it_as_it_was(collector_on: bool) -> None:
    """signal's import makes three enums: a collection there walked every object the interpreter's start had made,
    before run turned the collector off (0.3% of a 1 MiB build's instructions)."""
    code = _IMPORTING_THE_ENTRY.format(setup="" if collector_on else "gc.disable()")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == {"during_signal": 0, "enabled": collector_on}
