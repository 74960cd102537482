"""``rimthan-mcp``'s console script: Ctrl-C and SIGTERM handled from its first instruction.

See ``rimthan_workflow_registry.entry``.
"""

from __future__ import annotations

from rimthan_workflow_registry.entry import run


def main() -> object:
    return run(
        "rimthan_workflow_mcp.cli",
        serving="serve",
        serving_imports=("rimthan_workflow_mcp.server", "rimthan_workflow_mcp.stdio_transport"),
        refreshes=True,
    )
