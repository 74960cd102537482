"""Run a server module instrumented: ``python benchmarks/experiments/wrapped_serving.py KIND OUT -m MODULE ARGS...``.

Runs ``python -m MODULE ARGS...`` unchanged but for what the instrument
``KIND`` patches in (``timed``: ``timed_serving.py``, for ``p3_split``;
``cached``: ``cached_serving.py``, for ``p3_fixed_cost``; ``gc``: ``gc_serving.py``, for ``p6_cpu``;
``reduced``: ``reduced_serving.py``, for ``p3_server_callgrind --ours``; ``layered``:
``layered_serving.py``, for ``p3_server_callgrind --layers``), and writes the
record that instrument returned to ``OUT`` as JSON at exit (a SIGTERM, how the
benchmark stops HTTP servers, also ends in the write). Run it as a script
(not ``-m``) so that the served package is imported once.
"""

from __future__ import annotations

import atexit
import dataclasses
import importlib
import json
import os
import runpy
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # only the type: this file also runs as a script, outside its package
    from ..servers import ServerCommand

INSTRUMENTS = {
    "timed": "benchmarks.experiments.timed_serving",
    "cached": "benchmarks.experiments.cached_serving",
    "gc": "benchmarks.experiments.gc_serving",
    "reduced": "benchmarks.experiments.reduced_serving",
    "layered": "benchmarks.experiments.layered_serving",
}
SCRIPT = Path(__file__)


def wrapped(kind: str, out: Path, command: ServerCommand) -> ServerCommand:
    """``command`` (``-m MODULE ...``) served under instrument ``kind``, which records to ``out``."""
    return dataclasses.replace(command, args=(str(SCRIPT), kind, str(out), *command.args))


def main() -> None:
    if len(sys.argv) < 5 or sys.argv[1] not in INSTRUMENTS or sys.argv[3] != "-m":
        raise SystemExit(f"usage: wrapped_serving.py {'|'.join(INSTRUMENTS)} OUT -m MODULE ARGS...")
    sys.path.insert(0, os.getcwd())  # as ``python -m`` would have it (a script gets its own directory instead)
    out, module = Path(sys.argv[2]), sys.argv[4]
    record = importlib.import_module(INSTRUMENTS[sys.argv[1]]).instrument(module)
    atexit.register(lambda: out.write_text(json.dumps(record), "utf-8"))
    # uvicorn restores this handler and re-raises SIGTERM after its graceful stop: exit through atexit then.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    sys.argv = [module, *sys.argv[5:]]
    runpy.run_module(module, run_name="__main__")


if __name__ == "__main__":
    main()
