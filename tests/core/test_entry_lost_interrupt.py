"""A Ctrl-C that lands where Python cannot raise it still ends the command, with its one refusal and no traceback.

Python runs a signal's handler between two instructions of whatever Python
code runs, and a weakref callback is Python code: importlib's module locks
drop themselves in one, at the end of every import, and a command imports
lazily while it runs (``rimthan-pack pull`` its registry client). A Ctrl-C
raised there cannot propagate; Python printed ``Exception ignored in:
<function _get_module_lock.<locals>.cb ...>``, a traceback and
``KeyboardInterrupt``, and the command went on as if never interrupted (a
pull waited out its registry's 30 s read timeout). The test makes that happen
at a known point: a command whose ``main`` drops an object whose weakref
callback sends Ctrl-C to its own process and runs on, then waits.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from rimthan_workflow_registry.entry import INTERRUPTED_LINES, INTERRUPTED_STATUS

HANG_GUARD = 120.0  # seconds: only so that a process that went on fails the test instead of blocking it

_COMMAND_LINE = """
import os, signal, time, weakref

class _Lock:
    pass

def _dropped(ref):
    os.kill(os.getpid(), signal.SIGINT)
    for _ in range(1000):  # (the handler runs here, inside the callback)
        pass

def main():
    lock = _Lock()
    ref = weakref.ref(lock, _dropped)
    del lock
    time.sleep(30)
    print("the command went on")
    return 0
"""


def _ran(tmp_path: Path, command_line: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "probe_command_line.py").write_text(command_line, encoding="utf-8")
    code = "import sys\nfrom rimthan_workflow_registry.entry import run\nsys.exit(run('probe_command_line'))\n"
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=HANG_GUARD, env=env)


def test_ctrl_c_raised_inside_a_weakref_callback_is_raised_again_and_ends_the_command(tmp_path: Path) -> None:
    ran = _ran(tmp_path, _COMMAND_LINE)
    assert (ran.returncode, ran.stderr, ran.stdout) == (INTERRUPTED_STATUS, INTERRUPTED_LINES, "")


def test_another_error_inside_a_callback_is_still_reported_as_python_reports_it(tmp_path: Path) -> None:
    """Only a Ctrl-C is taken over: any other error a callback raises is printed as before, and the command goes on."""
    command_line = _COMMAND_LINE.replace("os.kill(os.getpid(), signal.SIGINT)", "raise ValueError('in a callback')")
    ran = _ran(tmp_path, command_line.replace("time.sleep(30)", "pass"))
    assert ran.returncode == 0 and ran.stdout == "the command went on\n"
    assert "Exception ignored in" in ran.stderr and "ValueError: in a callback" in ran.stderr


_IN_A_THREAD = """
import os, threading, time, weakref

class _Lock:
    pass

def _dropped(ref):
    raise KeyboardInterrupt  # (where it cannot propagate: a callback, in a thread that is not the main one)

def _drop():
    time.sleep(0.5)  # (only so that the main thread is blocked in its read by then)
    lock = _Lock()
    ref = weakref.ref(lock, _dropped)
    del lock

def main():
    read_end, write_end = os.pipe()  # nothing is ever written: only a signal wakes the read
    threading.Thread(target=_drop, daemon=True).start()
    os.read(read_end, 1)
    print("the command went on")
    return 0
"""


def test_ctrl_c_lost_in_another_thread_wakes_the_main_thread_blocked_in_a_read(tmp_path: Path) -> None:
    """Not the main thread: SIGALRM's handler cannot be set there, so the main thread is sent SIGINT itself (the
    fallback ``_thread.interrupt_main`` only flagged it, and a main thread blocked in a read never woke)."""
    ran = _ran(tmp_path, _IN_A_THREAD)
    assert (ran.returncode, ran.stderr, ran.stdout) == (INTERRUPTED_STATUS, INTERRUPTED_LINES, "")
