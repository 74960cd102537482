"""A server module run with its request handling timed, for :mod:`.p3_split`.

``python benchmarks/experiments/timed_serving.py OUT -m MODULE ARGS...`` runs
``python -m MODULE ARGS...`` (``rimthan_workflow_mcp serve ...`` or
``benchmarks.mirror_server ...``) unchanged but for two timers, written to
``OUT`` as JSON at exit:

* ``requests``: per JSON-RPC request, ``[method, tool name or null, wall
  seconds, thread CPU seconds]`` from the SDK dispatcher's
  ``_handle_request`` (handler and response write; reading and parsing the
  line come before it), a private SDK method patched here for measuring only;
* ``call_tool``: ``[tool, seconds]`` per call of ``rimthan_workflow_mcp.server``'s
  ``call_tool`` (validate, route, dispatch, check, serialise: all of a tool
  call that is ours), when that is the module served.

Run it as a script (not ``-m``) so that the served package is imported once.
A SIGTERM (how the benchmark stops HTTP servers) also ends in the write.
"""

from __future__ import annotations

import atexit
import json
import os
import runpy
import signal
import sys
import time
from pathlib import Path
from typing import Any

from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher


def _time_requests(requests: list[list[Any]]) -> None:
    handle = JSONRPCDispatcher._handle_request

    async def timed(self: Any, req: Any, *args: Any) -> None:
        wall, cpu = time.perf_counter(), time.thread_time()
        try:
            await handle(self, req, *args)
        finally:
            tool = (req.params or {}).get("name")
            requests.append([req.method, tool, time.perf_counter() - wall, time.thread_time() - cpu])

    JSONRPCDispatcher._handle_request = timed  # type: ignore[method-assign,assignment]


def _time_call_tool(calls: list[list[Any]]) -> None:
    import rimthan_workflow_mcp.server as server

    served = server.call_tool

    def timed(state: Any, name: str, arguments: dict[str, Any]) -> Any:
        started = time.perf_counter()
        try:
            return served(state, name, arguments)
        finally:
            calls.append([name, time.perf_counter() - started])

    server.call_tool = timed  # on_call_tool looks the module global up on every call


def main() -> None:
    if len(sys.argv) < 4 or sys.argv[2] != "-m":
        raise SystemExit("usage: timed_serving.py OUT -m MODULE ARGS...")
    out, module = Path(sys.argv[1]), sys.argv[3]
    sys.path.insert(0, os.getcwd())  # as ``python -m`` would have it (a script gets its own directory instead)
    timings: dict[str, list[list[Any]]] = {"requests": [], "call_tool": []}
    _time_requests(timings["requests"])
    if module == "rimthan_workflow_mcp":
        _time_call_tool(timings["call_tool"])
    atexit.register(lambda: out.write_text(json.dumps(timings), "utf-8"))
    # uvicorn restores this handler and re-raises SIGTERM after its graceful stop: exit through atexit then.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    sys.argv = [module, *sys.argv[4:]]
    runpy.run_module(module, run_name="__main__")


if __name__ == "__main__":
    main()
