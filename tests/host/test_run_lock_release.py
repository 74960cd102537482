"""A session letting go of a run removes its own lock file, never one another session took at the path meanwhile.

Found: ``RunLock.release`` checked that the file at ``.rimthan/runs/<run>.lock``
was still the one it held, then removed the path by name. A lock file deleted
(by hand, by a clean-up) and taken afresh by another session between the two
was removed: that session's lock was gone from the path, a third session then
took the run too, and the holder stopped at its next move (``run_lock_lost``).
Now the name is moved aside to a name of the releaser's own, checked, and only
the file it held is removed; anything else is put back at its name.

Deterministic, without timing: a subprocess drives the real library with an
audit hook (``sys.addaudithook``; ``os.remove`` and ``os.rename`` fire before
the system call) that, at the releaser's first removal or move of the lock
name, deletes the lock file and has a second session take the run, as another
process would between the check and the removal.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from rimthan_host.files import ASIDE_BOUND, ProjectPath, prune_aside
from rimthan_host.own_folder import TMP_SUFFIX
from rimthan_host.run_lock import RunLock
from rimthan_host.runlog import RunLog

_PROBE = r"""
import json, os, sys
from pathlib import Path

from rimthan_host.run_lock import RunBusy, RunLock
from rimthan_host.runlog import RunLog

project = Path(sys.argv[1])
log = RunLog(project, "run-1")
lock_path = log.log_path.with_suffix(".lock")
fired, other = [], []


def meanwhile(event, args):
    if event not in ("os.remove", "os.rename") or fired:
        return
    if os.path.basename(os.fsdecode(args[0])) != lock_path.name:
        return
    fired.append(event)
    os.unlink(lock_path)  # deleted by someone else, then taken by another session: before the releaser's removal
    taken = RunLock(log)
    taken.acquire()
    other.append(taken)


first = RunLock(log)
first.acquire()
sys.addaudithook(meanwhile)
first.release()
result = {"fired": fired, "lock_there": lock_path.exists()}
try:
    other[0].ensure()
    result["other_holds"] = True
except Exception as exc:
    result["other_holds"] = type(exc).__name__
try:
    RunLock(log).acquire()
    result["third"] = "took the run"
except RunBusy:
    result["third"] = "refused"
result["left"] = sorted(p.name for p in lock_path.parent.iterdir())
print(json.dumps(result))
"""


def test_a_lock_taken_afresh_while_the_holder_lets_go_is_not_removed(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / ".rimthan" / "runs").mkdir(parents=True)
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(project)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["fired"], "the releaser never removed nor moved its lock: the probe changed nothing"
    assert result["lock_there"]  # the other session's lock file stays at the path
    assert result["other_holds"] is True  # and it still holds the run (not run_lock_lost)
    assert result["third"] == "refused"  # so no third session takes the run beside it
    assert result["left"] == ["run-1.lock"]  # nothing moved aside is left behind


_KILLED_MID_RELEASE = r"""
import os, signal, sys
from pathlib import Path

from rimthan_host.run_lock import RunLock
from rimthan_host.runlog import RunLog


def killed(event, args):  # the unlink of the name moved aside: killed after the move, before the removal
    if event == "os.remove" and os.fsdecode(args[0]).endswith(".rimthan-tmp"):
        os.kill(os.getpid(), signal.SIGKILL)


