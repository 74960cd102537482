"""``rimthan-pack``'s console script: Ctrl-C handled from its first instruction.

See ``rimthan_workflow_registry.entry``.
"""

from __future__ import annotations

from rimthan_workflow_registry.entry import run


def main() -> object:
    return run("rimthan_packager.cli")
