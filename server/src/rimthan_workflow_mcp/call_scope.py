"""What one ``tools/call`` verifies once: its checkpoint and its resumed run.

A checkpoint-bearing call verifies its token to route it, the engine verifies
it again to resume the run, and a ``continue_workflow`` result with a
migration offer resumes the run once more. Within one call the token, the
keyring and the arguments are the same objects every time, so the answers are
the same: :func:`one_call` scopes a memo to the call, and the first
verification's answer (never a refusal: those are raised again on every try)
serves the others. Outside a call (tests, the engine used directly) nothing is
remembered.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from rimthan_workflow_registry.run import CheckpointKeyring, IssuedCheckpoint, verify_checkpoint

T = TypeVar("T")
# key -> (the objects the key names by identity, kept alive so no id is reused; the answer)
_memo: ContextVar[dict[Hashable, tuple[tuple[object, ...], Any]] | None] = ContextVar("rimthan_call", default=None)


@contextmanager
def one_call() -> Iterator[None]:
    """Remember answers until the call ends (the server wraps each ``tools/call`` in it)."""
    token = _memo.set({})
    try:
        yield
    finally:
        _memo.reset(token)


def once(what: str, objects: tuple[object, ...], compute: Callable[[], T]) -> T:
    """``compute()`` at most once per call for the same ``objects`` (compared by identity)."""
    memo = _memo.get()
    if memo is None:
        return compute()
    key = (what, *(id(o) for o in objects))
    found = memo.get(key)
    if found is None:
        found = (objects, compute())
        memo[key] = found
    answer: T = found[1]
    return answer


def verified_checkpoint(keyring: CheckpointKeyring, token: str) -> IssuedCheckpoint:
    """``verify_checkpoint``, once per call for one keyring and one token."""
    return once("checkpoint", (keyring, token), lambda: verify_checkpoint(keyring, token))
