"""``rimthan-host serve``: the local MCP bridge for model-driven hosts (Claude Code, Claude Desktop, OpenCode).

A stdio MCP server built on the SDK's low-level server (:mod:`.bridge_server`).
It runs in the user's project and talks to the verifier - a child
``rimthan-mcp serve`` over stdio (the default), or a URL over Streamable HTTP -
and offers the model the seven tools of :data:`~rimthan_host.tools.TOOLS`, whose
arguments are words and file paths, never a token or a digest. This module is
only the command line: ``rimthan-host --help`` imports neither the SDK nor the bridge.
It speaks the one error voice of :mod:`rimthan_clikit` (``error: <code>: ...``
then ``next: ...``; exit status 1 for a failure, 2 for a usage mistake).
"""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path
from typing import Any

import click
from rimthan_clikit import EXIT_STATUS_EPILOG, RimthanGroup, epilog, guard, refuse
from rimthan_workflow_registry.errors import FailureCode, quoted

from .require_option import REQUIRE_ELICITATION_ENV


@click.group(cls=RimthanGroup, context_settings={"help_option_names": ["-h", "--help"]}, epilog=EXIT_STATUS_EPILOG)
@click.version_option(package_name="rimthan-host", prog_name="rimthan-host")
def main() -> None:
    """rimthan-host: the host kit's command line."""


_EXAMPLES = epilog(
    [
        "rimthan-host serve                        # the child serves ./releases, trusting keys/local",
        "rimthan-host serve --harness opencode -- --releases-dir releases --trust keys/local",
    ],
    exits=[
        "Exit status:",
        "  0  the client closed stdio, or SIGTERM (calls in flight answered first), and the verifier was up",
        "  1  the bridge or its verifier failed (also a verifier that never came up, or was gone at the end):",
        "     `error: <code>: <message>` then a `next:` line on stderr",
        "  2  usage mistake (unknown option, a word not after --, missing argument, bad value, no command),",
        "     also one the child verifier refused in the flags after --",
    ],
)
_NO_VERIFIER_NEXT = (
    "install rimthan-mcp (uv tool install /path/to/rimthan/host --with-executables-from rimthan-workflow-mcp, "
    "docs/host-kit.md) or give --verifier-url"
)
_FAILED_NEXT = (
    "read the lines above (the verifier's own error: and next: lines, if it wrote any), fix what they name, "
    "then start rimthan-host serve again"
)


REQUIRING_ELICITATION = (  # the start-up line a host's log keeps (interop/claude_code.py finds it in Claude Code's)
    "rimthan-host: --require-elicitation is on: a move that would record a user's confirmation is refused "
    "unless the client can ask the user in a form (declares elicitation)"
)
_NO_STDIO = "start rimthan-host serve from an MCP client (a host's config, e.g. .mcp.json), which gives it both"
_VERIFIER_ARGS = "verifier_args"


class _ServeCommand(click.Command):
    """``serve``: its own options before ``--``; every word after the first ``--`` goes to the child verifier.

    A word before ``--`` that is no option of ``serve`` (a typo in a host's config, a verifier flag that lost
    its ``--``) is a usage mistake, never handed on to the child: the bridge would start, then fail later.
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ours, verifier = (args[: args.index("--")], args[args.index("--") + 1 :]) if "--" in args else (args, [])
        try:
            rest = super().parse_args(ctx, ours)
        except click.NoSuchOption as exc:
            hint = f"{exc.format_message().rstrip('.')} (the verifier's own flags go after --)"
            raise click.UsageError(hint, ctx) from None
        if rest:
            words = " ".join(f"'{quoted(word, 80)}'" for word in rest[:3]) + (" ..." if len(rest) > 3 else "")
            raise click.UsageError(
                f"unexpected word{'s' if len(rest) > 1 else ''} {words}: rimthan-host serve takes only options, "
                f"and the words for its verifier go after --, as in: {ctx.command_path} [OPTIONS] -- WORDS",
                ctx,
            )
        if verifier and ctx.params.get("verifier_url"):
            raise click.UsageError(
                "the words after -- go to the verifier the bridge starts, and with --verifier-url it starts none: "
                "give --verifier-url or the verifier's flags after --, not both",
                ctx,
            )
        ctx.params[_VERIFIER_ARGS] = tuple(verifier)
        return rest

    def collect_usage_pieces(self, ctx: click.Context) -> list[str]:
        return [*super().collect_usage_pieces(ctx), "[-- VERIFIER_ARGS...]"]


def _http_url(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A URL the bridge can connect to (http or https, with a host), or a usage mistake: not a failure later."""
    if value is None:
        return None
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(value)
        usable = parts.scheme in ("http", "https") and bool(parts.hostname) and parts.port != 0
    except ValueError:  # an unclosed [, or a port that is no number or past 65535
        usable = False
    if not usable:
        raise click.BadParameter(f"{quoted(value, 80)!r} is not an http:// or https:// URL with a host", ctx, param)
    return value


