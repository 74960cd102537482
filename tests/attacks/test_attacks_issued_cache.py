"""The cache of checkpoints this process issued changes speed, never a verdict.

Against real tokens of a real run (research-decision@1.2.0, one validator
failing once, so a repair round is in it) over a real signed release:

* every call of the recorded run, replayed with the cache as the run left it
  and again with the cache emptied before each call (a replica that never
  issued the token), gives the identical result or refusal, and so does the
  same call with one bit of its checkpoint changed;
* a cached token with one changed bit anywhere is refused with the same code
  and message as without the cache;
* a cached token is refused once its key is retired, under another server's
  keys and under an impostor key with the same key id;
* a cached token issued "in the future" is refused (the clock is consulted on
  every verification), and claims the full path refuses are never cached.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import IntEnum
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rimthan_host.harness import RunResult, WorkflowHarness
from rimthan_workflow_mcp.workflow_engine import WorkflowEngineQueryModule
from rimthan_workflow_registry.errors import FailureCode, RegistryError
from rimthan_workflow_registry.run.checkpoints import (
    ISSUED,
    Checkpoint,
    IssuedCheckpoint,
    issue_checkpoint,
    verify_checkpoint,
)
from rimthan_workflow_registry.run.tokens import CheckpointKeyring
from support.engines import TOOLS, Engines, ExamplesScenario, TickingClock, make_engines, run

F = FailureCode
Verdict = tuple[str, Any]


@dataclass(frozen=True)
class Call:
    tool: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Recorded:
    engines: Engines
    calls: list[Call]
    checkpoints: list[str]  # every distinct checkpoint the run was given, in order


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    root = tmp_path_factory.mktemp("issued-cache")
    engines = make_engines(root, TickingClock())
    calls: list[Call] = []
    checkpoints: list[str] = []

    async def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        calls.append(Call(tool, copy.deepcopy(arguments)))
        result = await engines.call("1.2.0")(tool, arguments)
        token = result.get("checkpoint")
        if token and token not in checkpoints:
            checkpoints.append(token)
        return result

    project = root / "project"
    project.mkdir()
    harness = WorkflowHarness(
        call,
        ExamplesScenario("desk-research", frozenset({"evidence-auditor@1.0.0"})),
        project_dir=project,
        clock=engines.clock,
    )

    async def go() -> RunResult:
        return await harness.run(await harness.start("research", initial_version="1.2.0"))

    assert run(go()).status == "completed"
    assert "validation_failed" in [s for _, s, _ in harness.record.statuses]
    return Recorded(engines, calls, checkpoints)


def fresh_module(engines: Engines, clock: Callable[[], float]) -> WorkflowEngineQueryModule:
    """An engine over 1.2.0 with an equal keyring object of its own: it verifies every token it is given."""
    return WorkflowEngineQueryModule(engines.releases["1.2.0"], replace(engines.keyring), clock=clock)


def verdict(engines: Engines, call: Call, clock: Callable[[], float]) -> Verdict:
    try:
        return "result", getattr(fresh_module(engines, clock), TOOLS[call.tool])(call.arguments).to_json()
    except RegistryError as error:
        return "refused", (error.code, error.message)


def flipped(token: str, index: int, bit: int) -> str:
    return token[:index] + chr(ord(token[index]) ^ (1 << bit)) + token[index + 1 :]


def recalled(token: str, keyring: CheckpointKeyring) -> IssuedCheckpoint | None:
    """What the cache answers for ``token`` as signed with ``keyring``'s signing key."""
    return ISSUED.recall(token, keyring.signing_key)


def refusal(keyring: CheckpointKeyring, token: str) -> tuple[FailureCode, str]:
    with pytest.raises(RegistryError) as info:
        verify_checkpoint(replace(keyring), token)
    return info.value.code, info.value.message


# --------------------------------------------------------------------------- the recorded run


