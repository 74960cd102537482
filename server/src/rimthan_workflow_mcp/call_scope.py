"""What one ``tools/call`` works out once: its resumed run.

A ``continue_workflow`` result with a migration offer resumes the run twice
(the call itself, then the offer's departure): the state digest, every
confirmation and the workflow lookup again. Within one call the module and
the arguments are the same objects both times, so the answer is the same:
:func:`one_call` scopes a memo to the call, and the first answer (never a
refusal: those are raised again on every try) serves the others. Outside a
call (tests, the engine used directly) nothing is remembered. (The token's
own verification is remembered per thread by ``verify_checkpoint``.)
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

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
