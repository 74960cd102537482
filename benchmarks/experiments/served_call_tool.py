"""``rimthan-mcp serve`` with the seconds of each ``call_tool`` recorded, for :mod:`.p3_split`.

``python benchmarks/experiments/served_call_tool.py OUT -m rimthan_workflow_mcp serve ...``
serves exactly as ``python -m rimthan_workflow_mcp serve ...`` does, except
that the server module's ``call_tool`` (validate, route, dispatch, check,
serialise: all of a tool call that is ours) is wrapped in a timer; at exit the
(tool, seconds) pairs are written to ``OUT`` as JSON. Run as a script (not
``-m``) so that the serving package is imported exactly once.
"""

from __future__ import annotations

import atexit
import json
import runpy
import sys
import time
from pathlib import Path
from typing import Any


def main() -> None:
    out = Path(sys.argv[1])
    if sys.argv[2:4] != ["-m", "rimthan_workflow_mcp"]:
        raise SystemExit("usage: served_call_tool.py OUT -m rimthan_workflow_mcp serve ...")
    import rimthan_workflow_mcp.server as server

    served = server.call_tool
    seconds: list[tuple[str, float]] = []

    def timed(state: Any, name: str, arguments: dict[str, Any]) -> Any:
        started = time.perf_counter()
        try:
            return served(state, name, arguments)
        finally:
            seconds.append((name, time.perf_counter() - started))

    server.call_tool = timed  # on_call_tool looks the module global up on every call
    atexit.register(lambda: out.write_text(json.dumps(seconds), "utf-8"))
    sys.argv = ["rimthan-mcp", *sys.argv[4:]]
    runpy.run_module("rimthan_workflow_mcp", run_name="__main__")


if __name__ == "__main__":
    main()
