"""One error voice for ``rimthan-pack``, ``rimthan-mcp`` and ``rimthan-host``.

Every refusal these tools make is two lines on stderr::

    error: <code>: <file>: <message>
    next: <what to do>

The ``next`` line comes from the core's remediation table
(:mod:`rimthan_workflow_registry.remediation`) unless the refusal carries a
situation-specific step. Usage mistakes use the same form with the code
``usage``; Ctrl-C, with ``interrupted``. Exit statuses (0 ok, 1 refused,
2 usage, 130 interrupted, 141 stdout's reader gone) are
:class:`~rimthan_workflow_registry.remediation.ExitStatus`. Bad input never reaches the user as a traceback.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn, TypeVar

import click
from rimthan_workflow_registry.errors import FailureCode, RegistryError, refusal_line, single_line
from rimthan_workflow_registry.remediation import REMEDIATION, ExitStatus, io_next_step, next_step

__all__ = [
    "EXIT_STATUS_EPILOG",
    "EXIT_STATUS_LINES",
    "RimthanGroup",
    "emit_json",
    "epilog",
    "guard",
    "io_next_step",
    "refuse",
    "refuse_error",
    "reports_refusals",
    "warn",
]

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")

EXIT_STATUS_LINES = (
    "Exit status:",
    f"  {ExitStatus.OK}  success",
    f"  {ExitStatus.REFUSED}  refused: `error: <code>: <file>: <message>` then a `next:` line on stderr",
    f"  {ExitStatus.USAGE}  usage mistake (unknown option, missing argument, no command)",
    f"  {ExitStatus.INTERRUPTED}  interrupted (Ctrl-C): `error: interrupted: ...` on stderr",
)
EXIT_STATUS_EPILOG = "\b\n" + "\n".join(EXIT_STATUS_LINES)  # a group's help ends with them, kept verbatim


def emit_json(value: Any) -> None:
    """Print ``value`` as indented, key-sorted JSON on stdout."""
    click.echo(json.dumps(value, indent=2, sort_keys=True))


def refuse(
    code: FailureCode,
    where: str | None,
    message: str,
    next_hint: str | None = None,
    *,
    as_json: bool = False,
    details: Mapping[str, Any] | None = None,
    status: ExitStatus = ExitStatus.REFUSED,
    also: Sequence[RegistryError] = (),
) -> NoReturn:
    """Print the two refusal lines (and the JSON refusal when asked), then exit.

    ``also``: further failures collected with this one, each said in its own two lines after it (``--json``:
    all of them, this one first, under ``errors``).
    """
    click.echo(f"error: {refusal_line(code, where, message)}", err=True)
    click.echo(f"next: {single_line(next_hint or REMEDIATION[code])}", err=True)
    for other in also:
        click.echo(f"error: {other.one_line()}", err=True)
        click.echo(f"next: {single_line(next_step(other))}", err=True)
    if as_json:
        error = _json_error(code, where, message, details)
        out: dict[str, Any] = {"ok": False, "error": error}
        if also:
            out["errors"] = [error, *(_json_error(o.code, o.path, o.message, o.details) for o in also)]
        emit_json(out)
    sys.exit(int(status))


def _json_error(
    code: FailureCode, where: str | None, message: str, details: Mapping[str, Any] | None
) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code.value, "message": message}
    if where:
        error["path"] = where
    if details:
        error["details"] = dict(details)
    return error


def warn(code: FailureCode, where: str | None, message: str, next_hint: str | None = None) -> None:
    """A refusal's two lines as a warning (``warning: <code>: <file>: <message>``, ``next:``); the command goes on."""
    click.echo(f"warning: {refusal_line(code, where, message)}", err=True)
    click.echo(f"next: {single_line(next_hint or REMEDIATION[code])}", err=True)


def refuse_error(exc: RegistryError, *, as_json: bool = False) -> NoReturn:
    """Refuse with a domain error: its code, file, message and next step (and each failure collected with it)."""
    refuse(exc.code, exc.path, exc.message, next_step(exc), as_json=as_json, details=exc.details or None, also=exc.also)


def _refuse_os(exc: OSError, next_hint: str | None, as_json: bool) -> NoReturn:
    where = exc.filename if isinstance(exc.filename, str) else None
    next_hint = io_next_step(exc, otherwise=next_hint)
    refuse(FailureCode.IO_ERROR, where, exc.strerror or str(exc), next_hint, as_json=as_json)


