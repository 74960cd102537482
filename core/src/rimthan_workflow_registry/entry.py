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
- For a serving command (``serve``), a SIGTERM while the command line loads
  ends the process at once, and one after it unwinds what it was doing
  (loading the releases) as Ctrl-C does; either way the process says
  ``<program>: stopped (SIGTERM) while starting, before it served: no call
  was answered`` and exits 0, as a SIGTERM while serving does (a service
  manager stopping it waits for no start-up). The server calls
  :func:`serving_began` once its own SIGTERM handling is in place;
  :func:`starting_over` gives SIGTERM back its default action once serving
  ends.
- Neither signal raises inside an import: library code an import runs can
  catch what a handler raises and raise its own error (pydantic-core,
  building an SDK model's schema, made either a ``SchemaError`` traceback).
- A Ctrl-C that lands where Python cannot raise it (a weakref callback, such
  as the one importlib's module locks run in a command's own lazy imports,
  or a ``__del__``) was printed as ``Exception ignored ... KeyboardInterrupt``
  with a traceback and lost: the command went on. It is raised again a
  millisecond later (a one-shot ``SIGALRM``), where it unwinds the command.
  One lost in another thread (whose ``SIGALRM`` handler cannot be set) is a
  ``SIGINT`` sent to the main thread, which wakes it from a blocking read.

The cyclic garbage collector is off while the command line is imported
(its modules, click's, cryptography's: about 40 collections for a build, and
almost nothing for them to free), and on again, as the caller left it, before
``main`` runs; it is off too while this module imports ``signal``.

Stdlib only: it runs before anything else is imported (the interpreter's own
start-up loaded ``importlib``, ``os`` and ``sys``; ``signal`` takes a few
milliseconds). Before the script's first instruction the signals are
Python's: that window, the interpreter starting, is not Rimthan's to close.
"""

from __future__ import annotations

import _thread
import gc
import importlib
import os
import sys
from types import ModuleType

# signal's import makes its three enums: with the collector on, that ran a collection over every object the
# interpreter's start had made (0.3% of a 1 MiB build's instructions), before run turns the collector off.
_collecting = gc.isenabled()
gc.disable()
try:
    import signal
finally:
    if _collecting:
        gc.enable()

INTERRUPTED_STATUS = 130  # 128 + SIGINT (remediation.ExitStatus.INTERRUPTED, not imported yet here)
# What rimthan_clikit.refuse says for Ctrl-C (FailureCode.INTERRUPTED and its REMEDIATION); a test keeps them equal.
INTERRUPTED_LINES = "error: interrupted: stopped by Ctrl-C\nnext: run the command again when you want it to finish\n"

_AGAIN_AFTER = 0.001  # seconds: a Ctrl-C lost in a callback is raised again this long after (past the callback)

_served = False  # the server's own SIGTERM handling took over once (serving_began)
_refresh_asked = False  # SIGHUP came while the server started (taken by refresh_asked_while_starting)
_main_thread = 0  # the ident of the thread run was called in: the main one (signal.signal works nowhere else)


class StoppedStarting(BaseException):
    """SIGTERM before the server served: unwinds what it was doing (imports, loading), as Ctrl-C does."""


def _interrupted(signum: int, frame: object) -> None:
    """Ctrl-C while the command line loads: the two lines, exit 130 (nothing was done yet to undo)."""
    os.write(2, INTERRUPTED_LINES.encode())
    os._exit(INTERRUPTED_STATUS)


def _stop_importing(signum: int, frame: object) -> None:
    """SIGTERM while the command line loads: the stopped line, exit 0 at once (nothing was done yet to undo).

    Never raised as :class:`StoppedStarting` there: an exception raised inside pydantic-core building a model's
    schema (the MCP SDK's imports) comes out as pydantic's own ``SchemaError``, a traceback."""
    os.write(2, _stopped_line().encode())
    os._exit(0)


def _stop_starting(signum: int, frame: object) -> None:
    if not _served:
        raise StoppedStarting
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # (serving is over: SIGTERM's default action again)
    os.kill(os.getpid(), signal.SIGTERM)


def _refresh_later(signum: int, frame: object) -> None:
    """SIGHUP (refresh) while the server starts: its default action killed the process (129) with no word; the
    server refreshes once its own SIGHUP handling is in place (what the start loaded may predate the signal)."""
    global _refresh_asked
    _refresh_asked = True


def refresh_asked_while_starting() -> bool:
    """Whether a SIGHUP came while the server started (taken once: call it after installing the server's own)."""
    global _refresh_asked
    asked, _refresh_asked = _refresh_asked, False
    return asked


def _interrupt_again(unraisable: sys.UnraisableHookArgs) -> None:
    """``sys.unraisablehook``: a ``KeyboardInterrupt`` raised where it could not propagate (a weakref callback, a
    ``__del__``) is raised again in a moment, where it can, and never printed; anything else as before."""
    if not isinstance(unraisable.exc_value, KeyboardInterrupt):
        _hook_before(unraisable)
        return
    if _thread.get_ident() != _main_thread:  # (SIGALRM's handler can be set in the main thread only)
        _interrupt_main()
        return
    try:
        signal.signal(signal.SIGALRM, signal.default_int_handler)
        signal.setitimer(signal.ITIMER_REAL, _AGAIN_AFTER)
    except AttributeError:  # (no SIGALRM on this platform: Windows)
        _interrupt_main()


def _interrupt_main() -> None:
    """Ctrl-C for the main thread, from another thread (or where there is no SIGALRM): a real SIGINT sent to the
    main thread, which wakes it from a blocking read or wait; where threads cannot be signalled (Windows), the
    interpreter's flag (``_thread.interrupt_main``), which the main thread sees at its next instruction."""
    if hasattr(signal, "pthread_kill"):
        signal.pthread_kill(_main_thread, signal.SIGINT)
    else:
        _thread.interrupt_main()


_hook_before = sys.unraisablehook


def _runs(argv: list[str], command: str) -> bool:
    """Whether ``argv`` runs ``command`` (its first word that is no option)."""
    words = [word for word in argv[1:] if not word.startswith("-")]
    return bool(words) and words[0] == command


def run(
    module: str, *, serving: str | None = None, serving_imports: tuple[str, ...] = (), refreshes: bool = False
) -> object:
    """Import ``module`` (the command line: its heavy imports) with Ctrl-C handled, then call its ``main``.

    ``serving``: the command that serves (``serve``); when it runs, a SIGTERM before it serves stops it at once
    with one line and exit 0 (:func:`serving_began` hands SIGTERM to the server's own handling), and the modules
    ``serving_imports`` names (the MCP SDK's, which the command line imports only for ``serve``, not for
    ``--help``) are imported here too, where a signal ends the process in its handler: raised inside them it
    could reach pydantic-core building a schema, which turns it into its own ``SchemaError`` (a traceback).
    ``refreshes``: the serving command refreshes on SIGHUP; one while it starts is kept for it
    (:func:`refresh_asked_while_starting`), not the end of the process.
    """
    global _main_thread
    signal.signal(signal.SIGINT, _interrupted)
    _main_thread = _thread.get_ident()
    sys.unraisablehook = _interrupt_again
    serves = serving is not None and _runs(sys.argv, serving)
    stops = serves and hasattr(signal, "SIGTERM")
    if stops:
        signal.signal(signal.SIGTERM, _stop_importing)
    if serves and refreshes and hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, _refresh_later)
    try:
        asks_help = any(word in ("--help", "-h") for word in sys.argv[1:])
        main = _imported(module, *(serving_imports if serves and not asks_help else ())).main
        signal.signal(signal.SIGINT, signal.default_int_handler)  # from here Ctrl-C unwinds the command
        if stops:  # (from here a SIGTERM unwinds the loading of the releases)
            signal.signal(signal.SIGTERM, _stop_starting)
        return main()
    except KeyboardInterrupt:  # (the command line says it itself; one that reached here is said the same way)
        return _said(INTERRUPTED_LINES, INTERRUPTED_STATUS)
    except StoppedStarting:
        return _said(_stopped_line(), 0)
    except BaseExceptionGroup as group:  # (raised inside the event loop, before the server's handler took over)
        if group.subgroup(StoppedStarting) is None:
            raise
        return _said(_stopped_line(), 0)


def _imported(module: str, *also: str) -> ModuleType:
    """``module`` (and the modules ``also`` names), imported with the cyclic collector off (imports allocate much
    and free no cycles); then as it was."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for other in also:
            importlib.import_module(other)
        return importlib.import_module(module)
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()


def _stopped_line() -> str:
    program = os.path.basename(sys.argv[0]) or "rimthan"
    return f"{program}: stopped (SIGTERM) while starting, before it served: no call was answered\n"


def _said(lines: str, status: int) -> int:
    sys.stderr.flush()
    os.write(2, lines.encode())
    return status


def serving_began() -> None:
    """The server's own SIGTERM handling is in place: from now on a SIGTERM is the server's.

    What start-up built (the releases verified and loaded, the tools' contracts) lives as long as the server:
    frozen out of the cyclic collector's passes (``gc.freeze``), a full pass no longer walks it on every call's
    time (a pass over the packaged release took about 50 ms, once per few thousand calls under load).
    """
    global _served
    _served = True
    gc.freeze()


def starting_over() -> None:
    """Serving ended: SIGTERM's default action again (if the handler is still the start-up one)."""
    if hasattr(signal, "SIGTERM") and signal.getsignal(signal.SIGTERM) is _stop_starting:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
