"""Sessions taking and letting go of one run's lock, as fast as they can: ``python -m support.run_lock_churn
PROJECT RUN ROUNDS``.

Each round takes the run's lock (``RunLock``, as a session's start or resume does), marks the run as moved by
creating ``moving`` beside the project with ``O_EXCL`` (one holder at a time: a second holder finds it there),
removes the mark and lets go (which removes the lock file). Prints ``HELD <n> BUSY <n> TWO <n>`` at the end:
``TWO`` counts the rounds that found another holder's mark, which the lock must make zero.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from rimthan_host.run_lock import RunBusy, RunLock
from rimthan_host.runlog import RunLog


def main(project: Path, run: str, rounds: int) -> int:
    held = busy = two = 0
    mark = project / "moving"
    for _ in range(rounds):
        lock = RunLock(RunLog(project, run))
        try:
            lock.acquire()
        except RunBusy:
            busy += 1
            continue
        try:
            fd = os.open(mark, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        except FileExistsError:
            two += 1
        else:
            held += 1
            os.close(fd)
            os.sched_yield()
            mark.unlink()
        lock.release()
    print(f"HELD {held} BUSY {busy} TWO {two}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])))