lock = RunLock(RunLog(Path(sys.argv[1]), "run-1"))
lock.acquire()
sys.addaudithook(killed)
lock.release()
"""


def test_what_a_releaser_killed_mid_removal_left_aside_is_removed_when_the_lock_is_next_taken(tmp_path: Path) -> None:
    """``remove_held`` moves the lock file aside, checks it, then unlinks it: a process killed between the move and
    the unlink left ``.run-1.lock.<pid>.<hex>.rimthan-tmp`` in ``.rimthan/runs`` for good, one per kill.

    The next session taking the run's lock removes such a file once its process is gone; one of a live process (a
    removal in progress), another run's, and a name the bridge does not make are kept. One moved aside longer ago
    than the bound is a leftover whatever its pid (a pid reused).
    """
    project = tmp_path / "project"
    runs = project / ".rimthan" / "runs"
    runs.mkdir(parents=True)
    done = subprocess.run(
        [sys.executable, "-c", _KILLED_MID_RELEASE, str(project)], capture_output=True, timeout=120, check=False
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    [left] = [p.name for p in runs.iterdir() if p.name.endswith(TMP_SUFFIX)]
    pid = left.split(".")[3]
    live = f".run-1.lock.{os.getpid()}.{'a' * 16}{TMP_SUFFIX}"
    kept = [live, f".run-2.lock.{pid}.{'b' * 16}{TMP_SUFFIX}", f".run-1.lock.{pid}.notes{TMP_SUFFIX}"]
    for name in kept:
        (runs / name).write_text("{}", "utf-8")

    taken = RunLock(RunLog(project, "run-1"))
    taken.acquire()

    assert sorted(p.name for p in runs.iterdir()) == sorted([*kept, "run-1.lock"])
    taken.release()
    assert prune_aside(ProjectPath.of(project, runs / "run-1.lock"), now=time.time() + ASIDE_BOUND + 60) == [live]


_PUT_BACK = r"""
import json, os, sys
from pathlib import Path

from rimthan_host.run_lock import RunBusy, RunLock
from rimthan_host.runlog import RunLog

project, mode = Path(sys.argv[1]), sys.argv[2]
log = RunLog(project, "run-1")
lock_path = log.log_path.with_suffix(".lock")
fired, sessions = [], []


def meanwhile(event, args):
    if event == "os.rename" and not fired and os.path.basename(os.fsdecode(args[0])) == lock_path.name:
        fired.append(event)  # (before the releaser moves its lock aside, the name holds something else)
        os.unlink(lock_path)
        if mode == "directory":
            os.mkdir(lock_path)
        else:
            sessions.append(RunLock(log))
            sessions[-1].acquire()
    elif event == "os.link" and mode == "taken-again" and len(fired) == 1:
        fired.append(event)  # (before the releaser puts back what it moved aside, a third session takes the name)
        sessions.append(RunLock(log))
        sessions[-1].acquire()


first = RunLock(log)
first.acquire()
sys.addaudithook(meanwhile)
first.release()
result = {"fired": fired, "directory": lock_path.is_dir()}
held = []
for session in sessions:
    try:
        session.ensure()
        held.append(True)
    except Exception as exc:
        held.append(type(exc).__name__)
result["held"] = held
try:
    RunLock(log).acquire()
    result["another"] = "took the run"
except RunBusy:
    result["another"] = "refused"
except OSError as exc:
    result["another"] = type(exc).__name__
result["left"] = sorted(p.name for p in lock_path.parent.iterdir())
print(json.dumps(result))
"""


def _put_back(project: Path, mode: str) -> dict[str, object]:
    (project / ".rimthan" / "runs").mkdir(parents=True)
    done = subprocess.run(
        [sys.executable, "-c", _PUT_BACK, str(project), mode], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_a_lock_name_taken_again_before_the_put_back_keeps_its_new_holder_alone(tmp_path: Path) -> None:
    """``remove_held``'s put back finds the name taken again (FileExistsError): the file it moved aside is a lock no
    one holds at its path (its session stops, ``run_lock_lost``), the one at the path holds the run alone, and
    nothing moved aside is left."""
    result = _put_back(tmp_path / "project", "taken-again")
    assert result["fired"] == ["os.rename", "os.link"], result
    assert result["held"] == ["RunLockLost", True], result
    assert result["another"] == "refused", result
    assert result["left"] == ["run-1.lock"], result


def test_a_directory_in_the_lock_s_place_is_put_back_as_it_was(tmp_path: Path) -> None:
    """A directory at the lock's name as the holder lets go (it takes no hard link): moved back to its name, never
    removed, nothing left aside; a session after it is refused as a lock that is no file is (IsADirectoryError)."""
    result = _put_back(tmp_path / "project", "directory")
    assert result["fired"] == ["os.rename"] and result["directory"] is True, result
    assert result["left"] == ["run-1.lock"], result
    assert result["another"] == "IsADirectoryError", result
