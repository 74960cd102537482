"""The ``rimthan-mcp audit`` command that verifies a run's log here, as this bridge's verifier was started.

Told to the model when a run completes: ``rimthan-mcp audit LOG`` alone checks
the log's chain but cannot say how the run ended without the releases and
trust store the verifier served from. A child verifier runs in the project
(its relative paths and defaults are the project's), so the flags it was
given that audit shares (``--releases-dir``, ``--release`` and
``--migration-target`` as ``--release``, ``--trust``, ``--state-dir``,
``--checkpoint-keys``) are repeated, and ``--releases-dir`` defaults as
``serve`` does (``$RIMTHAN_RELEASES_DIR``, else ``releases``). What the child
took from the bridge's environment instead of a flag (``$RIMTHAN_TRUST``,
``$RIMTHAN_STATE_DIR`` or ``$XDG_STATE_HOME``, as serve resolves its state
directory: an ``.mcp.json``'s ``env``, which the user's shell does not have) is
said as the flag, so the command runs as told anywhere. The command is
``rimthan-mcp`` when that name on the bridge's ``PATH`` is the verifier it
started, else that verifier's path (:func:`audit_program`). A verifier
reached by URL keeps its checkpoint keys and releases to itself: its operator
audits the log.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Sequence

from rimthan_workflow_registry.state_dir import STATE_DIR_VARIABLES, default_state_dir

_SHARED = {
    "--releases-dir": "--releases-dir",
    "--release": "--release",
    "--migration-target": "--release",
    "--trust": "--trust",
    "--state-dir": "--state-dir",
    "--checkpoint-keys": "--checkpoint-keys",
}
_RELEASES = ("--releases-dir", "--release")
PROGRAM = "rimthan-mcp"  # the verifier's command, as told when the one the bridge started is the one on PATH
SERVED_RELEASES_ENV = "RIMTHAN_RELEASES_DIR"  # (serve's --releases-dir; audit's has no variable)
DEFAULT_RELEASES_DIR = "releases"  # (serve's default, relative to the project the child runs in)


def _variable(name: str, default: str | None = None) -> Callable[[], str | None]:
    return lambda: os.environ.get(name) or default


def _state_dir() -> str | None:
    """The state directory serve resolves from its environment, if a variable names it (else its default under
    the user's home, which their shell's audit finds too)."""
    return str(default_state_dir()) if any(os.environ.get(v) for v in STATE_DIR_VARIABLES) else None


_FROM_ENVIRONMENT = (  # audit's flag, the value the child read instead, the flags that make it moot
    ("--releases-dir", _variable(SERVED_RELEASES_ENV, DEFAULT_RELEASES_DIR), _RELEASES),
    ("--trust", _variable("RIMTHAN_TRUST"), ("--trust",)),
    ("--state-dir", _state_dir, ("--state-dir", "--checkpoint-keys")),
)


def audit_program(started: str, on_path: str | None) -> str:
    """How to call the verifier the bridge started (``started``, its path) from a shell: ``rimthan-mcp`` when that
    name on the bridge's ``PATH`` (``on_path``, as ``shutil.which`` finds it) is the same program, else its path
    (installed beside ``rimthan-host`` alone, it is not on ``PATH``: a plugin's ``uv tool install`` without
    ``--with-executables-from rimthan-workflow-mcp``)."""
    if on_path is not None and os.path.realpath(on_path) == os.path.realpath(started):
        return PROGRAM
    return os.path.abspath(started)


def audit_command(log: str, verifier_args: Sequence[str] | None, program: str = PROGRAM) -> str:
    """The shell command verifying ``log`` and saying how its run ended; ``None`` args: a verifier by URL;
    ``program``: the verifier's command as a shell calls it (:func:`audit_program`)."""
    if verifier_args is None:
        return f"the verifier's operator verifies it with rimthan-mcp audit {shlex.quote(log)} and its checkpoint keys"
    flags = _shared_flags(verifier_args)
    added = []
    for flag, read, given in _FROM_ENVIRONMENT:
        value = read()
        if value and not any(f in given for f, _ in flags):
            added.append((flag, value))
    flags = [*added, *flags]
    words = [program, "audit", log, *(word for pair in flags for word in pair)]
    return f"{shlex.join(words)} verifies it and says how the run ended"


def _shared_flags(words: Sequence[str]) -> list[tuple[str, str]]:
    """The (flag, value) pairs of ``words`` that audit takes too, renamed to audit's flag, in order."""
    found: list[tuple[str, str]] = []
    at = 0
    while at < len(words):
        word = words[at]
        name, equals, value = word.partition("=")
        if name in _SHARED and equals:
            found.append((_SHARED[name], value))
        elif word in _SHARED and at + 1 < len(words):
            found.append((_SHARED[word], words[at + 1]))
            at += 1
        at += 1
    return found
