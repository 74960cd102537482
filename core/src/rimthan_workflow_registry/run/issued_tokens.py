"""The tokens this process issued, remembered for a while with what verifying them yields.

A gated step's calls (continue, prepare, submit) each verify the checkpoint
the call before it was given, and on one server that checkpoint is almost
always one this process has just issued. Verifying it in full computes the
MAC over the whole token, parses the whole payload again and checks every
receipt column; this cache lets a verification skip those parts, and only
those, for the exact characters this process issued with the exact key:

* what is remembered is the result of the full path's payload step (parse and
  closed-shape check) run on the token's own payload at issue time, so the
  cache holds nothing the full path would not produce from the same bytes;
* a lookup happens only after the caller has checked the header rules and
  the key id (live, not retired) with the current keyring, and it gives the
  live key that id names; a token answers from here only when it is
  character for character a token remembered here (the final segment finds
  the entry, the full comparison decides) and that key is the very key it
  was signed with. Its MAC is then the one this process computed over these
  characters with this key, so checking it again would give the same answer:
  it is not computed again. A token differing in one bit, issued by another
  process, or signed with a key the keyring no longer holds under that id
  takes the full path, MAC first;
* the caller still makes every check that depends on the clock;
* entries are never changed: callers share them read-only.

So a replica without the cache (another process of a fleet, a restart)
reaches the same verdict on every token; the protocol stays stateless.
Bounded by the total length of the remembered tokens, least recently used
first out; safe to share between threads (the server calls tools in worker
threads). An entry holds a reference to its signing key, which the keyring
holds anyway.
"""

from __future__ import annotations

import hmac
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
        # by the token's final segment (its MAC): the item and the key that signed it
        self._entries: OrderedDict[str, tuple[T, bytes]] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def remember(self, item: T, key: bytes) -> None:
        """Keep ``item`` (never changed afterwards) as the answer for its exact token, signed with ``key``."""
        token = item.token
        if len(token) > self.max_chars:
            return
        index = _index(token)
        with self._lock:
            old = self._entries.pop(index, None)
            if old is not None:
                self._chars -= len(old[0].token)
            while self._chars + len(token) > self.max_chars:  # room first: the total never passes the bound,
                _, (dropped, _key) = self._entries.popitem(last=False)  # not even for a reader between two lines
                self._chars -= len(dropped.token)
            self._entries[index] = (item, key)
            self._chars += len(token)

    def recall(self, token: str, key: bytes) -> T | None:
        """The item remembered for exactly ``token`` signed with exactly ``key``, or ``None``."""
        index = _index(token)
        with self._lock:
            entry = self._entries.get(index)
            if entry is None or entry[0].token != token or not hmac.compare_digest(entry[1], key):
                return None
            self._entries.move_to_end(index)
            return entry[0]

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
