"""Where an HTTP ``tools/call`` runs: on the event loop when it is small and bounded, else in a worker thread.

A call in a worker thread costs more than the call: under 32 concurrent
clients the loop and the workers hand the interpreter lock back and forth
(about 6 context switches per call), and the server spent about 1 ms more CPU
per call than running the same calls on the loop (P6, measured per thread).
On the loop a call holds up every other request until it returns, so only a
call whose cost is bounded runs there. Its cost grows with its arguments (the
checkpoint token, artifacts, client state: checked, hashed, serialised) and
with the release files its step payload quotes when they are read from disk.

On the loop only when all of these hold, else a worker thread (any doubt ->
worker):

- the call came over HTTP with exactly one ``Content-Length`` header of at most
  :data:`ON_LOOP_MAX_BODY_BYTES` and no ``Transfer-Encoding`` (uvicorn reads
  exactly that many bytes: the arguments are no larger);
- the arguments hold at most :data:`ON_LOOP_MAX_VALUES` JSON values whose
  escapes add at most :data:`ON_LOOP_MAX_ESCAPES` characters: body size alone
  bounds a call's cost loosely, because client data the Python schema checks
  refuse costs per error, and a refusal quoting a value costs per escaped
  character (both measured below);
- every release the server holds quotes its step files from memory
  (:attr:`VerifiedRelease.quotes_from_memory`): a file read from disk is read
  and checked on each call.

Over stdio calls always run on the loop (one client, answered in order).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .provider import LoadedRelease, ReleaseProvider

# Measured (thread_time of call_tool per call, in process, load ~7): the recorded packaged run's calls have
# 2.5-42 KB bodies, at most 116 JSON values and 2,172 escaped characters (an artifact's newlines and quotes), and
# cost 0.5-0.9 ms each. The costliest bodies found are client data refused by the Python jsonschema checks, which
# enumerate every error: a start whose options are [{}, {}, ...] costs 15 ms at 1,000 items and 433 ms at 16,000
# (64 KiB); a refusal quoting 20,000 quotes costs 52 ms (rfc8785's escape callback per character). Within the three
# bounds the costliest found (440 refused options and 60 KB of refused text) costs ~10 ms. Counting walks the
# containers only, and the strings only of a body over 8 KiB (escapes take 2 bytes or more each).
ON_LOOP_MAX_BODY_BYTES = 64 * 1024
ON_LOOP_MAX_VALUES = 512  # JSON values in the arguments: objects, arrays, members' values, items, scalars
ON_LOOP_MAX_ESCAPES = 4096  # characters JSON adds escaping the arguments' strings and keys (\" adds 1, \u0001 5)


class CallPlacement:
    """Decides, per ``tools/call``, whether it runs on the event loop (see the module docstring)."""

    def __init__(self, provider: ReleaseProvider) -> None:
        self._provider = provider
        self._seen: tuple[Mapping[str, LoadedRelease] | None, bool] = (None, False)

    def on_loop(self, request: object, arguments: Mapping[str, Any]) -> bool:
        """True when the call (``request``: the HTTP request from the SDK's context) runs on the loop."""
        length = body_length(request)
        if length is None or length > ON_LOOP_MAX_BODY_BYTES:
            return False
        # each escape takes at least 2 body bytes: a shorter body cannot hold more than the bound
        escapes_possible = length > 2 * ON_LOOP_MAX_ESCAPES
        return small_arguments(arguments, count_escapes=escapes_possible) and self._releases_in_memory()

    def _releases_in_memory(self) -> bool:
        held = self._provider.held  # the same mapping object until a refresh changes what is held
        seen, answer = self._seen
        if seen is not held:
            answer = all(loaded.release.quotes_from_memory for loaded in held.values())
            self._seen = (held, answer)
        return answer


def body_length(request: object) -> int | None:
    """The body length an HTTP request declares in its one ``Content-Length`` (None: chunked, absent, several).

    ``request`` is what the SDK's HTTP transports put in the request context: a
    Starlette ``Request``, whose ``headers`` match names case-insensitively
    (read by duck typing, so this module imports no HTTP stack).
    """
    headers: Any = getattr(request, "headers", None)
    if headers is None or not hasattr(headers, "getlist") or "transfer-encoding" in headers:
        return None
    lengths = headers.getlist("content-length")
    if len(lengths) != 1 or not (lengths[0].isascii() and lengths[0].isdigit()):
        return None
    return int(lengths[0])


def small_arguments(arguments: Mapping[str, Any], *, count_escapes: bool = True) -> bool:
    """True when ``arguments`` hold at most :data:`ON_LOOP_MAX_VALUES` values and (``count_escapes``)
    :data:`ON_LOOP_MAX_ESCAPES` escaped characters; stops at the first container past the value bound.

    The strings' and keys' escapes are counted together, once, in C: JSON escapes each
    character on its own, so their concatenation adds exactly the escapes they add one by one.
    """
    values = 1
    pending: list[Any] = [arguments]
    texts: list[str] = []
    keep_text = texts.append if count_escapes else None
    while pending:
        container = pending.pop()
        values += len(container)
        if values > ON_LOOP_MAX_VALUES:
            return False
        is_object = isinstance(container, dict)
        for child in container.values() if is_object else container:
            if isinstance(child, (dict, list)):
                pending.append(child)
            elif keep_text is not None and isinstance(child, str):
                keep_text(child)
        if keep_text is not None and is_object:
            texts += container
    return keep_text is None or _escapes("".join(texts)) <= ON_LOOP_MAX_ESCAPES


# What JSON escapes (as the stdlib writes it without ensure_ascii): these in two characters (\" \\ \b \f \n \r \t),
# the other C0 controls in six (\u00XX). Every other character, non-ASCII and lone surrogates too, is written as is.
_SHORT_ESCAPED = b'"\\\b\f\n\r\t'
_LONG_ESCAPED = bytes(c for c in range(0x20) if c not in _SHORT_ESCAPED)


def _escapes(text: str) -> int:
    """The characters JSON adds escaping ``text``: counted over its UTF-8 bytes in C (every byte of a character
    past ASCII is 0x80 or above, so only ASCII matches), 3-4 times faster than escaping it (``encode_basestring``
    took 135 us on a 42 KB prepare call's strings)."""
    data = text.encode("utf-8", "surrogatepass")
    size = len(data)
    return (size - len(data.translate(None, _SHORT_ESCAPED))) + 5 * (size - len(data.translate(None, _LONG_ESCAPED)))
