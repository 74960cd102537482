"""What a registry can make a puller or a pusher read or wait for: every answer bounded in bytes, time and pages.

Signatures protect a release's content, not the availability of whoever
pulls or pushes it. A registry that is dishonest (compromised, or a man in
the middle on plain HTTP) could answer with an endless body, drip one byte
at a time under requests' per-read timeout, or page its tag list forever;
the follower would then hold its lock, and every later refresh would wait
on it; a push would never end.

:func:`bound_session` puts every request the oras client makes (registry
calls, token requests, uploads and their answers) under these bounds, none
of which an honest registry comes near:

``REQUEST_TIMEOUT``
    requests' own timeout: the longest wait to connect, for the next byte,
    or to hand the socket one ``CHUNK`` of a request's body.
``REQUEST_DEADLINE``
    a request's answer: a watchdog cuts the connection if the status line and
    headers are not in by then, and the body is read with ``read1`` (each
    read returns what has arrived), so a drip is cut at the deadline plus at
    most one ``REQUEST_TIMEOUT``. Two minutes carry a 16 MiB blob at 140 KB/s.
    For a request with a body (an upload), it starts once the body is sent.
a request's body
    sent in pieces of at most ``CHUNK`` bytes (:class:`_Body`; urllib3 asks
    for 16 KiB at a time; given bytes, it sent them in one ``sendall``, which
    the socket timeout bounds as a whole, so a 1 MiB blob had to be taken in
    30 s: four uploads sharing a 150 KB/s uplink take 28 s), each piece within
    ``REQUEST_TIMEOUT``, the whole by the enclosing deadline (a push's), or by
    ``REQUEST_DEADLINE`` outside one.
``MAX_RESPONSE_BYTES``
    a body the client reads whole (a tag page, a manifest, a token, an error):
    read here, streamed, and refused past 4 MiB (the OCI manifest limit). A
    blob the caller streams is instead bounded by the size its manifest
    declared (:func:`body_chunks`).
``MAX_REDIRECTS``
    requests follows 30; a registry redirects a blob once, to its storage.
    requests drops the ``Authorization`` header on a redirect to another
    origin (scheme, host, port), as docker and oras do; a redirect of an
    upload (any request but ``GET`` and ``HEAD``) to another origin is
    refused, never followed: the body would go there (:func:`_upload_stays`).

:func:`registry_deadline` sets one deadline over many requests (a pull's
fetches and downloads: ``PULL_DEADLINE``; the follower's sync, its pulls
included: ``SYNC_DEADLINE``; a push's check of the tag, uploads and manifest:
``PUSH_DEADLINE``; an inner deadline never outlasts an outer one); no request
starts after it, and none runs past it. Ten minutes carry the largest release
(``MAX_TOTAL_BYTES``, 256 MiB) down at 450 KB/s; a push, often on a slower
uplink, gets that release up at ``MIN_PUSH_RATE`` (150 KB/s, about the rate
``REQUEST_DEADLINE`` assumes for one blob): about 30 minutes. The deadline
is a context variable: work handed to other threads must carry it there
(``contextvars.copy_context().run``). A stop asked of the work (:mod:`.oci_stop`: a server's
``SIGTERM``) ends it sooner, at once.

:func:`upload_location` keeps an upload on the registry: oras sends a blob,
with the registry's token (or, asked again, its credentials), to whatever
``Location`` the registry names for the upload session; one on another host
or scheme is refused, and an answer with none is said by its status alone.
:func:`challenged_by_registry` keeps the credentials there: only the
registry's own origin is answered a challenge, not a host a redirect led to.

:func:`list_tags` pages the tag list itself, through the same oras session
and auth: oras's ``get_tags`` follows ``Link: rel="next"`` with no bound, to
any host, with the registry's token in the request (oras puts it there
itself; requests' stripping of credentials covers redirects only). Here at
most ``MAX_TAG_PAGES`` pages, ``MAX_TAGS`` tags and ``MAX_TAG_LIST_BYTES``
bytes (long tags would otherwise fill memory within the other two), each page
on the registry's own host and scheme. A breach raises
:class:`RegistryBoundExceeded`, which the caller's ``guarded`` turns into
``oci_registry_error``.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import requests
import urllib3

from ..errors import quoted
from .oci_artifact import MAX_OCI_MANIFEST_BYTES
from .oci_limits import MAX_TOTAL_BYTES
from .oci_stop import Stopped, check_stop, cut, watch_socket

REQUEST_TIMEOUT = 30.0
REQUEST_DEADLINE = 120.0
PULL_DEADLINE = 600.0
SYNC_DEADLINE = 600.0
MIN_PUSH_RATE = 150_000  # bytes per second
PUSH_DEADLINE = MAX_TOTAL_BYTES / MIN_PUSH_RATE  # 1790 s
MAX_RESPONSE_BYTES = MAX_OCI_MANIFEST_BYTES
MAX_REDIRECTS = 5
MAX_TAG_PAGES = 1000
MAX_TAGS = 100_000
MAX_TAG_LIST_BYTES = 32 * 1024 * 1024  # 100,000 tags of 128 characters, quoted, with room to spare
CHUNK = 64 * 1024
ANSWER_LATE = "the registry's answer took longer than the deadline; stopped"
BODY_LATE = "sending the body to the registry took longer than the deadline; stopped"

Origin = tuple[str, str | None, int | None]  # scheme, host, port: where a request goes

_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar("registry_deadline", default=None)
_current_request: contextvars.ContextVar[_Request | None] = contextvars.ContextVar("current_request", default=None)


class RegistryBoundExceeded(requests.RequestException):
    """A registry answer broke a bound: too large, too slow, too many pages, or a page on another host."""


class NoUploadSession(requests.RequestException):
    """The registry's answer to starting an upload named no session to upload to."""