@main.command(cls=_ServeCommand, epilog=_EXAMPLES, context_settings={"allow_extra_args": True})
@click.option(
    "--project",
    type=click.Path(path_type=Path, file_okay=False, exists=True),  # a mistyped path is refused, not created
    default=Path("."),
    show_default=True,
    help="The project the model works in, an existing directory (files and .rimthan/runs/ live here).",
)
@click.option(
    "--verifier-url",
    callback=_http_url,
    help="A running verifier's Streamable HTTP URL (default: start rimthan-mcp serve).",
)
@click.option("--harness", type=click.Choice(["claude-code", "opencode"]), default="claude-code", show_default=True)
@click.option(
    "--require-elicitation",
    is_flag=True,
    envvar=REQUIRE_ELICITATION_ENV,
    show_envvar=True,
    help="Refuse every move that would record a user's confirmation (facts, an answer, a migration) when the client "
    "cannot ask the user itself (declares no elicitation), rather than take the model's word for it. The variable "
    "turns it on with true, 1, yes or on (false, 0, no, off or empty: off; the flag, if given, wins).",
)
def serve(project: Path, verifier_url: str | None, harness: str, require_elicitation: bool, **words: Any) -> None:
    """Serve the bridge over stdio; VERIFIER_ARGS (after `--`) go to the child `rimthan-mcp serve`."""
    import anyio

    from .bridge_server import serve_bridge, verifier_target  # the MCP SDK and the bridge: not for --help
    from .protocol import HostProfile

    verifier_args: tuple[str, ...] = words[_VERIFIER_ARGS]  # (set by _ServeCommand: the words after --)
    if sys.stdin is None or sys.stdout is None:  # (started with fd 0 or 1 closed: there is no stdio to serve)
        closed = "standard input" if sys.stdin is None else "standard output"
        refuse(
            FailureCode.IO_ERROR, None, f"{closed} is closed; the bridge serves MCP over stdin and stdout", _NO_STDIO
        )
    project = project.absolute()
    target = guard(lambda: verifier_target(verifier_url, verifier_args, project), on_io_error=_NO_VERIFIER_NEXT)
    host = HostProfile(harness=harness, adapter_id=harness)
    if require_elicitation:  # said at start: a host's config (the plugin's option) is seen to have taken
        click.echo(REQUIRING_ELICITATION, err=True)
    try:
        ended = anyio.run(partial(serve_bridge, require_elicitation=require_elicitation), project, target, host)
    except Exception as exc:  # the SDK reports failures inside task groups as exception groups
        first: BaseException = exc
        while isinstance(first, BaseExceptionGroup) and first.exceptions:
            first = first.exceptions[0]
        code = FailureCode.IO_ERROR if isinstance(first, OSError) else FailureCode.INTERNAL_ERROR
        refuse(code, None, f"the bridge stopped: {type(first).__name__}: {first}", _FAILED_NEXT)
    if ended.stopped:  # SIGTERM, or the client closed its end of stdout
        click.echo(f"rimthan-host: {ended.stopped}", err=True)
    down = ended.down
    if down is not None:  # the client is gone, and the verifier was not up: a host config that only seemed to work
        refuse(down.code, None, down.message, down.next or _FAILED_NEXT, status=down.status)


if __name__ == "__main__":
    main()
