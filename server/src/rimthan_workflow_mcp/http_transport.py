"""Serving the application over stateless Streamable HTTP (or with sessions), the refresh triggers beside it.

HTTP is stateless (no ``Mcp-Session-Id``; any replica with the same releases
and checkpoint keys can serve any call) and keeps the SDK's DNS-rebinding /
Origin protection on, allowing loopback, the bound address and the hosts the
operator names with ``--allowed-host`` (a page at such an origin may read
the answers in a browser: ``http_cors``). A request body is bounded by
``limits.MAX_REQUEST_BODY_BYTES`` (what the largest legitimate tool call takes;
the SDK answers a larger one with HTTP 413 before reading past the bound,
which ``http_bounds`` makes a JSON-RPC error a client can read);
``http_bounds`` bounds the time a client may take to send a request or to take
its answer, the requests in flight at once, and answers a stateless ``GET`` /
``DELETE`` with 405. uvicorn's proxy headers (``X-Forwarded-For``, ``X-Forwarded-Proto``) are believed only
from the proxies the operator names with ``--forwarded-allow-ips`` (:class:`ForwardedFrom`), never by default: they
rewrite the client address every log record names (``logs.PEER``). With ``--http-sessions``, a full session table closes
its longest-idle session for a new one (``session_room``). ``SIGTERM`` drains
the calls in flight, then stops (``http_stop``).
"""

from __future__ import annotations

import asyncio
import ipaddress
import signal
import socket
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any

import anyio
import uvicorn
from mcp.server import Server
from mcp.server.transport_security import TransportSecuritySettings
from rimthan_workflow_registry.entry import serving_began, starting_over
from rimthan_workflow_registry.limits import MAX_REQUEST_BODY_BYTES

from . import session_room
from .health import Health
from .http_bounds import BoundedRequests, HeadDeadlineProtocol
from .http_cors import CrossOrigin
from .http_stop import ANSWERED_SECONDS, AnswerAtStop, CutOff
from .list_changed import ListingWatch
from .logs import get_logger
from .port_claims import claim
from .provider import ReleaseProvider
from .refresh_triggers import refresh_triggers, stop_syncs
from .stdio_drain import DRAIN_SECONDS

MCP_PATH = "/mcp"
_log = get_logger("transport")


@dataclass(frozen=True)
class HttpBinding:
    """The address a server bound and its real port (port 0 has been given one): what clients are told."""

    host: str
    port: int

    @property
    def authority(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.authority}{MCP_PATH}"


