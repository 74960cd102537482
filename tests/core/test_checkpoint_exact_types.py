"""The issue-time shortcut's type check equals the per-node check it replaced, on claims the fast check accepts.

``_exact_types`` (one ``marshal`` pass and two list checks) must answer as
the per-node walk (exact ``dict`` with ``str`` keys, ``list``, ``str``,
``int``, ``None``) whenever :func:`accepted_fast` accepts the claims: nodes
of a checkpoint's claims are replaced by look-alikes (subclasses, tuples,
bools, floats, buffers) at random and both answers compared. The check an
issued checkpoint's claims take from their payload answers as the two together.
"""

from __future__ import annotations

import enum
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from rimthan_workflow_registry.run.checkpoint_claims import accepted_fast
from rimthan_workflow_registry.run.checkpoints import Checkpoint, HostBinding, _exact_types, _issued_accepted
from rimthan_workflow_registry.run.token_wire import claims_payload

DIGEST = "sha256:" + "ab" * 32


class _Str(str):
    pass


class _Int(int):
    pass


class _Enum(enum.IntEnum):
    ONE = 1


class _Dict(dict[Any, Any]):
    pass


class _List(list[Any]):
    pass


def _per_node(value: Any) -> bool:
    """The replaced check, node by node."""
    kind = type(value)
    if kind is dict:
        return all(type(k) is str and _per_node(v) for k, v in value.items())
    if kind is list:
        return all(map(_per_node, value))
    return kind is str or kind is int or value is None


def _claims(findings: bool) -> dict[str, Any]:
    host = HostBinding.of("claude-code", "1.0.0", ["fs.read", "fs.write"], ["subagent"])
    cp = Checkpoint(3, "wf", "1.2.0", "rel", DIGEST, "step", DIGEST, DIGEST, host=host, issued_at=17)
    claims = cp.to_claims()
    if findings:
        claims["findings"] = 2
    return claims


LOOK_ALIKES: list[Any] = [
    lambda v: _Str(v) if type(v) is str else v,
    lambda v: _Int(v) if type(v) is int else v,
    lambda v: _Enum.ONE if v == 1 and type(v) is int else v,
    lambda v: bool(v) if type(v) is int else v,
    lambda v: float(v) if type(v) is int else v,
    lambda v: tuple(v) if type(v) is list else v,
    lambda v: _List(v) if type(v) is list else v,
    lambda v: _Dict(v) if type(v) is dict else v,
    lambda v: {_Str(k): x for k, x in v.items()} if type(v) is dict else v,
    lambda v: bytearray(v.encode()) if type(v) is str else v,
    lambda v: None,
    lambda v: v,
]


def _paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [at]
    if isinstance(value, dict):
        for key, item in value.items():
            if not at and key in ("artifacts", "validators"):
                continue
            found += _paths(item, (*at, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*at, index))
    return found


def _replaced(value: Any, path: tuple[Any, ...], change: Any) -> Any:
    if not path:
        return change(value)
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {k: _replaced(v, rest, change) if k == head else v for k, v in value.items()}
    return [_replaced(v, rest, change) if i == head else v for i, v in enumerate(value)]


def _issued_check_agrees(claims: Any) -> None:
    """Issuing reads the shape from the claims' payload: the same verdict as the fast check and this type check."""
    if not isinstance(claims, dict):
        return
    try:
        payload = claims_payload(claims)
    except (TypeError, ValueError):
        return
    assert _issued_accepted(claims, payload) == (accepted_fast(claims) and _exact_types(claims))


@settings(max_examples=600, deadline=None)
@given(
    findings=st.booleans(), picks=st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from(LOOK_ALIKES)), max_size=3)
)
def test_exact_types_answers_as_the_per_node_check(findings: bool, picks: list[tuple[int, Any]]) -> None:
    claims = _claims(findings)
    for index, change in picks:
        paths = _paths(claims)
        path = paths[index % len(paths)]
        if path:
            claims = _replaced(claims, path, change)
    _issued_check_agrees(claims)
    if not (isinstance(claims, dict) and accepted_fast(claims)):
        return
    rest = {k: v for k, v in claims.items() if k not in ("artifacts", "validators")}
    assert _exact_types(claims) == _per_node(rest)


def test_every_look_alike_that_passes_the_fast_check_is_caught() -> None:
    base = _claims(False)
    caught = 0
    for path in _paths(base)[1:]:
        for change in LOOK_ALIKES:
            claims = _replaced(base, path, change)
            _issued_check_agrees(claims)
            if accepted_fast(claims):
                rest = {k: v for k, v in claims.items() if k not in ("artifacts", "validators")}
                assert _exact_types(claims) == _per_node(rest)
                caught += not _per_node(rest)
    assert caught > 0  # some look-alikes do pass the fast check: the type check is what refuses them
