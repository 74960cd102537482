"""The ``timed`` instrument of ``wrapped_serving.py``: a server's request handling timed, for :mod:`.p3_split`.

``python benchmarks/experiments/wrapped_serving.py timed OUT -m MODULE ARGS...``
runs ``python -m MODULE ARGS...`` (``rimthan_workflow_mcp serve ...`` or
``benchmarks.mirror_server ...``) unchanged but for two timers, written to
``OUT`` as JSON at exit:

* ``requests``: per JSON-RPC request, ``[method, tool name or null, wall
  seconds, thread CPU seconds]`` from the SDK dispatcher's
  ``_handle_request`` (handler and response write; reading and parsing the
  line come before it), a private SDK method patched here for measuring only;
* ``call_tool``: ``[tool, seconds]`` per call of ``rimthan_workflow_mcp.server``'s
  ``call_tool`` (validate, route, dispatch, check, serialise: all of a tool
  call that is ours), when that is the module served.
"""

from __future__ import annotations

import time
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


def instrument(module: str) -> dict[str, list[list[Any]]]:
    timings: dict[str, list[list[Any]]] = {"requests": [], "call_tool": []}
    _time_requests(timings["requests"])
    if module == "rimthan_workflow_mcp":
        _time_call_tool(timings["call_tool"])
    return timings