def allowed_host_values(binding: HttpBinding, extra_hosts: Sequence[str] = ()) -> list[str]:
    """``Host`` header values accepted: loopback at the bound port, the bound address, and the operator's.

    A wildcard bind (``0.0.0.0``, ``::``) is no name a client sends, so it adds
    nothing; loopback stays accepted so probes inside the container work. An
    operator's bare ``HOST`` accepts it without a port (a proxy on 80/443) and on
    any port; ``HOST:PORT`` exactly that.
    """
    port = binding.port
    hosts = [f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"]
    if not _is_wildcard(binding.host) and binding.authority not in hosts:
        hosts.append(binding.authority)
    for value in extra_hosts:
        value = value.lower()  # Host is compared lower-cased (http_bounds): host names ignore case
        hosts.extend([value] if _has_port(value) else [value, f"{value}:*"])
    return list(dict.fromkeys(hosts))


def security_settings(binding: HttpBinding, extra_hosts: Sequence[str] = ()) -> TransportSecuritySettings:
    """DNS-rebinding / Origin protection (always on) for the hosts :func:`allowed_host_values` names."""
    hosts = allowed_host_values(binding, extra_hosts)
    origins = [f"{scheme}://{h}" for h in hosts for scheme in ("http", "https")]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


def check_allowed_host(value: str) -> str | None:
    """Why ``value`` is not a usable ``--allowed-host`` (a host name or address, optionally ``:PORT``), else None."""
    host = value[1 : value.index("]")] if value.startswith("[") and "]" in value else value.rsplit(":", 1)[0]
    if not value or any(c in value for c in "/ @*?#") or "://" in value:
        return "give a host name or address as a client sends it in Host, optionally with :PORT (no scheme, path or *)"
    port = value.rsplit(":", 1)[1] if _has_port(value) else None
    if port is not None and not (port.isascii() and port.isdigit()):  # str.isdigit also takes "٨٠"
        return "the port must be a number"
    if not host:
        return "the host is empty"
    return None


NOT_A_PROXY = "a name, a port or a network with host bits set would match no client address: give 10.0.0.5, 10.1.0.0/16"


@dataclass(frozen=True)
class ForwardedFrom:
    """The reverse proxies whose ``X-Forwarded-For`` / ``X-Forwarded-Proto`` uvicorn believes: none by default.

    Believed, they replace the request's client address (the ``peer`` of every log record, a stateless
    client's key) and scheme. uvicorn's own default believes them from loopback (or from what
    ``$FORWARDED_ALLOW_IPS`` names), so any local process could put any address into the log: here no
    proxy is believed unless named, and that variable is never read."""

    proxies: tuple[str, ...] = ()


def parse_forwarded_allow_ips(value: str) -> ForwardedFrom | str:
    """``--forwarded-allow-ips``: comma-separated proxy addresses or networks; else why it is not usable.

    Only what uvicorn compares as an address or a network: a name, a network with host bits set, or anything
    else uvicorn keeps as a literal never matches a client address (so it would silently believe no one), and
    ``*`` believes every client, which is what the option exists to prevent."""
    items = [item.strip() for item in value.split(",")]
    for item in items:
        if problem := _not_a_proxy(item):
            return f"{item!r} {problem}" if item else problem
    return ForwardedFrom(tuple(dict.fromkeys(items)))


def _not_a_proxy(item: str) -> str | None:
    if not item:
        return "an address is empty: give comma-separated proxy addresses or networks (10.0.0.5,10.1.0.0/16)"
    if item == "*":
        return "would believe every client's X-Forwarded-For: name the proxy's address or network"
    try:
        ipaddress.ip_network(item) if "/" in item else ipaddress.ip_address(item)
    except ValueError:
        return f"is no IP address or network ({NOT_A_PROXY})"
    return None


def is_beyond_loopback(host: str) -> bool:
    """True when a bind address is reachable from other machines (wildcard or a non-loopback address)."""
    return not _is_loopback(host)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _has_port(value: str) -> bool:
    if value.startswith("["):
        return "]:" in value
    return value.count(":") == 1


def _is_wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def bind_socket(host: str, port: int) -> tuple[socket.socket, HttpBinding]:
    """Bind first (port 0 picks a free port) so the security settings name the real port.

    Bound, not listening: ``serve`` binds before a follower's first pull (a port taken fails at once, with
    nothing pulled) and listens (:func:`listen`) only once it holds a verified release to serve.
    ``SO_REUSEADDR`` lets a restart bind past its predecessor's TIME_WAIT connections, and on Linux also lets a
    second socket bind the address (or one a wildcard overlaps) while the first is bound but not yet listening:
    :func:`_claim` refuses that.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit this on Linux: without it Nagle + delayed ACK add ~40 ms to a
    # request/response exchange (measured: tools/list 60 ms -> 10 ms over loopback).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
        binding = HttpBinding(host=host, port=sock.getsockname()[1])
        _claim(sock)
    except OSError as exc:
        sock.close()
        raise OSError(exc.errno, exc.strerror or str(exc), HttpBinding(host, port).authority) from None
    sock.set_inheritable(True)
    return sock, binding


def _claim(sock: socket.socket) -> None:
    """Linux: refuse at bind a second server starting on an address this one's overlaps (``port_claims``), not
    silently let it through until one of the two listens (the other then failing after its pulls)."""
    if not sys.platform.startswith("linux"):  # elsewhere a second bind of a bound address fails by itself
        return
    address, port = sock.getsockname()[:2]
    claim(address, port)


def listen(sock: socket.socket) -> socket.socket:
    """Start taking connections on a socket :func:`bind_socket` bound (a refusal names its address)."""
    try:
        sock.listen(128)
    except OSError as exc:
        address, port = sock.getsockname()[:2]
        raise OSError(exc.errno, exc.strerror or str(exc), HttpBinding(address, port).authority) from None
    return sock


class _DrainingServer(uvicorn.Server):
    """SIGTERM is the orderly stop of a container or service manager: stop accepting, let calls in flight
    finish (up to ``DRAIN_SECONDS``), exit 0. uvicorn re-raises the signal after its graceful shutdown,
    which made the process die with 143; SIGINT (Ctrl-C) keeps that behaviour and exits 130. Open listen
    streams are ended with their result first: they are no call to wait for, and would hold the stop back;
    so is a follower's sync under way (``stop_syncs``): stopped at once, not waited for. ``cut_off``: the calls
    still running at the drain's deadline, which uvicorn cancels (their clients get the error ``http_stop``
    answers them with)."""

    def __init__(
        self, config: uvicorn.Config, watch: ListingWatch | None, provider: ReleaseProvider, stop: CutOff
    ) -> None:
        super().__init__(config)
        self._watch = watch
        self._provider = provider
        self.stop = stop
        self.cut_off: set[asyncio.Task[None]] = set()

    async def _wait_tasks_to_complete(self) -> None:
        """uvicorn's wait for the calls in flight, cancelled at the drain's deadline: note those cut off."""
        try:
            await super()._wait_tasks_to_complete()
        except asyncio.CancelledError:
            self.stop.passed = True  # uvicorn cancels them next: each answered by http_stop
            self.cut_off = set(self.server_state.tasks)
            raise

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        # a follower's sync is no call: one hanging on its registry would hold the stop until its deadline
        stopped = stop_syncs(self._provider)
        said = {"drain_seconds": DRAIN_SECONDS} | ({"sync_stopped": stopped} if stopped else {})
        if sig == signal.SIGTERM:
            _log.info("SIGTERM: draining calls in flight, then stopping", extra=said)
            self._captured_signals = [s for s in self._captured_signals if s != signal.SIGTERM]

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn's handlers are in place (``capture_signals``): a SIGTERM is the server's from now on."""
        serving_began()  # (a SIGTERM before this stopped the start-up: rimthan_workflow_registry.entry)
        await super().startup(sockets)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self._watch is not None:
            self._watch.close_listen_streams()
        await super().shutdown(sockets)
        if self.cut_off:  # cancelled, not awaited by uvicorn: their answers written before the stop line
            await asyncio.wait(self.cut_off, timeout=ANSWERED_SECONDS)


