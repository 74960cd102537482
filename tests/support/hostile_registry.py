"""A registry that does not play fair, on loopback: ``http.server`` answering each request with a behaviour.

Signatures protect a release's content; these cases attack the puller's and
the pusher's availability instead. A test gives :func:`start_hostile` one
function that answers every request, whatever its method (the handler is
passed in: its ``command``, ``path`` and ``headers``); the helpers below are
the answers the cases share. Every request is recorded in
``HostileRegistry.seen`` (path, headers) and ``HostileRegistry.calls``
(method, path), and every endless answer stops when the registry stops, so no
test can hang on it.

Functions
    start_hostile(answer, tls=None) -> HostileRegistry  (stop() it; the ``hostile`` fixture does)
                                                        tls: a support.registry.TlsFiles serves HTTPS only
    HostileRegistry.ref(repo, tag=None) -> str          ``oci://127.0.0.1:PORT/repo[:tag]``
    HostileRegistry.sent                                body bytes written before the client hung up
    ends(call) -> what call returned or raised          fails the test if still running after BOUNDED_WAIT s
    refused_code(outcome) -> FailureCode                the code of a RegistryError outcome (else fails)
    send_json(handler, value, status=200, headers={})   a JSON answer
    send_raw(handler, body, status=200, headers={})     any bytes, as JSON
    send_flood(handler, registry, total)                200 with ``total`` bytes of body, chunked, fast
    send_drip(handler, registry, every)                 200 announcing 1 MB, one byte every ``every`` seconds
    drip_headers(handler, registry, every)              a status line, then a header one byte every ``every`` seconds
    endless_pages(handler, padding=0)                   a one-tag page with a ``Link: rel="next"`` to another page
    guarded_by(scheme, then) -> answer                  ask for a token (``Bearer``, realm /token here, which hands
                                                        out ``TOKEN``) or ``Basic`` credentials before ``then`` answers
    read_body(handler) -> bytes                         the request's body (Content-Length bytes)
    read_body_at(rate)(handler) -> bytes                the request's body, taken at ``rate`` bytes a second
    hold(handler, registry)                             answer nothing until the registry stops
    read_slowly(handler, registry, every)               take the request's body one byte every ``every`` s, never answer
    forward(handler, registry, upstream, read=read_body) pass the request (its body taken by ``read``) to
                                                        ``upstream`` (host:port) and its answer back
"""

from __future__ import annotations

import http.client
import http.server
import json
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rimthan_workflow_registry.errors import FailureCode, RegistryError

from support.registry import TlsFiles

Answer = Callable[[http.server.BaseHTTPRequestHandler, "HostileRegistry"], None]
FLOOD_CHUNK = 64 * 1024
PIECE = 16 * 1024  # what a slow reader takes at a time
TOKEN = "secret-token"
BOUNDED_WAIT = 60.0  # far above what the bounded code takes; the old code never ended
HOP_BY_HOP = {"connection", "transfer-encoding", "keep-alive", "content-length"}


@dataclass
class HostileRegistry:
    server: http.server.ThreadingHTTPServer
    stopping: threading.Event = field(default_factory=threading.Event)
    seen: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    calls: list[tuple[str, str]] = field(default_factory=list)
    sent: int = 0

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.server.server_port}"

    def ref(self, repo: str, tag: str | None = None) -> str:
        return f"oci://{self.host}/{repo}" + (f":{tag}" if tag else "")

    def stop(self) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()


