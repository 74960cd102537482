"""The ``reduced`` instrument of ``wrapped_serving.py``: our ``call_tool`` run inside ``functools.reduce``.

For :mod:`.p3_server_callgrind` (``--ours``): ``python
benchmarks/experiments/wrapped_serving.py reduced OUT -m rimthan_workflow_mcp
serve ARGS...`` serves as ``rimthan-mcp`` does, except that each
``call_tool`` runs as the one step of a ``functools.reduce``, a C function
nothing else on a served call's path calls: under callgrind its inclusive
instructions in a call's dump are our part of that call (argument checks,
routing, the engine, the result's check and canonical text), the rest the
SDK's and the transport's. One ``reduce`` step costs a few hundred
instructions. At exit it writes how many calls it wrapped (``{"calls": n}``).
"""

from __future__ import annotations

import functools
from typing import Any


def _reduce_call_tool(counts: dict[str, int]) -> None:
    import rimthan_workflow_mcp.server as server

    served = server.call_tool

    def reduced(state: Any, name: str, arguments: dict[str, Any]) -> Any:
        counts["calls"] += 1
        return functools.reduce(lambda _acc, _i: served(state, name, arguments), (0,), None)

    server.call_tool = reduced  # on_call_tool looks the module global up on every call


def instrument(module: str) -> dict[str, int]:
    counts = {"calls": 0}
    if module == "rimthan_workflow_mcp":
        _reduce_call_tool(counts)
    return counts
