"""Two server processes sharing checkpoint keys give the same verdict on every token.

Each process remembers the checkpoints it issued (so a verification can skip
re-parsing them); the other process has never seen them. Real HTTP server
processes and the SDK client: a run that hops between the two replicas on
every call completes exactly as a run on one replica, and every call of a
recorded run, replayed to the process that issued its checkpoint and to the
one that did not, gets the same answer - also with one bit of the checkpoint
changed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from rimthan_host.harness import client_caller
from rimthan_workflow_registry.run.token_wire import peek_claims
from rimthan_workflow_registry.run.tokens import CheckpointKeyring
from support.checked_client import CheckedClient
from support.servers import HttpServer, ServerWorld, build_world, harness, http_client_for, http_server, serve_args

Recorded = list[tuple[str, dict[str, Any]]]


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerWorld, HttpServer, HttpServer]]:
    root = tmp_path_factory.mktemp("replicas")
    world = build_world(root / "world")
    keys = root / "keys" / "checkpoint-keys.json"
    CheckpointKeyring.generate().save(keys)
    args = [
        serve_args(world, world.built["1.2.0"], state_dir=root / name, extra=["--checkpoint-keys", str(keys)])
        for name in ("state-a", "state-b")
    ]
    with http_server(args[0]) as first, http_server(args[1]) as second:
        yield world, first, second


async def _drive(clients: list[CheckedClient], project: Path) -> tuple[list[str], Recorded]:
    """A complete run (one validator fails once), each call to the next client in turn; statuses and calls."""
    recorded: Recorded = []
    callers = [client_caller(c) for c in clients]

    async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        recorded.append((name, arguments))
        return await callers[len(recorded) % len(callers)](name, arguments)

    run = harness(call, project, fail_once=frozenset({"decision-critic"}))
    final = await run.run(await run.start("research", initial_version="1.2.0"))
    assert final.status == "completed"
    return [status for _, status, _ in run.record.statuses], recorded


def _comparable(result: Any) -> Any:
    """A tool result without what depends on the second it was issued in (token bytes, ``iat``, issue times)."""
    if result.is_error:
        return "error", result.structured_content["error"]
    out = dict(result.structured_content)
    token = out.pop("checkpoint")
    out.pop("checkpoint_digest")
    claims = peek_claims(token) if token else None
    out["claims"] = {k: v for k, v in claims.items() if k != "iat"} if claims else None
    bundle = out.get("validation_bundle")
    if bundle:
        out["validation_bundle"] = {k: v for k, v in bundle.items() if k not in ("issued_at", "validation_token")}
    return "result", out


def _flipped(token: str, index: int) -> str:
    return token[:index] + chr(ord(token[index]) ^ 1) + token[index + 1 :]


def test_a_run_hopping_between_replicas_on_every_call_completes_as_on_one(
    replicas: tuple[ServerWorld, HttpServer, HttpServer], tmp_path: Path
) -> None:
    _, first, second = replicas

    async def go() -> tuple[list[str], list[str]]:
        async with http_client_for(first.url) as a, http_client_for(second.url) as b:
            hopping, _ = await _drive([a, b], tmp_path / "hop")
            alone, _ = await _drive([a], tmp_path / "alone")
            return hopping, alone

    hopping, alone = anyio.run(go)
    assert hopping == alone
    assert "validation_failed" in alone and alone[-1] == "completed"


def test_every_call_gets_the_same_answer_from_the_issuing_replica_and_the_other(
    replicas: tuple[ServerWorld, HttpServer, HttpServer], tmp_path: Path
) -> None:
    _, first, second = replicas

    async def go() -> tuple[list[Any], list[Any], int]:
        async with http_client_for(first.url) as a, http_client_for(second.url) as b:
            _, recorded = await _drive([a], tmp_path / "recorded")  # every checkpoint issued by the first
            calls = [(name, arguments) for name, arguments in recorded if "checkpoint" in arguments]
            for name, arguments in list(calls):
                token = arguments["checkpoint"]
                for at in (len(token) // 3, len(token) // 2, len(token) - 5):
                    calls.append((name, {**arguments, "checkpoint": _flipped(token, at)}))
            issuer = [_comparable(await a.call_tool(name, arguments)) for name, arguments in calls]
            other = [_comparable(await b.call_tool(name, arguments)) for name, arguments in calls]
            return issuer, other, len(recorded)

    issuer, other, count = anyio.run(go)
    assert issuer == other
    answers = [kind for kind, _ in issuer]
    assert answers.count("result") >= 10 and answers.count("error") == 3 * answers.count("result")
    assert {error["code"] for kind, error in issuer if kind == "error"} == {"checkpoint_invalid"}