class ResponseTooLarge(RegistryBoundExceeded):
    """A body the client reads whole held more than ``MAX_RESPONSE_BYTES``."""


@contextlib.contextmanager
def registry_deadline(seconds: float) -> Iterator[None]:
    """Every request inside ends by ``seconds`` from now (or sooner: its own deadline, an enclosing one)."""
    outer = _deadline.get()
    ends = time.monotonic() + seconds
    token = _deadline.set(ends if outer is None else min(outer, ends))
    try:
        yield
    finally:
        _deadline.reset(token)


def request_deadline() -> float:
    """When a request starting now must be done: its own deadline, or the enclosing one if sooner."""
    check_stop()  # none starts once a stop was asked (oci_stop)
    outer = _deadline.get()
    if outer is not None and time.monotonic() >= outer:
        raise RegistryBoundExceeded("the registry's answers took longer than the deadline; stopped")
    return _answer_deadline()


def _answer_deadline() -> float:
    own = time.monotonic() + REQUEST_DEADLINE
    outer = _deadline.get()
    return own if outer is None else min(own, outer)


@dataclass
class _Request:
    """One request's deadline (``ends``): its body's while the body is sent, then its answer's."""

    ends: float
    late: str = ANSWER_LATE

    def check(self) -> None:
        if time.monotonic() >= self.ends:
            raise RegistryBoundExceeded(self.late)


class _Body:
    """A request's body as a stream requests can rewind (for a redirect), read ``CHUNK`` bytes at a time.

    urllib3 hands each read to the socket in its own ``sendall``, so each
    piece, not the whole body, must go within ``REQUEST_TIMEOUT``. Before each
    piece, the body must still be within its deadline (the enclosing one, or
    ``REQUEST_DEADLINE`` outside one); once it is all read, the request's
    answer gets its own ``REQUEST_DEADLINE`` from then.
    """

    def __init__(self, data: bytes, request: _Request) -> None:
        self._data, self._at, self._request = memoryview(data), 0, request
        outer = _deadline.get()
        self._ends = outer if outer is not None else time.monotonic() + REQUEST_DEADLINE

    def __len__(self) -> int:
        return len(self._data)

    def __iter__(self) -> Iterator[bytes]:  # requests treats an iterable with ``tell`` as a stream it can rewind
        return iter(functools.partial(self.read, CHUNK), b"")

    def tell(self) -> int:
        return self._at

    def seek(self, offset: int, whence: int = 0) -> int:
        self._at = max(0, offset + (0, self._at, len(self._data))[whence])
        return self._at

    def read(self, size: int = -1) -> bytes:
        if self._at >= len(self._data):
            self._request.ends, self._request.late = _answer_deadline(), ANSWER_LATE
            return b""
        self._request.ends, self._request.late = self._ends, BODY_LATE
        self._request.check()
        piece = self._data[self._at : self._at + (CHUNK if size < 0 else min(size, CHUNK))]
        self._at += len(piece)
        return bytes(piece)