def test_every_call_of_a_recorded_run_gets_the_same_verdict_with_and_without_the_cache(recorded: Recorded) -> None:
    engines = recorded.engines
    clock = TickingClock(engines.clock.now + 10)  # one fixed issue time: equal claims give equal tokens
    calls = [c for c in recorded.calls if "checkpoint" in c.arguments]
    mutated = [
        Call(c.tool, {**c.arguments, "checkpoint": flipped(c.arguments["checkpoint"], at, at % 7)})
        for n, c in enumerate(calls)
        for at in (n % 40, len(c.arguments["checkpoint"]) // 2 + n, len(c.arguments["checkpoint"]) - 1 - n % 40)
    ]
    hits = [recalled(c.arguments["checkpoint"], engines.keyring) is not None for c in calls]
    assert all(hits), "the run's own checkpoints are in the cache of the process that issued them"
    cached = [verdict(engines, c, clock) for c in [*calls, *mutated]]
    uncached = []
    for call in [*calls, *mutated]:
        ISSUED.clear()
        uncached.append(verdict(engines, call, clock))
    assert cached == uncached
    assert [kind for kind, _ in cached[: len(calls)]] == ["result"] * len(calls)
    assert {kind for kind, _ in cached[len(calls) :]} == {"refused"}


# --------------------------------------------------------------------------- single tokens


def test_a_cached_token_with_one_changed_bit_is_refused_with_the_same_code(recorded: Recorded) -> None:
    keyring = recorded.engines.keyring
    token = recorded.checkpoints[-1]  # the run's last checkpoint: every receipt of the run
    forms = [flipped(token, at, bit) for at in range(len(token)) for bit in (at % 7, 7 - at % 7)]
    issued = issue_checkpoint(keyring, verify_checkpoint(replace(keyring), token).checkpoint)
    assert issued.token == token and recalled(token, keyring) is issued  # cached, as the engine left it
    with_cache = [refusal(keyring, form) for form in forms]
    ISSUED.clear()
    assert [refusal(keyring, form) for form in forms] == with_cache
    assert {code for code, _ in with_cache} <= {F.CHECKPOINT_INVALID, F.CHECKPOINT_KEY_UNKNOWN}


def test_a_cached_token_signed_with_a_since_retired_key_is_refused(recorded: Recorded) -> None:
    keyring = recorded.engines.keyring
    issued = issue_checkpoint(keyring, verify_checkpoint(replace(keyring), recorded.checkpoints[-1]).checkpoint)
    token = issued.token
    rotated = keyring.rotated()
    assert verify_checkpoint(rotated, token) is issued  # rotation alone: still verifies, from the cache
    retired = rotated.retiring(keyring.signing_key_id)
    code, message = refusal(retired, token)
    assert code is F.CHECKPOINT_KEY_UNKNOWN and "retired" in message
    assert recalled(token, keyring) is issued  # it was in the cache all along
    # nor does the cache answer for another server's keys, or for an impostor key under the same id
    assert refusal(CheckpointKeyring.generate(), token)[0] is F.CHECKPOINT_KEY_UNKNOWN
    impostor = CheckpointKeyring(signing_key_id=keyring.signing_key_id, keys={keyring.signing_key_id: b"k" * 32})
    assert refusal(impostor, token) == (
        F.CHECKPOINT_INVALID,
        "the checkpoint token does not verify (InvalidSignatureError)",
    )


def test_a_cached_token_issued_in_the_future_is_refused_on_every_verification(recorded: Recorded) -> None:
    keyring = recorded.engines.keyring
    checkpoint = verify_checkpoint(replace(keyring), recorded.checkpoints[-1]).checkpoint
    future = issue_checkpoint(keyring, replace(checkpoint, issued_at=checkpoint.issued_at + 10 * 365 * 86_400))
    assert recalled(future.token, keyring) is future
    expected = (F.CHECKPOINT_INVALID, "the checkpoint token does not verify (ImmatureSignatureError)")
    assert refusal(keyring, future.token) == expected
    ISSUED.clear()
    assert refusal(keyring, future.token) == expected


def test_claims_the_full_path_refuses_are_never_cached(recorded: Recorded) -> None:
    keyring = recorded.engines.keyring
    checkpoint = verify_checkpoint(replace(keyring), recorded.checkpoints[-1]).checkpoint
    for bad in (replace(checkpoint, step_id="s" * 129), replace(checkpoint, sequence=0)):
        issued = issue_checkpoint(keyring, bad)
        assert issued.checkpoint is bad and recalled(issued.token, keyring) is None
        code, message = refusal(keyring, issued.token)
        assert code is F.CHECKPOINT_INVALID and "malformed" in message


def typed(value: Any) -> Any:
    """``value`` with the exact type of every part spelled out (``==`` alone lets ``1 == True``, str subclasses...)."""
    if isinstance(value, dict):
        return {typed(k): typed(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value).__name__, [typed(v) for v in value]
    return type(value).__name__, value


def fields(checkpoint: Checkpoint) -> Any:
    tables = {"artifacts": checkpoint.artifacts.claims(), "validators": checkpoint.validators.claims()}
    return typed({**vars(checkpoint), **tables, "host": vars(checkpoint.host)})


def test_a_cached_checkpoint_is_what_the_full_path_computes(recorded: Recorded) -> None:
    keyring = recorded.engines.keyring
    for token in recorded.checkpoints:
        ISSUED.clear()
        full = verify_checkpoint(replace(keyring), token)
        issued = issue_checkpoint(keyring, full.checkpoint)
        assert issued.token == token and fields(issued.checkpoint) == fields(full.checkpoint)
        assert verify_checkpoint(replace(keyring), token) is issued


class Tagged(str):
    """A string of another type: its JSON is a plain string's."""


class Level(IntEnum):
    TWO = 2


def test_claims_of_other_types_are_cached_as_the_full_path_reads_them_back(recorded: Recorded) -> None:
    keyring = recorded.engines.keyring
    checkpoint = verify_checkpoint(replace(keyring), recorded.checkpoints[-1]).checkpoint
    host = replace(
        checkpoint.host, harness=Tagged(checkpoint.host.harness), capabilities=tuple(checkpoint.host.capabilities)
    )
    for odd in (
        replace(checkpoint, step_id=Tagged(checkpoint.step_id)),
        replace(checkpoint, sequence=Level.TWO),
        replace(checkpoint, host=host),
        replace(checkpoint, failed_findings=Level.TWO),
    ):
        issued = issue_checkpoint(keyring, odd)
        ISSUED.clear()
        full = verify_checkpoint(replace(keyring), issued.token)
        assert fields(issued.checkpoint) == fields(full.checkpoint) != fields(odd)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    texts=st.lists(st.text(min_size=0, max_size=140), min_size=4, max_size=4),
    capabilities=st.lists(st.text(max_size=20), max_size=4),
    numbers=st.lists(st.integers(min_value=-3, max_value=2**70), min_size=2, max_size=2),
)
def test_the_cached_form_of_any_claims_is_what_the_full_path_reads_from_their_payload(
    recorded: Recorded, texts: list[str], capabilities: list[str], numbers: list[int]
) -> None:
    """Any strings (dots, quotes, escapes, surrogates, over-long), any integers: cached only as parsed back."""
    keyring = recorded.engines.keyring
    checkpoint = verify_checkpoint(replace(keyring), recorded.checkpoints[-1]).checkpoint
    host = replace(checkpoint.host, harness=texts[2], capabilities=tuple(capabilities))
    odd = replace(
        checkpoint, step_id=texts[0], workflow_id=texts[1], release_id=texts[3], sequence=numbers[0], host=host
    )
    odd = replace(odd, failed_findings=numbers[1])
    issued = issue_checkpoint(keyring, odd)
    cached = recalled(issued.token, keyring)
    ISSUED.clear()
    try:
        full = verify_checkpoint(replace(keyring), issued.token)
    except RegistryError as error:
        assert cached is None and error.code is F.CHECKPOINT_INVALID
        return
    assert cached is issued and fields(cached.checkpoint) == fields(full.checkpoint)
