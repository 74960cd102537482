"""``rimthan-mcp``: run, check, audit and key the verifier server.

``rimthan-mcp serve`` with no flags serves every catalogue in ./releases
(each at its newest release that verifies), trusting ./keys/local, with
checkpoint keys created on first run under the state directory
($RIMTHAN_STATE_DIR, else $XDG_STATE_HOME/rimthan, else
~/.local/state/rimthan). Everything human goes to stderr (stdout is the MCP
wire under stdio); every refusal speaks the one error voice of
:mod:`rimthan_clikit`: ``error: <code>: <file>: <message>`` then ``next: <what
to do>``, exit status 1 for a refusal and 2 for a usage mistake.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import click
from rimthan_clikit import EXIT_STATUS_LINES, RimthanGroup, epilog, guard, refuse
from rimthan_workflow_registry.errors import FailureCode
from rimthan_workflow_registry.remediation import ExitStatus
from rimthan_workflow_registry.state_dir import default_state_dir

from .cli_check import check
from .cli_keys import (
    KEYS_FILE,
    KEYS_HELP,
    KEYS_IO,
    STATE_HELP,
    audit,
    check_state_dir,
    keys,
    open_keyring,
    releases_dir_option,
    say,
    trust_option,
)
from .cli_provider import DEFAULT_RELEASES, open_provider
from .cli_serve_options import (
    bind_host,
    check_http_only,
    check_refresh_interval,
    check_release_mode,
    check_stale_after,
    forwarded_from,
    tcp_port,
    usage,
)
from .cli_start_report import say_loaded, say_refresh, say_state
from .logs import LEVELS, configure_logging, get_logger

if TYPE_CHECKING:
    from .provider import ReleaseProvider

_log = get_logger("cli")
_PORT_IO = "choose a free --port (0 picks one) or a --host this machine has"
_EXIT_STATUS = EXIT_STATUS_LINES
_epilog = epilog


@click.group(
    cls=RimthanGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=_epilog(
        [
            "rimthan-mcp serve                      # stdio, every catalogue in ./releases",
            "rimthan-mcp serve --transport http --port 8765",
            "rimthan-mcp check --release releases/research-decision-1.3.0 --trust keys/local",
            "rimthan-mcp audit run.log --checkpoint-keys ~/.local/state/rimthan/checkpoint-keys.json",
            "rimthan-mcp keys rotate",
        ]
    ),
)
@click.version_option(package_name="rimthan-workflow-mcp", prog_name="rimthan-mcp")
def main() -> None:
    """Rimthan verifier MCP server: serves signed workflow releases through four tools.

    It loads releases only through the one verification path (signatures,
    manifest, every file's digest) and refuses anything that does not verify.
    Run `rimthan-mcp COMMAND --help` for each command's options.
    """


# --------------------------------------------------------------------------- serve


@main.command(
    epilog=_epilog(
        [
            "rimthan-mcp serve",
            "rimthan-mcp serve --release releases/research-decision-1.2.0 \\",
            "    --migration-target releases/research-decision-1.3.0 --trust keys/local",
            "rimthan-mcp serve --transport http --host 127.0.0.1 --port 0     # prints the URL it listens on",
            "kill -HUP <pid>                                                   # refresh: activate a newer release",
        ],
        exits=(
            "Exit status:",
            "  0  the client closed stdio, or SIGTERM (calls in flight answered first)",
            "  1  refused at start (release, trust, keys, floor or address): one line on stderr with what to do next",
            "  2  usage mistake",
            f"  {ExitStatus.INTERRUPTED}  interrupted (Ctrl-C)",
        ),
        notes=[
            "On start it prints to stderr each loaded release with version, manifest digest and path, the migration",
            "target, the trust keys and threshold, the checkpoint key file and signing key id, the activation floor,",
            "how to refresh, and the transport and address. Under stdio, stdout carries only MCP messages.",
        ],
    )
)
@click.option(
    "--release",
    "release_dir",
    type=click.Path(path_type=Path),
    metavar="DIR",
    help="Serve exactly this release directory (the explicit two-release mode, with --migration-target; not "
    "with --releases-from). "
    "[default: every catalogue in --releases-dir, each at its newest release that verifies]",
)
@click.option(
    "--migration-target",
    type=click.Path(path_type=Path),
    metavar="DIR",
    help="With --release: a separately verified release of the same scope that runs may migrate to. "
    "[default: none; migration is refused]",
)
@click.option(
    "--migrate-to-newest",
    is_flag=True,
    help="Without --release: a run may migrate to the newest verified release of its own catalogue when that "
    "is newer than the release it is pinned to (refresh moves the target along). [default: off; migration is "
    "refused]",
)
@releases_dir_option(
    "Releases served (every <catalogue>-<version> directory; a corrupt one is skipped and reported) and "
    "rescanned on refresh. [default: ./releases, or the parent of --release]",
)
@trust_option()
@click.option(
    "--checkpoint-keys",
    type=click.Path(path_type=Path),
    metavar="FILE",
    help=KEYS_HELP + " Created mode 0600 on first run; refused where git would track it.",
)
@click.option("--state-dir", type=click.Path(path_type=Path, readable=False), metavar="DIR", help=STATE_HELP)
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio: one client per process, as MCP hosts launch servers. http: Streamable HTTP at http://HOST:PORT/mcp.",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    callback=bind_host,
    help="HTTP bind address (IPv6: ::1 or [::1]); like --port, --http-sessions and --allowed-host, refused under "
    "stdio.",
)
@click.option(
    "--port", default=8765, show_default=True, type=int, callback=tcp_port, help="HTTP port (0 picks a free one)."
)
@click.option(
    "--http-sessions",
    is_flag=True,
    help="HTTP only: give 2025-11-25 clients an Mcp-Session-Id and server-to-client SSE streams. Sessions "
    "live in this process, so replicas then need sticky routing. [default: stateless]",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="HOST[:PORT]",
    help="HTTP: a Host header value to accept besides loopback (the name clients or a load balancer use); "
    "HOST accepts any port, HOST:PORT only that one; repeatable. DNS-rebinding protection stays on.",
)
@click.option(
    "--forwarded-allow-ips",
    metavar="IPS",
    help="HTTP behind a reverse proxy: believe X-Forwarded-For and X-Forwarded-Proto from these proxy addresses "
    "or networks only (comma-separated, e.g. 10.0.0.5,10.1.0.0/16), so logs name the proxy's client. "
    "[default: believed from no one]",
)
@click.option(
    "--refresh-interval",
    type=float,
    default=None,
    metavar="SECONDS",
    help="Also rescan --releases-dir every SECONDS (SIGHUP always triggers a refresh); with --releases-from at "
    "least 1, as each refresh syncs the registry. [default: off]",
)
@click.option(
    "--stale-after",
    type=float,
    default=None,
    metavar="SECONDS",
    help="With --releases-from and --transport http: GET /healthz answers 503 (status stale) once syncs fail and "
    "the last one that did not is over SECONDS old, or one has been under way (hangs) for over SECONDS, so a load "
    "balancer drains the replica. [default: off; 200 while it serves what it holds]",
)
@click.option(
    "--releases-from",
    metavar="oci://HOST/REPOSITORY",
    envvar="RIMTHAN_RELEASES_FROM",
    show_envvar=True,
    help="Follow an OCI repository: pull its version tags into --releases-dir (verified) at start and before "
    "every refresh. [default: none]",
)
@click.option(
    "--plain-http",
    is_flag=True,
    help="With --releases-from: talk plain HTTP to the registry instead of TLS.",
)
@click.option(
    "--lower-floor",
    is_flag=True,
    help="Deliberately activate a release below the recorded activation floor (rollback).",
)
@click.option(
    "--log-level",
    type=click.Choice(LEVELS),
    default="info",
    show_default=True,
    help="Structured JSON logs on stderr, one object per line.",
)
def serve(
    release_dir: Path | None,
    migration_target: Path | None,
    migrate_to_newest: bool,
    releases_dir: Path | None,
    trust: Path,
    checkpoint_keys: Path | None,
    state_dir: Path | None,
    transport: str,
    host: str,
    port: int,
    http_sessions: bool,
    allowed_hosts: tuple[str, ...],
    forwarded_allow_ips: str | None,
    refresh_interval: float | None,
    stale_after: float | None,
    releases_from: str | None,
    plain_http: bool,
    lower_floor: bool,
    log_level: str,
) -> None:
    """Verify the release(s) and serve the four workflow tools.

    Serves rimthan.start_workflow, rimthan.continue_workflow,
    rimthan.prepare_step_validation and rimthan.submit_step_validation, the
    contracts and release files as immutable resources, and the release's
    prompt assets as prompts. A checkpoint is served by the release it is
    pinned to, even after a refresh activated a newer one.
    """
    # the MCP SDK and the transports load here, not at import: keys and audit never need them; and the HTTP
    # transport (uvicorn's protocol, h11, the HTTP bounds) only when it serves or checks HTTP options
    from rimthan_workflow_registry.limits import LISTEN_STREAMS

    from .list_changed import ListingWatch
    from .server import create_mcp_application
    from .stdio_transport import serve_stdio, stdio_not_open

    configure_logging(log_level)
    if transport == "stdio" and (closed := stdio_not_open()) is not None:  # before a file opened takes its number
        refuse(
            FailureCode.IO_ERROR,
            closed,
            "not open: the process was started with it closed, and MCP over stdio needs both stdin and stdout",
            "start rimthan-mcp serve from an MCP host (it connects both), or serve over HTTP with --transport http",
        )
    check_http_only(click.get_current_context(), transport)
    check_refresh_interval(refresh_interval, releases_from)
    check_stale_after(stale_after, releases_from, transport)
    check_release_mode(release_dir is not None, releases_from)
    if plain_http and releases_from is None:  # it would be ignored: the server itself never speaks TLS
        usage("--plain-http says how to reach the registry --releases-from follows: give --releases-from too")
    if allowed_hosts:
        from .http_transport import check_allowed_host

        for value in allowed_hosts:
            if (problem := check_allowed_host(value)) is not None:
                usage(f"--allowed-host {value!r}: {problem}")
    forwarded = None if forwarded_allow_ips is None else forwarded_from(forwarded_allow_ips)
    state_dir = state_dir or default_state_dir()
    checked_state: Path = state_dir
    guard(lambda: check_state_dir(checked_state))
    keys_path = checkpoint_keys or state_dir / KEYS_FILE
    if migration_target is not None and release_dir is None:
        usage(
            "--migration-target needs --release (the explicit two-release mode); with --releases-dir use "
            "--migrate-to-newest"
        )
    if migrate_to_newest and release_dir is not None:
        usage(
            "--migrate-to-newest serves a releases directory; drop --release, or name the target with "
            "--migration-target"
        )
    # a port taken (or a --host this machine lacks) fails now, before a follower's first pull; listened on only
    # once a verified release is held
    bound = None
    if transport != "stdio":
        from .http_transport import bind_socket

        bound = guard(lambda: bind_socket(host, port), on_io_error=_PORT_IO)
    follower = None
    if releases_from is not None:
        follow_dir = releases_dir = releases_dir or DEFAULT_RELEASES
        from .follow import start_following  # oras and requests only when following a registry

        follower = guard(lambda: start_following(releases_from, trust, follow_dir, plain_http, checked_state))
    from rimthan_workflow_registry.release import load_trust  # what serving loads, imported then

    from .provider import scan_releases

    if release_dir is None:  # a missing or empty releases directory is the first thing to fix
        guard(lambda: scan_releases(releases_dir or DEFAULT_RELEASES))
    trust_store = guard(lambda: load_trust(trust))
    keyring, created = guard(lambda: open_keyring(keys_path, create=True), on_io_error=KEYS_IO)
    provider: ReleaseProvider = guard(
        lambda: open_provider(
            release_dir,
            releases_dir=releases_dir,
            trust=trust_store,
            keyring=keyring,
            migration_target=migration_target,
            state_dir=state_dir,
            lower_floor=lower_floor,
            migrate_to_newest=migrate_to_newest,
        ),
    )
    provider.trust_path = trust  # every refresh re-reads it
    from .key_file_watch import KeyFileWatch

    provider.key_file_watch = KeyFileWatch(keys_path, keyring).check  # and says a changed key file, not reloaded
    if follower is not None:
        provider.before_refresh = follower.sync
        provider.sync_status = follower.status
        provider.watch_syncs = follower.watch
        provider.stop_syncs, provider.stopping = follower.stop, follower.stopping
        say(f"following {follower.ref} into {provider.releases_dir} (pulled before every refresh)")
    # clients are told when a refresh changes the listings: on listen streams (2026-07-28), and handshake-era
    # connections where a notification can reach them (stdio, HTTP sessions)
    watch = ListingWatch(provider, handshake=transport == "stdio" or http_sessions, max_listen_streams=LISTEN_STREAMS)
    app = guard(lambda: create_mcp_application(provider, calls_on_loop=transport == "stdio", watch=watch))
    say_loaded(provider, trust_store)
    say_state(provider, keyring, keys_path=keys_path, created=created, state_dir=state_dir)
    say_refresh(provider, os.getpid(), refresh_interval, stale_after)
    _log.info(
        "loaded",
        extra={"provider": provider.describe(), "trust_keys": sorted(trust_store.keys), "transport": transport},
    )
    try:
        if transport == "stdio":
            say("transport stdio (MCP on stdin/stdout)")
            stopped = anyio.run(lambda: serve_stdio(app, provider, refresh_interval=refresh_interval, watch=watch))
            if stopped:
                say(stopped)
        else:
            from .http_transport import ForwardedFrom, allowed_host_values, is_beyond_loopback, listen, serve_http

            assert bound is not None
            sock, binding = bound
            guard(lambda: listen(sock), on_io_error=_PORT_IO)
            mode = "Streamable HTTP with sessions" if http_sessions else "stateless Streamable HTTP"
            say(f"transport http ({mode}) at {binding.url}")
            say(f"accepting Host: {', '.join(allowed_host_values(binding, allowed_hosts))}")
            forwarded = forwarded or ForwardedFrom()
            say(f"believing X-Forwarded-For/-Proto from: {', '.join(forwarded.proxies) or 'no one'}")
            if is_beyond_loopback(host):
                say(
                    f"warning: listening beyond loopback on {binding.authority}; only the Host values above are "
                    "answered (others get 421)"
                    + ("" if allowed_hosts else "; add --allowed-host NAME for the name clients use")
                )
            stopped_http = anyio.run(
                lambda: serve_http(
                    app,
                    provider,
                    sock=sock,
                    binding=binding,
                    refresh_interval=refresh_interval,
                    extra_hosts=allowed_hosts,
                    forwarded=forwarded,
                    log_level="debug" if log_level == "debug" else "warning",
                    sessions=http_sessions,
                    stale_after=stale_after,
                    watch=watch,
                )
            )
            say(stopped_http)
    except KeyboardInterrupt:
        say("interrupted; stopped")
        sys.exit(ExitStatus.INTERRUPTED)
    except Exception as exc:  # never a traceback on the operator's terminal; details at --log-level debug
        _log.debug("server stopped unexpectedly", exc_info=True)
        refuse(FailureCode.INTERNAL_ERROR, None, f"the server stopped unexpectedly ({type(exc).__name__}: {exc})")


main.add_command(audit)
main.add_command(check)
main.add_command(keys)

__all__ = ["KEYS_FILE", "main"]
