"""Gemini CLI's ``wait_for_previous``: an argument the host adds to every tool, taken and dropped, never refused.

Gemini CLI adds a boolean ``wait_for_previous`` to each MCP tool's schema it gives the model (``make interop``
sees it in the pinned CLI's request) and passes it on with the call when the model sets it. The bridge's
schemas are closed: before, every such call was refused, "unknown argument wait_for_previous", however often
the model retried. Here the check; tests/host/test_bridge_mistakes.py sends it to the real bridge over stdio,
before a run and during one.
"""

from __future__ import annotations

from rimthan_host.tools import HOST_HINTS, argument_problem, without_host_hints

HINT = "wait_for_previous"


def test_the_hint_is_dropped_before_the_check_and_nothing_else_is() -> None:
    assert HINT in HOST_HINTS
    assert argument_problem("show_step", without_host_hints({HINT: True})) is None
    args = without_host_hints({"run": "run-1", HINT: False})
    assert args == {"run": "run-1"} and argument_problem("resume_run", args) is None
    problem = argument_problem("show_step", without_host_hints({HINT: True, "mode": "x"}))
    assert problem is not None and "unknown argument mode" in problem and HINT not in problem
