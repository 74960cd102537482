"""A signal that arrives while a console script imports its command line ends it at once, whatever the import does.

Library code run by an import can catch what a signal handler raises and
raise its own error instead: pydantic-core, building an MCP SDK model's
schema, turned a ``KeyboardInterrupt`` or the entry's ``StoppedStarting``
into its own ``SchemaError``, and a server sent SIGTERM while it started
printed that traceback and exited 1. These tests make that happen at a known
point: the imported module sends the signal to its own process inside a
``try`` that re-raises whatever reaches it as another error, as pydantic-core
does. The entry must end the process in its handler, so the import never sees
the signal: one line, the signal's status, and ``main`` never runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from rimthan_workflow_registry.entry import INTERRUPTED_LINES, INTERRUPTED_STATUS

_REWRAPPING = """
import os, signal, time
try:
    os.kill(os.getpid(), signal.{signal})
    time.sleep(5)  # (the handler runs before this returns)
except BaseException as caught:
    raise RuntimeError("rewrapped by the import: " + type(caught).__name__) from caught
"""
_COMMAND_LINE = "def main():\n    print('main ran')\n    return 0\n"
PROGRAM = "probe-server"


def _served(tmp_path: Path, command_line: str, sdk: str = "") -> subprocess.CompletedProcess[str]:
    """``probe-server serve`` through the entry: the command line's module and a serving import's (the SDK's)."""
    (tmp_path / "probe_command_line.py").write_text(command_line, encoding="utf-8")
    (tmp_path / "probe_sdk.py").write_text(sdk, encoding="utf-8")
    code = (
        "import sys\n"
        f"sys.argv = [{PROGRAM!r}, 'serve']\n"
        "from rimthan_workflow_registry.entry import run\n"
        "sys.exit(run('probe_command_line', serving='serve', serving_imports=('probe_sdk',)))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)


def _started(tmp_path: Path, sent: str, *, in_serving_import: bool) -> subprocess.CompletedProcess[str]:
    """The signal sent from inside the command line's import or a serving import's, each rewrapping errors."""
    rewrapping = _REWRAPPING.format(signal=sent)
    if in_serving_import:
        return _served(tmp_path, _COMMAND_LINE, rewrapping)
    return _served(tmp_path, rewrapping + _COMMAND_LINE)


@pytest.mark.parametrize("in_serving_import", [False, True], ids=["command-line", "serving-import"])
def test_sigterm_inside_an_import_that_rewraps_errors_is_the_stopped_line_and_exit_0(
    tmp_path: Path, in_serving_import: bool
) -> None:
    ran = _started(tmp_path, "SIGTERM", in_serving_import=in_serving_import)
    stopped = f"{PROGRAM}: stopped (SIGTERM) while starting, before it served: no call was answered\n"
    assert (ran.returncode, ran.stderr, ran.stdout) == (0, stopped, "")


@pytest.mark.parametrize("in_serving_import", [False, True], ids=["command-line", "serving-import"])
def test_ctrl_c_inside_an_import_that_rewraps_errors_is_the_interruption_and_exit_130(
    tmp_path: Path, in_serving_import: bool
) -> None:
    ran = _started(tmp_path, "SIGINT", in_serving_import=in_serving_import)
    assert (ran.returncode, ran.stderr, ran.stdout) == (INTERRUPTED_STATUS, INTERRUPTED_LINES, "")


def test_sigterm_after_the_imports_still_unwinds_the_start(tmp_path: Path) -> None:
    """Past the imports (loading the releases) a SIGTERM unwinds what the start was doing, then says the line."""
    command_line = (
        "import os, signal, time\n"
        "def main():\n"
        "    try:\n"
        "        os.kill(os.getpid(), signal.SIGTERM)\n"
        "        time.sleep(5)\n"
        "    finally:\n"
        "        print('unwound')\n"
        "    return 3\n"
    )
    ran = _served(tmp_path, command_line)
    stopped = f"{PROGRAM}: stopped (SIGTERM) while starting, before it served: no call was answered\n"
    assert (ran.returncode, ran.stderr, ran.stdout) == (0, stopped, "unwound\n")
