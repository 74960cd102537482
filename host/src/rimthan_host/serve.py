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

from pathlib import Path

import click
from rimthan_clikit import RimthanGroup, epilog, guard, refuse
from rimthan_workflow_registry.errors import FailureCode


@click.group(cls=RimthanGroup)
def main() -> None:
    """rimthan-host: the host kit's command line."""


_EXAMPLES = epilog(
    [
        "rimthan-host serve                        # the child serves ./releases, trusting keys/local",
        "rimthan-host serve --harness opencode -- --releases-dir releases --trust keys/local",
    ],
    exits=[
        "Exit status:",
        "  0  the client closed stdio",
        "  1  the bridge or its verifier failed: `error: <code>: <message>` then a `next:` line on stderr",
        "  2  usage mistake (unknown option, missing argument, bad value, no command)",
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


@main.command(epilog=_EXAMPLES)
@click.option(
    "--project",
    type=click.Path(path_type=Path, file_okay=False, exists=True),  # a mistyped path is refused, not created
    default=Path("."),
    show_default=True,
    help="The project the model works in, an existing directory (files and .rimthan/runs/ live here).",
)
@click.option("--verifier-url", help="A running verifier's Streamable HTTP URL (default: start rimthan-mcp serve).")
@click.option("--harness", type=click.Choice(["claude-code", "opencode"]), default="claude-code", show_default=True)
@click.argument("verifier_args", nargs=-1, type=click.UNPROCESSED)
def serve(project: Path, verifier_url: str | None, harness: str, verifier_args: tuple[str, ...]) -> None:
    """Serve the bridge over stdio; VERIFIER_ARGS go to the child `rimthan-mcp serve` (after `--`)."""
    import anyio

    from .bridge_server import serve_bridge, verifier_target  # the MCP SDK and the bridge: not for --help
    from .protocol import HostProfile

    target = guard(lambda: verifier_target(verifier_url, verifier_args), on_io_error=_NO_VERIFIER_NEXT)
    host = HostProfile(harness=harness, adapter_id=harness)
    try:
        anyio.run(serve_bridge, project.absolute(), target, host)
    except Exception as exc:  # the SDK reports failures inside task groups as exception groups
        first: BaseException = exc
        while isinstance(first, BaseExceptionGroup) and first.exceptions:
            first = first.exceptions[0]
        code = FailureCode.IO_ERROR if isinstance(first, OSError) else FailureCode.INTERNAL_ERROR
        refuse(code, None, f"the bridge stopped: {type(first).__name__}: {first}", _FAILED_NEXT)


if __name__ == "__main__":
    main()
