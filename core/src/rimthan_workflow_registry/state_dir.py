"""Where ``rimthan-mcp`` keeps its state (checkpoint keys, the activation floor) when no ``--state-dir`` is given.

``$RIMTHAN_STATE_DIR``, else ``$XDG_STATE_HOME/rimthan``, else ``~/.local/state/rimthan``: the server's
default, and what the host kit names in the audit command for a verifier that took it from its environment.
"""

from __future__ import annotations

import os
from pathlib import Path

STATE_DIR_VARIABLES = ("RIMTHAN_STATE_DIR", "XDG_STATE_HOME")  # what the default is read from, first first


def default_state_dir() -> Path:
    """$RIMTHAN_STATE_DIR, else $XDG_STATE_HOME/rimthan, else ~/.local/state/rimthan."""
    if env := os.environ.get("RIMTHAN_STATE_DIR"):
        return Path(env)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "rimthan"
