"""The tokens this process issued, remembered for a while with what verifying them yields.

A gated step's calls (continue, prepare, submit) each verify the checkpoint
the call before it was given, and on one server that checkpoint is almost
always one this process has just issued. Verifying it in full parses the
whole payload again and checks every receipt column; this cache lets a
verification skip that part, and only that part, for the exact characters
this process issued:

* what is remembered is the result of the full path's payload step (parse and
  closed-shape check) run on the token's own payload at issue time, so the
  cache holds nothing the full path would not produce from the same bytes;
* a lookup happens only after the caller has checked the header rules, the
  key id (live, not retired) and the MAC with the current keyring, and the
  caller still makes every check that depends on the clock; a token answers
  from here only when it is character for character a token remembered here
  (the final segment finds the entry, the full comparison decides), so a
  token differing in one bit, or issued by another process, takes the full
  path;
* entries are never changed: callers share them read-only.

So a replica without the cache (another process of a fleet, a restart)
reaches the same verdict on every token; the protocol stays stateless.
Bounded by the total length of the remembered tokens, least recently used
first out; safe to share between threads (the server calls tools in worker
threads).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, Protocol, TypeVar


class _Issued(Protocol):
    @property
    def token(self) -> str: ...


T = TypeVar("T", bound=_Issued)

# The tokens a server keeps for their next verification, by total length. A run needs only its newest token
# here (the next call sends it back), so 4 MiB holds the newest checkpoint of ~120 runs at 200 gated steps
# (35 KB each), or of ~1,000 runs of a few dozen steps. An entry holds the token and its parsed checkpoint:
# measured 94 KB for a 35 KB token, so the cache stays under ~11 MiB of memory.
ISSUED_TOKEN_CHARS = 4 * 1024 * 1024


class IssuedTokens(Generic[T]):
    """A bounded, thread-safe LRU of issued items keyed by their exact token."""

    def __init__(self, max_chars: int = ISSUED_TOKEN_CHARS) -> None:
        self.max_chars = max_chars
        self._entries: OrderedDict[str, T] = OrderedDict()  # by the token's final segment (its MAC)
        self._chars = 0
        self._lock = threading.Lock()

    def remember(self, item: T) -> None:
        """Keep ``item`` (never changed afterwards) as the answer for its exact token."""
        token = item.token
        if len(token) > self.max_chars:
            return
        index = _index(token)
        with self._lock:
            old = self._entries.pop(index, None)
            if old is not None:
                self._chars -= len(old.token)
            self._entries[index] = item
            self._chars += len(token)
            while self._chars > self.max_chars:
                _, dropped = self._entries.popitem(last=False)
                self._chars -= len(dropped.token)

    def recall(self, token: str) -> T | None:
        """The item remembered for exactly ``token``, or ``None``."""
        index = _index(token)
        with self._lock:
            item = self._entries.get(index)
            if item is None or item.token != token:
                return None
            self._entries.move_to_end(index)
            return item

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._chars = 0

    @property
    def chars(self) -> int:
        """The total length of the remembered tokens (at most ``max_chars``)."""
        return self._chars

    def __len__(self) -> int:
        return len(self._entries)


def _index(token: str) -> str:
    """The token's final segment: its MAC, for a token of the compact form (the full token decides a hit)."""
    return token[token.rfind(".") + 1 :]
