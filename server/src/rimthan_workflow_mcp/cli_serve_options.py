"""``rimthan-mcp serve``: option combinations refused as usage mistakes before anything is loaded.

Each check names the option at fault: an option that could never apply (an HTTP option under stdio, ``--release``
with a followed registry) would otherwise be silently ignored. ``--port`` and ``--host`` are checked as click reads
them (:func:`tcp_port`, :func:`bind_host`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, NoReturn

import click
from rimthan_clikit import refuse
from rimthan_workflow_registry.errors import FailureCode
from rimthan_workflow_registry.remediation import ExitStatus

if TYPE_CHECKING:
    from .http_transport import ForwardedFrom

# a followed registry is synced before every refresh (a tag listing, then a manifest per new version): below one
# second a replica would query it many times a second, which registries rate-limit, for no fresher release
MIN_SYNC_INTERVAL = 1.0
HTTP_ONLY = ("--host", "--port", "--http-sessions", "--allowed-host", "--forwarded-allow-ips")


def usage(message: str) -> NoReturn:
    refuse(FailureCode.USAGE, None, message, "run 'rimthan-mcp serve --help'", status=ExitStatus.USAGE)


def check_refresh_interval(refresh_interval: float | None, releases_from: str | None) -> None:
    """``--refresh-interval``: seconds above 0; with ``--releases-from`` at least :data:`MIN_SYNC_INTERVAL`."""
    if refresh_interval is None:
        return
    if not (math.isfinite(refresh_interval) and refresh_interval > 0):
        # anyio.sleep refuses a negative or NaN delay: the server would die after it said it was listening
        usage(f"--refresh-interval {refresh_interval:g}: give a number of seconds above 0, or leave it out")
    if releases_from is not None and refresh_interval < MIN_SYNC_INTERVAL:
        usage(
            f"--refresh-interval {refresh_interval:g}: every refresh syncs the registry --releases-from follows; "
            f"give at least {MIN_SYNC_INTERVAL:g} second(s)"
        )


def check_stale_after(stale_after: float | None, releases_from: str | None, transport: str) -> None:
    """``--stale-after``: seconds above 0, for a follower answering health checks (HTTP)."""
    if stale_after is None:
        return
    if not (math.isfinite(stale_after) and stale_after > 0):
        usage(f"--stale-after {stale_after:g}: give a number of seconds above 0, or leave it out")
    if releases_from is None or transport != "http":
        usage(
            "--stale-after says when GET /healthz of a follower turns 503: it needs --releases-from and "
            "--transport http"
        )


def check_http_only(ctx: click.Context, transport: str) -> None:
    """An HTTP option given under ``--transport stdio`` would be ignored: refuse it, naming the option."""
    if transport == "http":
        return
    for param in ctx.command.params:
        name = next((o for o in param.opts if o in HTTP_ONLY), None)
        source = ctx.get_parameter_source(param.name) if param.name else None
        if name is not None and source is click.ParameterSource.COMMANDLINE:
            usage(f"{name} applies to --transport http only; give --transport http, or drop {name}")


def forwarded_from(value: str) -> ForwardedFrom:
    """``--forwarded-allow-ips``: the proxies whose forwarded headers are believed, or a usage mistake naming it."""
    from .http_transport import parse_forwarded_allow_ips  # (uvicorn: loaded only when HTTP options are given)

    parsed = parse_forwarded_allow_ips(value)
    if isinstance(parsed, str):
        usage(f"--forwarded-allow-ips {value!r}: {parsed}")
    return parsed


def check_release_mode(release_given: bool, releases_from: str | None) -> None:
    """``--release`` pins one release; a followed registry is pulled into ``--releases-dir``, which it never reads."""
    if release_given and releases_from is not None:
        usage(
            "--release serves exactly one release directory, and --releases-from (or $RIMTHAN_RELEASES_FROM) pulls "
            "into --releases-dir, which --release does not serve: give one of them"
        )


def tcp_port(_ctx: click.Context, _param: click.Parameter, value: int) -> int:
    """``--port``: checked as it is read (bind would refuse it only after every release was verified)."""
    if not 0 <= value <= 65535:
        raise click.BadParameter(f"{value} is no TCP port: give 1-65535, or 0 to pick a free one")
    return value


def bind_host(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    """``--host``: an IPv6 address as URLs write it (``[::1]``) is the address (the socket takes ``::1``)."""
    return value[1:-1] if value.startswith("[") and value.endswith("]") and ":" in value else value