def _watch_headers(sock: socket.socket | None, read: Callable[[], urllib3.BaseHTTPResponse]) -> Any:
    """``read()`` the status line and headers, cutting the connection if they are not in by the deadline.

    A registry could drip its headers a byte at a time (100 of 64 KiB each),
    each read inside ``REQUEST_TIMEOUT``: only a watchdog ends that.
    """
    watch_socket(sock)  # a stop (oci_stop) cuts it, the body's reads included
    request = _current_request.get()
    if request is None or sock is None:
        return read()
    watchdog = threading.Timer(max(0.0, request.ends - time.monotonic()), cut, (sock,))
    watchdog.daemon = True
    watchdog.start()
    try:
        return read()
    finally:
        watchdog.cancel()


class _HTTPConnection(urllib3.connection.HTTPConnection):
    def getresponse(self) -> Any:
        return _watch_headers(self.sock, super().getresponse)


class _HTTPSConnection(urllib3.connection.HTTPSConnection):
    def getresponse(self) -> Any:
        return _watch_headers(self.sock, super().getresponse)


class _HTTPPool(urllib3.HTTPConnectionPool):
    ConnectionCls = _HTTPConnection


class _HTTPSPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection


def bound_session(session: Any) -> None:
    """Put every request ``session`` makes under the bounds (see the module docstring)."""
    session.max_redirects = MAX_REDIRECTS
    session.request = functools.partial(_bounded_request, session.request)
    session.hooks["response"].append(_upload_stays)
    for adapter in session.adapters.values():
        adapter.poolmanager.pool_classes_by_scheme = {"http": _HTTPPool, "https": _HTTPSPool}


def _bounded_request(
    send: Callable[..., requests.Response],
    method: str,
    url: str,
    *,
    stream: bool = False,
    data: Any = None,
    **kwargs: Any,
) -> requests.Response:
    request = _Request(request_deadline())
    kwargs.pop("timeout", None)
    if isinstance(data, bytes) and data:
        data = _Body(data, request)
    token = _current_request.set(request)
    try:
        response = send(method, url, stream=True, timeout=REQUEST_TIMEOUT, data=data, **kwargs)
    except requests.RequestException:
        check_stop()  # a stop cut the connection: not the registry's failure
        request.check()  # the watchdog cut it, or the body ran past its deadline: say so
        raise
    finally:
        _current_request.reset(token)
    try:
        check_stop()
        request.check()  # the watchdog may have cut the headers short: what arrived is not an answer
    except (RegistryBoundExceeded, Stopped):
        response.close()
        raise
    if not stream:
        try:
            body = b"".join(body_chunks(response, MAX_RESPONSE_BYTES, request.ends, ResponseTooLarge))
        except BaseException:
            response.close()  # mid-body: the connection is closed, never reused
            raise
        response._content, response._content_consumed = body, True  # what requests' .content would have read
        response.close()  # read whole: the connection goes back to the pool
    return response


def body_chunks(
    response: requests.Response,
    limit: int,
    deadline: float,
    too_large: type[RegistryBoundExceeded] = RegistryBoundExceeded,
) -> Iterator[bytes]:
    """The body as it arrives, refused past ``limit`` bytes or past ``deadline`` (a drip is cut there); a stop
    (``oci_stop``) ends it between chunks, and one that cut the connection mid-read is said as the stop."""
    read = 0
    while chunk := _next_chunk(response):
        check_stop()
        read += len(chunk)
        if read > limit:
            raise too_large(f"the registry sent more than {limit} bytes in one answer; stopped")
        _check_time(deadline)
        yield chunk


def _next_chunk(response: requests.Response) -> bytes:
    try:
        chunk: bytes = response.raw.read1(CHUNK, decode_content=True)
    except Exception:
        check_stop()
        raise
    if not chunk:
        check_stop()  # a cut connection reads as the end of the body
    return chunk


