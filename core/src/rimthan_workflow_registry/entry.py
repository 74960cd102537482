"""A console script's first instructions: Ctrl-C and SIGTERM are handled before the command's heavy imports.

The console scripts (``rimthan-mcp``, ``rimthan-host``, ``rimthan-pack``)
imported their command line at once, the MCP SDK, click and the core with it
(a fifth of a second and more); Ctrl-C in that time raised
``KeyboardInterrupt`` inside an import and Python printed its traceback, and
SIGTERM killed a server that was starting with no word (143). Each script's
entry (``rimthan_workflow_mcp.entry``, ``rimthan_host.entry``,
``rimthan_packager.entry``) calls :func:`run` first, naming its command-line
module: nothing else is imported before the handlers are in place.

- Ctrl-C while the command line loads says ``error: interrupted`` and a
  ``next:`` line and exits 130, as Ctrl-C while a command runs
  (``rimthan_clikit``); a ``KeyboardInterrupt`` that reaches :func:`run` later
  does the same, never a traceback.
- For a serving command (``serve``), a SIGTERM before the server serves is
  noted, not fatal: the server asks :func:`sigterm_while_starting` once its own
  SIGTERM handling is in place and then stops as for a SIGTERM while serving
  (what the client wrote before it answered, the same stop line, exit 0).
  :func:`starting_over` gives SIGTERM back its default action once serving ends.

Stdlib only: it runs before anything else is imported (``importlib``, ``os``, ``signal`` and ``sys`` are
loaded by the interpreter's own start-up).
"""

from __future__ import annotations

import importlib
import os
import signal
import sys

INTERRUPTED_STATUS = 130  # 128 + SIGINT (remediation.ExitStatus.INTERRUPTED, not imported yet here)
# What rimthan_clikit.refuse says for Ctrl-C (FailureCode.INTERRUPTED and its REMEDIATION); a test keeps them equal.
INTERRUPTED_LINES = "error: interrupted: stopped by Ctrl-C\nnext: run the command again when you want it to finish\n"

_sigterm_came = False


def _interrupted(signum: int, frame: object) -> None:
    """Ctrl-C while the command line loads: the two lines, exit 130 (nothing was done yet to undo)."""
    os.write(2, INTERRUPTED_LINES.encode())
    os._exit(INTERRUPTED_STATUS)


def _note_sigterm(signum: int, frame: object) -> None:
    global _sigterm_came
    _sigterm_came = True


def _runs(argv: list[str], command: str) -> bool:
    """Whether ``argv`` runs ``command`` (its first word that is no option)."""
    words = [word for word in argv[1:] if not word.startswith("-")]
    return bool(words) and words[0] == command


def run(module: str, *, serving: str | None = None) -> object:
    """Import ``module`` (the command line: its heavy imports) with Ctrl-C handled, then call its ``main``.

    ``serving``: the command that serves (``serve``); when it runs, a SIGTERM before it serves is noted for
    :func:`sigterm_while_starting` instead of ending the process.
    """
    signal.signal(signal.SIGINT, _interrupted)
    if serving is not None and hasattr(signal, "SIGTERM") and _runs(sys.argv, serving):
        signal.signal(signal.SIGTERM, _note_sigterm)
    main = importlib.import_module(module).main
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # from here Ctrl-C unwinds the command
        return main()
    except KeyboardInterrupt:  # (the command line says it itself; one that reached here is said the same way)
        sys.stderr.flush()
        os.write(2, INTERRUPTED_LINES.encode())
        return INTERRUPTED_STATUS


def sigterm_while_starting() -> bool:
    """Whether a SIGTERM came before the server served (asked once its own SIGTERM handling is in place)."""
    global _sigterm_came
    came, _sigterm_came = _sigterm_came, False
    return came


def starting_over() -> None:
    """Serving ended: SIGTERM's default action again (if it is still the one noted while starting)."""
    if hasattr(signal, "SIGTERM") and signal.getsignal(signal.SIGTERM) is _note_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
