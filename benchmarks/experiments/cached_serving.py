"""The ``cached`` instrument of ``wrapped_serving.py``: every start answered with the first one's result.

For :mod:`.p3_fixed_cost`: ``python benchmarks/experiments/wrapped_serving.py
cached OUT -m rimthan_workflow_mcp serve ARGS...`` serves as ``rimthan-mcp``
does, except that ``call_tool`` keeps its first
successful ``rimthan.start_workflow`` result and returns that same object for
every later start: nothing is validated, digested, issued or serialised. The
other tools are served as ever (the kept start's checkpoint is one this
server issued, so every run goes on from it). A start then costs the server
what any call costs it before and after ``call_tool`` (the SDK, the
transport, our handler, sending the result): its fixed cost. At exit it
writes to ``OUT`` how many starts it served in full and from the cache
(``{"served": n, "cached": m}``).
"""

from __future__ import annotations

from typing import Any


def _keep_first_start(counts: dict[str, int]) -> None:
    import rimthan_workflow_mcp.server as server
    from rimthan_workflow_mcp.tool_contracts import START_WORKFLOW

    served = server.call_tool
    kept: list[Any] = []

    def cached(state: Any, name: str, arguments: dict[str, Any]) -> Any:
        if name != START_WORKFLOW:
            return served(state, name, arguments)
        if kept:
            counts["cached"] += 1
            return kept[0]
        counts["served"] += 1
        result = served(state, name, arguments)
        if not result.is_error:
            kept.append(result)
        return result

    server.call_tool = cached  # on_call_tool looks the module global up on every call


def instrument(module: str) -> dict[str, int]:
    counts = {"served": 0, "cached": 0}
    if module == "rimthan_workflow_mcp":
        _keep_first_start(counts)
    return counts