def guard(action: Callable[[], T], *, on_io_error: str | None = None, as_json: bool = False) -> T:
    """Run ``action``; a domain or OS refusal becomes the two refusal lines and exit 1.

    ``on_io_error`` is the next step when the OS refuses and the caller knows
    better than the errno what the file was for (a checkpoint key file, a port);
    a full or read-only file system is said as such whatever the file was for.
    """
    try:
        return action()
    except RegistryError as exc:
        refuse_error(exc, as_json=as_json)
    except BrokenPipeError as exc:
        if not _stdout_closed():  # a registry or a child process went away: an I/O refusal as any other
            _refuse_os(exc, on_io_error, as_json)
        _leave_quietly()
    except OSError as exc:
        _refuse_os(exc, on_io_error, as_json)


def _stdout_closed() -> bool:
    """Whether stdout is a pipe whose reader has gone (``rimthan-pack inspect RELEASE | head``)."""
    import select  # only a broken pipe asks: never a command whose output is read

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll (Windows), or no stdout file
        return False


def _leave_quietly() -> NoReturn:
    """Stop printing to a reader that has gone, saying nothing (it asked for no more), as a shell's SIGPIPE."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())  # the interpreter's last flush then goes nowhere, without a traceback
    sys.exit(int(ExitStatus.OUTPUT_CLOSED))


def reports_refusals(func: F) -> F:
    """Decorate a click command: refusals become the two lines (``--json``: also a JSON refusal)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        as_json = bool(kwargs.get("as_json", False))
        return guard(lambda: func(*args, **kwargs), as_json=as_json)

    return wrapper  # type: ignore[return-value]


def epilog(examples: Sequence[str], exits: Sequence[str] = EXIT_STATUS_LINES, notes: Sequence[str] = ()) -> str:
    """Examples, notes and exit statuses, kept verbatim by click (``\\b``)."""
    parts = ["\b\nExamples:\n" + "\n".join(f"  {e}" for e in examples)]
    if notes:
        parts.append("\b\n" + "\n".join(notes))
    parts.append("\b\n" + "\n".join(exits))
    return "\n\n".join(parts)


class _Interrupted(Exception):
    """Ctrl-C inside a command, carried past click (which would print a blank line and call it an abort)."""


class RimthanGroup(click.Group):
    """A click group whose usage mistakes speak the one error voice (exit 2).

    No command at all is a usage mistake too: the help goes to stderr and the
    status is 2, so a script that forgot its command does not pass silently.
    Ctrl-C is no mistake: it says ``interrupted`` and exits 130, as a shell
    reports ``SIGINT``.

    ``commands_elsewhere`` names commands registered on this group by another
    module (command name -> module): that module is imported only when the
    command is looked up (run, or listed in the help), so a command that
    never names it does not pay for its import.
    """

    def __init__(self, *args: Any, commands_elsewhere: Mapping[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands_elsewhere = dict(commands_elsewhere or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.commands_elsewhere})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        home = self.commands_elsewhere.get(cmd_name)
        if home is not None and cmd_name not in self.commands:
            importlib.import_module(home)  # its decorators register the command on this group
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise _Interrupted from None

    def main(
        self,
        args: Any = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        try:
            result = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.UsageError as exc:
            command = exc.ctx.command_path if exc.ctx is not None else _program(prog_name)
            if _is_no_args(exc) and exc.ctx is not None:
                click.echo(exc.ctx.get_help(), err=True)
                refuse(
                    FailureCode.USAGE,
                    None,
                    "no command given",
                    f"run '{command} COMMAND', see the list above",
                    status=ExitStatus.USAGE,
                )
            refuse(FailureCode.USAGE, None, exc.format_message(), _usage_next(exc, command), status=ExitStatus.USAGE)
        except click.ClickException as exc:
            refuse(FailureCode.USAGE, None, exc.format_message(), status=ExitStatus(min(exc.exit_code, 2)))
        except (_Interrupted, click.Abort):  # click.Abort: Ctrl-C before the command ran, or at a prompt
            refuse(FailureCode.INTERRUPTED, None, "stopped by Ctrl-C", status=ExitStatus.INTERRUPTED)
        sys.exit(result if isinstance(result, int) else int(ExitStatus.OK))


def _usage_next(exc: click.UsageError, command: str) -> str:
    """Run the help; for a required option left out, first what it takes, from its own help."""
    param = exc.param if isinstance(exc, click.MissingParameter) else None
    if not isinstance(param, click.Option) or not param.help or not param.opts:
        return f"run '{command} --help'"
    what = param.help.split(". ")[0].rstrip(".")
    metavar = param.metavar or param.type.name.upper()
    return f"add {param.opts[0]} {metavar} - {what[:1].lower()}{what[1:]}; more in '{command} --help'"


def _program(prog_name: str | None) -> str:
    """The program as the user typed it (click gives no context for an option missing its value)."""
    return prog_name or click.utils._detect_program_name()


def _is_no_args(exc: click.UsageError) -> bool:
    no_args = getattr(click.exceptions, "NoArgsIsHelpError", None)
    return no_args is not None and isinstance(exc, no_args)