def start_hostile(answer: Answer, tls: TlsFiles | None = None) -> HostileRegistry:
    """A threaded loopback server answering every request with ``answer`` (HTTPS only with ``tls``)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # else each small answer waits out a delayed ACK

        def do_GET(self) -> None:  # noqa: N802 (the http.server hook's name)
            registry.seen.append((self.path, dict(self.headers)))
            registry.calls.append((self.command, self.path))
            try:
                answer(self, registry)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

        do_HEAD = do_POST = do_PUT = do_PATCH = do_GET  # noqa: N815

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if tls is not None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(tls.server_cert, tls.server_key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    registry = HostileRegistry(server)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return registry


def send_json(
    handler: http.server.BaseHTTPRequestHandler,
    value: Any,
    status: int = 200,
    headers: dict[str, str] | None = None,
) -> None:
    send_raw(handler, json.dumps(value).encode(), status, headers)


def send_raw(
    handler: http.server.BaseHTTPRequestHandler,
    body: bytes,
    status: int = 200,
    headers: dict[str, str] | None = None,
) -> None:
    handler.send_response(status)
    for name, text in {"Content-Type": "application/json", **(headers or {})}.items():
        handler.send_header(name, text)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    if handler.command != "HEAD":  # an answer to HEAD has no body: sent, it would be read as the next answer
        handler.wfile.write(body)


def send_flood(handler: http.server.BaseHTTPRequestHandler, registry: HostileRegistry, total: int) -> None:
    """``total`` bytes of body as fast as the client reads them; ``registry.sent`` counts what it took."""
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Transfer-Encoding", "chunked")
    handler.end_headers()
    chunk = b" " * FLOOD_CHUNK
    while registry.sent < total and not registry.stopping.is_set():
        handler.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        registry.sent += len(chunk)
    handler.close_connection = True


def send_drip(handler: http.server.BaseHTTPRequestHandler, registry: HostileRegistry, every: float) -> None:
    """Announce a megabyte, then send one byte every ``every`` seconds: each read is well inside any timeout."""
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(1_000_000))
    handler.end_headers()
    while not registry.stopping.wait(every):
        handler.wfile.write(b" ")
        handler.wfile.flush()
    handler.close_connection = True


def drip_headers(handler: http.server.BaseHTTPRequestHandler, registry: HostileRegistry, every: float) -> None:
    """A status line, then a header that never ends, one byte every ``every`` seconds."""
    handler.wfile.write(b"HTTP/1.1 200 OK\r\nX-Drip: ")
    while not registry.stopping.wait(every):
        handler.wfile.write(b"a")
        handler.wfile.flush()
    handler.close_connection = True


def endless_pages(handler: http.server.BaseHTTPRequestHandler, padding: int = 0) -> None:
    """Every tag page holds one new tag (plus ``padding`` bytes of another) and links to the next page:
    the list never ends."""
    page = int(handler.path.rpartition("last=")[2] or 0) if "last=" in handler.path else 0
    base = handler.path.partition("?")[0]
    send_json(
        handler,
        {"name": "attack/pages", "tags": [f"0.0.{page}"] + (["x" * padding] if padding else [])},
        headers={"Link": f'<{base}?n=1&last={page + 1}>; rel="next"'},
    )


def guarded_by(scheme: str, then: Answer) -> Answer:
    """A registry that wants a token (``Bearer``) or Basic credentials before ``then`` answers."""

    def answer(handler: http.server.BaseHTTPRequestHandler, registry: HostileRegistry) -> None:
        if handler.path.startswith("/token"):
            send_json(handler, {"token": TOKEN})
        elif scheme == "Bearer" and handler.headers.get("Authorization") != f"Bearer {TOKEN}":
            read_body(handler)
            challenge = f'Bearer realm="http://{registry.host}/token",service="x",scope="repository:attack/repo:push"'
            send_json(handler, {}, status=401, headers={"WWW-Authenticate": challenge})
        elif scheme == "Basic" and not str(handler.headers.get("Authorization", "")).startswith("Basic "):
            read_body(handler)
            send_json(handler, {}, status=401, headers={"WWW-Authenticate": 'Basic realm="registry"'})
        else:
            then(handler, registry)

    return answer


def read_body(handler: http.server.BaseHTTPRequestHandler) -> bytes:
    return handler.rfile.read(int(handler.headers.get("Content-Length") or 0))


def read_body_at(rate: float) -> Callable[[http.server.BaseHTTPRequestHandler], bytes]:
    """A ``read`` for :func:`forward`: the body taken ``PIECE`` bytes at a time, at ``rate`` bytes a second
    on average (an honest registry behind a slow link)."""

    def read(handler: http.server.BaseHTTPRequestHandler) -> bytes:
        left, pieces, start = int(handler.headers.get("Content-Length") or 0), [], time.monotonic()
        while left:
            pieces.append(handler.rfile.read(min(PIECE, left)))
            if not pieces[-1]:  # the client went away (a push cut at its deadline): nothing more will come
                break
            left -= len(pieces[-1])
            time.sleep(max(0.0, start + sum(map(len, pieces)) / rate - time.monotonic()))
        return b"".join(pieces)

    return read


def hold(handler: http.server.BaseHTTPRequestHandler, registry: HostileRegistry) -> None:
    """Never answer (until the registry stops)."""
    registry.stopping.wait()
    handler.close_connection = True


def read_slowly(handler: http.server.BaseHTTPRequestHandler, registry: HostileRegistry, every: float) -> None:
    """Take the request's body one byte every ``every`` seconds, and never answer."""
    left = int(handler.headers.get("Content-Length") or 0)
    while left and not registry.stopping.wait(every):
        left -= len(handler.rfile.read(1))
    hold(handler, registry)


def forward(
    handler: http.server.BaseHTTPRequestHandler,
    registry: HostileRegistry,
    upstream: str,
    read: Callable[[http.server.BaseHTTPRequestHandler], bytes] = read_body,
) -> None:
    """Pass the request to the registry at ``upstream`` and its answer back, its ``Location`` pointed here."""
    body = read(handler)
    headers = {k: v for k, v in handler.headers.items() if k.lower() not in HOP_BY_HOP}
    connection = http.client.HTTPConnection(upstream, timeout=BOUNDED_WAIT)
    try:
        connection.request(handler.command, handler.path, body=body or None, headers=headers)
        response = connection.getresponse()
        data = response.read()
    finally:
        connection.close()
    handler.send_response(response.status)
    for name, value in response.getheaders():
        if name.lower() not in HOP_BY_HOP:
            handler.send_header(name, value.replace(f"//{upstream}/", f"//{registry.host}/"))
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    if handler.command != "HEAD":
        handler.wfile.write(data)


def ends(call: Callable[[], Any]) -> Any:
    """What ``call`` returned or raised, failing the test if it is still running after ``BOUNDED_WAIT``."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(call())
        except Exception as exc:  # the outcome under test, whatever it is
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(BOUNDED_WAIT)
    assert outcome, f"still running after {BOUNDED_WAIT} s: the call does not end"
    return outcome[0]


def refused_code(outcome: Any) -> FailureCode:
    assert isinstance(outcome, RegistryError), f"not a refusal: {outcome!r}"
    return outcome.code


@dataclass
class HeldFront:
    """A front of a real registry that takes the first request and holds every one until ``released`` is set:
    a follower started on it is bound and still starting (``asked`` is set) for as long as a test needs."""

    front: HostileRegistry
    asked: threading.Event
    released: threading.Event

    def ref(self, repository: str) -> str:
        return self.front.ref(repository)


def holding_front(start: Callable[..., HostileRegistry], upstream: str) -> HeldFront:
    """:class:`HeldFront` of the registry at ``upstream`` (host:port), started with the ``hostile`` fixture's
    ``start``."""
    asked, released = threading.Event(), threading.Event()

    def answer(handler: http.server.BaseHTTPRequestHandler, front: HostileRegistry) -> None:
        asked.set()
        released.wait(BOUNDED_WAIT)
        forward(handler, front, upstream)

    return HeldFront(start(answer), asked, released)