async def serve_http(
    app: Server[Any],
    provider: ReleaseProvider,
    *,
    sock: socket.socket,
    binding: HttpBinding,
    refresh_interval: float | None,
    extra_hosts: Sequence[str] = (),
    forwarded: ForwardedFrom = ForwardedFrom(),
    log_level: str = "warning",
    sessions: bool = False,
    stale_after: float | None = None,
    watch: ListingWatch | None = None,
) -> str:
    """Serve Streamable HTTP at ``binding.url`` until SIGINT/SIGTERM; the line that says how it stopped.

    Stateless by default. ``sessions`` gives 2025-11-25 clients an
    ``Mcp-Session-Id`` and server-to-client SSE streams (``GET``) - held in
    this process only, so replicas then need sticky routing; run state stays
    in the tokens either way, and 2026-07-28 clients are sessionless regardless
    (a ``subscriptions/listen`` stream is the answer to its own ``POST``, told of
    this replica's refreshes). ``forwarded``: the proxies whose forwarded headers are believed (none).
    """
    security = security_settings(binding, extra_hosts)
    starlette_app = app.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=not sessions,
        json_response=True,
        transport_security=security,
        host=binding.host,
        max_request_body_size=MAX_REQUEST_BODY_BYTES,  # every call a release can legitimately need, no more
        max_sessions=session_room.MAX_SESSIONS,
        session_idle_timeout=session_room.IDLE_SECONDS,
    )
    if sessions:
        session_room.make_room(app.session_manager)
    health = Health(provider, security, stale_after)
    methods = ("POST", "GET", "DELETE") if sessions else ("POST",)  # what a stateless server answers: POST
    health.watch()  # each change of the answer logged as it happens, probed or not
    stop = CutOff()
    bounded = BoundedRequests(starlette_app, stateless=not sessions, health=health)
    config = uvicorn.Config(
        CrossOrigin(AnswerAtStop(bounded, stop), security, methods),
        http=HeadDeadlineProtocol,
        log_config=None,
        log_level=log_level,
        lifespan="on",
        access_log=False,
        timeout_graceful_shutdown=DRAIN_SECONDS,
        proxy_headers=bool(forwarded.proxies),  # uvicorn's default: True, believing loopback
        forwarded_allow_ips=list(forwarded.proxies),  # a list, never None: $FORWARDED_ALLOW_IPS is not read
    )
    server = _DrainingServer(config, watch, provider, stop)
    async with anyio.create_task_group() as tg:
        await tg.start(refresh_triggers, provider, refresh_interval, watch)
        _log.info("serving", extra={"transport": "http", "url": binding.url})
        print(f"rimthan-mcp: listening on {binding.url}", file=sys.stderr, flush=True)
        try:
            await server.serve(sockets=[sock])
        finally:
            starting_over()  # serving is over: SIGTERM's default action again
        tg.cancel_scope.cancel()
    return http_stopped(len(server.cut_off), server.stop)


def http_stopped(cut_off: int, stop: CutOff) -> str:
    """How serving over HTTP ended: every call in flight answered, or ``cut_off`` cancelled at the drain's end
    (each answered ``Connection closed``, but for those whose answer had begun or was not written in time)."""
    if not cut_off:
        return "stopped: calls in flight were answered"
    unanswered = cut_off - stop.answered
    how = "answered Connection closed, HTTP 503"
    if unanswered > 0:
        how = f"{stop.answered} {how}; {unanswered} closed unanswered"
    return f"stopped: {cut_off} call(s) in flight still unanswered after {DRAIN_SECONDS} s were cancelled ({how})"
