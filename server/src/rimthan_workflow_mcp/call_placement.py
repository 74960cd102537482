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
- every release the server holds quotes its step files from memory
  (:attr:`VerifiedRelease.quotes_from_memory`): a file read from disk is read
  and checked on each call.

Over stdio calls always run on the loop (one client, answered in order).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .provider import LoadedRelease, ReleaseProvider

# Measured (thread_time of call_tool per call, in process): the recorded packaged run's calls have 2.6-7.6 KB
# bodies but two prepares of 42 KB, and cost 0.5-0.9 ms each. The costliest bodies found (a client state refused
# with one schema error per array item) cost 1 ms at 2 KiB, 15 ms at 4, 30-40 ms at 8, 112 ms at 16 and 433 ms at
# 64 KiB. 8 KiB keeps 9 of the run's 11 calls on the loop and bounds the loop's stall to tens of milliseconds.
ON_LOOP_MAX_BODY_BYTES = 8 * 1024


class CallPlacement:
    """Decides, per ``tools/call``, whether it runs on the event loop (see the module docstring)."""

    def __init__(self, provider: ReleaseProvider) -> None:
        self._provider = provider
        self._seen: tuple[Mapping[str, LoadedRelease] | None, bool] = (None, False)

    def on_loop(self, request: object) -> bool:
        """True when the call that ``request`` (the HTTP request, from the SDK's context) carries runs on the loop."""
        return small_body(request) and self._releases_in_memory()

    def _releases_in_memory(self) -> bool:
        held = self._provider.held  # the same mapping object until a refresh changes what is held
        seen, answer = self._seen
        if seen is not held:
            answer = all(loaded.release.quotes_from_memory for loaded in held.values())
            self._seen = (held, answer)
        return answer


def small_body(request: object) -> bool:
    """True for an HTTP request whose one ``Content-Length`` is at most :data:`ON_LOOP_MAX_BODY_BYTES`.

    ``request`` is what the SDK's HTTP transports put in the request context: a
    Starlette ``Request``, whose ``headers`` match names case-insensitively
    (read by duck typing, so this module imports no HTTP stack).
    """
    headers: Any = getattr(request, "headers", None)
    if headers is None or not hasattr(headers, "getlist") or "transfer-encoding" in headers:
        return False
    lengths = headers.getlist("content-length")
    if len(lengths) != 1 or not (lengths[0].isascii() and lengths[0].isdigit()):
        return False
    return int(lengths[0]) <= ON_LOOP_MAX_BODY_BYTES