def _check_time(deadline: float) -> None:
    if time.monotonic() >= deadline:
        raise RegistryBoundExceeded(ANSWER_LATE)


def _upload_stays(response: requests.Response, *args: Any, **kwargs: Any) -> requests.Response:
    """A response hook: a redirect of an upload to another origin is refused before it is followed.

    requests would send the body again, to wherever the registry pointed
    (only the ``Authorization`` header is dropped there). The distribution
    spec redirects blob downloads to storage, never uploads; the upload
    session itself must be on the registry (:func:`upload_location`).
    """
    method = response.request.method or ""
    if not response.is_redirect or method in ("GET", "HEAD"):
        return response
    target = urllib.parse.urljoin(response.url, response.headers.get("location", ""))
    if origin(target) != origin(response.url):
        response.close()
        raise RegistryBoundExceeded(
            f"the registry redirected an upload ({method}) to another host; not followed ({quoted(target)})"
        )
    return response


def challenged_by_registry(home: Origin | None, response: requests.Response) -> None:
    """Refuse an answer asking for credentials (401, 403) from anywhere but the registry's origin ``home``.

    A redirect of a blob download leads to storage, often on another host:
    oras answered that host's challenge too, sending the credentials to the
    token service it named (or, for Basic, calling the registry's refusal).
    """
    if response.status_code in (401, 403) and origin(response.url) != home:
        response.close()
        raise RegistryBoundExceeded(
            "a host the registry redirected to asks for credentials; the registry's are not sent there "
            f"({quoted(response.url)})"
        )


def origin(url: str) -> Origin:
    """Scheme, host and port (the scheme's default if none is written): where a request goes."""
    parts = urllib.parse.urlsplit(url)
    try:
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme.lower())
    except ValueError:  # a port that is not a number: no origin matches it
        return ("", None, None)
    return parts.scheme.lower(), (parts.hostname or "").lower(), port


def upload_location(registry: Any, response: requests.Response, container: Any) -> str:
    """The upload session's URL (oras's ``_get_location``), refused unless it is on the registry's own origin.

    Without one, oras raised its own error quoting the registry's whole answer
    (up to ``MAX_RESPONSE_BYTES``) into the refusal's one line: the status is said instead.
    """
    location = str(response.headers.get("location", ""))
    if not location:
        raise NoUploadSession(f"the registry answered HTTP {response.status_code} and no upload session (Location)")
    registry_url = f"{registry.prefix}://{container.registry}"
    url = urllib.parse.urljoin(registry_url + "/", location)
    if origin(url) != origin(registry_url):
        raise RegistryBoundExceeded(f"the registry's upload session is on another host; not followed ({quoted(url)})")
    return url


def list_tags(registry: Any, container: Any) -> list[Any]:
    """The repository's tag list, every page, within ``MAX_TAG_PAGES`` pages and ``MAX_TAGS`` tags."""
    url = f"{registry.prefix}://{container.tags_url()}"
    home = origin(url)
    tags: list[Any] = []
    read = 0
    for _ in range(MAX_TAG_PAGES):
        response = registry.do_request(url, "GET", headers=dict(registry.headers))
        registry._check_200_response(response)
        read += len(response.content)
        if read > MAX_TAG_LIST_BYTES:
            raise RegistryBoundExceeded(f"the registry's tag list runs past {MAX_TAG_LIST_BYTES} bytes")
        page = response.json()
        found = page.get("tags") if isinstance(page, dict) else False
        if not isinstance(found, list | None):
            raise RegistryBoundExceeded("the registry's tag page is not an object with a list of tags")
        tags += found or []
        if len(tags) > MAX_TAGS:
            raise RegistryBoundExceeded(f"the registry lists more than {MAX_TAGS} tags")
        link = response.links.get("next", {}).get("url")
        if not found or not link:
            return tags
        url = urllib.parse.urljoin(url, link)
        if origin(url) != home:
            raise RegistryBoundExceeded(
                f"the registry's next tag page is on another host; not followed ({quoted(url)})"
            )
    raise RegistryBoundExceeded(f"the registry's tag list runs past {MAX_TAG_PAGES} pages")
