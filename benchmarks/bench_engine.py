"""P4: does a call cost more late in a long run? And how fast do checkpoint tokens grow?

A run of the synthetic long workflow (setup + N gated steps, each with one note
and its own validator) is driven to completion in-process: the scripted
harness from ``rimthan_host.harness`` talks straight to a
``WorkflowEngineQueryModule`` over the verified release, and every call is
recorded. Because the engine is stateless, the recorded calls at step 2 and
at step N can then be replayed as often as we like: the figure is the median
cost of one gated step's calls (continue, prepare, submit) at step N over the
same at step 2. The replays alternate (step 2's continue, step N's continue,
step 2's prepare, ...), so load on the machine falls on both sides alike, and
consecutive calls go to two engine modules whose keyrings are equal but
distinct objects: no call reuses the verification of the call before it, as
on a server, where each call's checkpoint is verified once (the routing
verifies it, the engine reuses that).

Every replayed checkpoint was issued by this process (during the run), as on
a server that serves a run alone, so its verification (header, key, MAC)
takes the claims from the cache of issued checkpoints (``run/issued_tokens``);
the whole 200-step run fits in that cache, so both sides do. The details also
time the same calls with that cache emptied before each call: what a replica
that did not issue the token (another process of a fleet, a restart) pays.

Token growth: the checkpoint token length after each step against the number
of receipts it carries (one artifact and one validator receipt per step);
the slope is bytes per receipt. Each receipt kind is also measured alone by
re-issuing the final checkpoint with one more receipt of that kind.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import secrets
import shutil
import statistics
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rimthan_host import Question
from rimthan_host.harness import Review, RunResult, WorkflowHarness
from rimthan_packager.build import build_release
from rimthan_packager.signing import load_signing_key
from rimthan_workflow_mcp.results import ToolResult
from rimthan_workflow_mcp.tool_contracts import (
    CONTINUE_WORKFLOW,
    PREPARE_STEP_VALIDATION,
    SUBMIT_STEP_VALIDATION,
    workflow_engine_tool_contracts,
)
from rimthan_workflow_mcp.workflow_engine import WorkflowEngineQueryModule
from rimthan_workflow_registry.release import load_trust, verify_release
from rimthan_workflow_registry.run import (
    ArtifactReceipt,
    CheckpointKeyring,
    ValidatorReceipt,
    issue_checkpoint,
    peek_claims,
    verify_checkpoint,
)
from rimthan_workflow_registry.run.checkpoints import ISSUED
from rimthan_workflow_registry.run.receipts import ArtifactTable, ValidatorTable
from rimthan_workflow_registry.run.token_wire import claims_payload

from .fixtures import BenchKeys
from .profiling import profile_call
from .report import Figure
from .synthetic import LONG_WORKFLOW, LONG_WORKFLOW_VERSION, LongSpec, long_initial_state, note_id, step_id

TARGET_RATIO = 1.5
TARGET_BYTES_PER_RECEIPT = 150.0
# Tool name -> implementing method, as the contracts declare it (what the server's dispatch uses).
METHODS = {c.name: c.method for c in workflow_engine_tool_contracts()}
REPLAYED = (CONTINUE_WORKFLOW, PREPARE_STEP_VALIDATION, SUBMIT_STEP_VALIDATION)


class LongScenario:
    """The harness :class:`Scenario` for the long workflow: one short note per step, every review passes."""

    def initial_state(self, workflow_version: str, *, workflow: str = "") -> dict[str, Any]:
        return long_initial_state()

    def updates(self, step_id: str, workflow_version: str, values: Mapping[str, Any]) -> dict[str, Any]:
        return {}

    def answer(self, question: Question, workflow_version: str) -> Any:
        raise RuntimeError(f"the long workflow asks no questions (got {question.field!r})")

    def migration_state(self, values: Mapping[str, Any], target_version: str, *, workflow: str = "") -> dict[str, Any]:
        raise RuntimeError("the long workflow is never migrated")

    def author(self, ctx: Any) -> str:
        return f"# {ctx.output.id}\n\nSynthetic note written at {ctx.step_id}.\n"

    def review(self, ctx: Any) -> Review:
        return Review("pass")


@dataclass(frozen=True)
class Call:
    tool: str
    step: str | None
    arguments: dict[str, Any]
    result: dict[str, Any]


def _step_of(arguments: Mapping[str, Any]) -> str | None:
    claims = peek_claims(arguments["checkpoint"]) if "checkpoint" in arguments else None
    return claims.get("step") if claims else None


def drive(module: WorkflowEngineQueryModule, project: Path, steps: int) -> list[Call]:
    """One complete run of the long workflow, every call recorded."""
    calls: list[Call] = []

    async def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        typed: ToolResult = getattr(module, METHODS[tool])(arguments)
        result = typed.to_json()
        calls.append(Call(tool, _step_of(arguments), arguments, result))
        return result

    async def go() -> RunResult:
        harness = WorkflowHarness(call, LongScenario(), project_dir=project)
        return await harness.run(await harness.start(LONG_WORKFLOW, LONG_WORKFLOW_VERSION), max_calls=4 * steps + 20)

    final = asyncio.run(go())
    if final.status != "completed":
        raise RuntimeError(f"the long run did not complete: {final.status}")
    return calls


def _replays(calls: list[Call], step: str) -> dict[str, dict[str, Any]]:
    """Arguments for continue, prepare and submit at ``step`` (continue: the checkpoint prepare got)."""
    chosen = {c.tool: c.arguments for c in calls if c.step == step and c.tool in REPLAYED}
    prepare = chosen[PREPARE_STEP_VALIDATION]
    chosen.setdefault(
        CONTINUE_WORKFLOW,
        {"checkpoint": prepare["checkpoint"], "confirmed_state": prepare["confirmed_state"]},
    )
    return {tool: chosen[tool] for tool in REPLAYED}


def _modules(module: WorkflowEngineQueryModule) -> tuple[WorkflowEngineQueryModule, WorkflowEngineQueryModule]:
    """``module`` and a twin over the same release with an equal keyring object of its own.

    A checkpoint verified by one keyring object is remembered for the next
    verification by that same object; alternating the two makes every
    measured call verify its token, as each new call on a server does.
    """
    return module, WorkflowEngineQueryModule(module.release, replace(module.keyring))


def _time_alternating(
    module: WorkflowEngineQueryModule, sides: dict[str, dict[str, dict[str, Any]]], reps: int, *, issued: bool = True
) -> dict[str, dict[str, float]]:
    """Median seconds of each replayed call, per side (step 2, step N), the sides' calls alternating.

    ``issued=False`` empties the cache of issued checkpoints before each call (untimed): the
    recorded checkpoints are then out of it for good, so that timing comes last.
    """
    twins = _modules(module)
    order = [
        (side, tool, arguments) for tool in REPLAYED for side, calls in sides.items() for arguments in [calls[tool]]
    ]
    values: dict[tuple[str, str], list[float]] = {(side, tool): [] for side, tool, _ in order}
    for rep in range(reps + 2):  # the first two rounds warm up
        for index, (side, tool, arguments) in enumerate(order):
            method = getattr(twins[index % 2], METHODS[tool])
            if not issued:
                ISSUED.clear()
            started = time.perf_counter()
            method(arguments)
            if rep >= 2:
                values[side, tool].append(time.perf_counter() - started)
    return {side: {tool: statistics.median(values[side, tool]) for tool in REPLAYED} for side in sides}


def _token_work(token: str, key: bytes) -> None:
    """What a gated step's calls must do with their checkpoint's bytes, in C and nothing else.

    Three verifications (split, the canonical re-encoding check of the header
    and signature, HMAC-SHA256 over the exact characters, then ``json.loads``
    of the unencoded payload), one issue of the next token (``json.dumps``,
    the period escape, HMAC-SHA256) and two SHA-256 digests of it.
    """
    claims: Any = None
    for _ in range(3):
        header, payload, signature = token.split(".")
        for part in (header, signature):
            if base64.urlsafe_b64encode(_unb64(part)).rstrip(b"=").decode("ascii") != part:
                raise RuntimeError("a recorded token is not canonical base64url")
        mac = hmac.new(key, f"{header}.{payload}".encode("ascii"), hashlib.sha256).digest()
        hmac.compare_digest(mac, _unb64(signature))
        claims = json.loads(payload)
    body = claims_payload(claims)
    hmac.new(key, body, hashlib.sha256).digest()
    hashlib.sha256(token.encode("ascii")).digest()
    hashlib.sha256(body).digest()


def _unb64(segment: str) -> bytes:
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))


def token_floor(early_token: str, late_token: str, reps: int) -> dict[str, float]:
    """Median seconds of the token work alone at step 2 and at step N, alternating (the floor of the growth)."""
    key = secrets.token_bytes(32)
    values: dict[str, list[float]] = {"early_s": [], "late_s": []}
    for rep in range(reps + 2):
        for side, token in (("early_s", early_token), ("late_s", late_token)):
            started = time.perf_counter()
            _token_work(token, key)
            if rep >= 2:
                values[side].append(time.perf_counter() - started)
    return {side: statistics.median(times) for side, times in values.items()}


def token_growth(calls: list[Call]) -> dict[str, Any]:
    """Checkpoint length against receipts carried, over every distinct checkpoint of the run."""
    points = {}
    for call in calls:
        token = call.result.get("checkpoint")
        if token and (claims := peek_claims(token)):
            points[token] = (len(claims["artifacts"]["names"]) + len(claims["validators"]["names"]), len(token))
    receipts, lengths = zip(*sorted(points.values()), strict=True)
    slope, intercept = statistics.linear_regression(receipts, lengths)
    return {
        "bytes_per_receipt": slope,
        "empty_token_bytes": intercept,
        "largest_token_bytes": max(lengths),
        "most_receipts": max(receipts),
        "checkpoints": len(points),
    }


def per_kind_growth(module: WorkflowEngineQueryModule, token: str, steps: int) -> dict[str, int]:
    """Token bytes added by one more artifact receipt, and by one more validator receipt."""
    keyring = module.keyring
    issued = verify_checkpoint(keyring, token)
    checkpoint = issued.checkpoint
    base = len(issue_checkpoint(keyring, checkpoint).token)
    extra = note_id(steps + 1)
    artifact = replace(
        checkpoint, artifacts=ArtifactTable.of({**checkpoint.artifacts, extra: ArtifactReceipt("0" * 64, 1234)})
    )
    validator = replace(
        checkpoint,
        validators=ValidatorTable.of(
            {**checkpoint.validators, f"check-{steps + 1:03d}@1.0.0": ValidatorReceipt("pass", "sha256:" + "0" * 64)}
        ),
    )
    return {
        "artifact_receipt_bytes": len(issue_checkpoint(keyring, artifact).token) - base,
        "validator_receipt_bytes": len(issue_checkpoint(keyring, validator).token) - base,
    }


def run_p4(spec: LongSpec, source: Path, keys: BenchKeys, work: Path, reps: int, profile: bool) -> list[Figure]:
    root = work / "p4"
    if root.exists():
        shutil.rmtree(root)
    built = build_release(source, [load_signing_key(keys.private_key)], root / "releases")
    release = verify_release(built.path, load_trust(keys.trust_dir))
    module = WorkflowEngineQueryModule(release, CheckpointKeyring.generate())
    started = time.perf_counter()
    calls = drive(module, root / "project", spec.steps)
    run_seconds = time.perf_counter() - started
    early, late = step_id(2), step_id(spec.steps)
    early_calls = _replays(calls, early)
    late_calls = _replays(calls, late)
    timed = _time_alternating(module, {early: early_calls, late: late_calls}, reps)
    at_early, at_late = timed[early], timed[late]
    details: dict[str, Any] = {
        "steps": spec.steps,
        "calls_in_run": len(calls),
        "run_s": run_seconds,
        f"{early}_s": at_early,
        f"{late}_s": at_late,
        "per_tool_ratio": {t: at_late[t] / at_early[t] for t in REPLAYED},
    }
    floor = token_floor(
        early_calls[PREPARE_STEP_VALIDATION]["checkpoint"], late_calls[PREPARE_STEP_VALIDATION]["checkpoint"], reps
    )
    early_total = sum(at_early.values())
    details["token_floor"] = {
        **floor,
        "what": "3 verifications + 1 issue + 2 digests of the checkpoint token, in C only (no cache)",
        "best_ratio": (early_total + floor["late_s"] - floor["early_s"]) / early_total,
    }
    cost = Figure(
        f"P4 call @{late}",
        f"engine cost of one gated step's calls (continue+prepare+submit) at {late} of the {spec.steps}-step workflow",
        sum(at_late.values()),
        sum(at_early.values()),
        "s",
        "ratio",
        TARGET_RATIO,
        floor_what=f"the same calls at {early}",
        details=details,
    )
    if profile and not cost.met:
        twins = _modules(module)

        def replay_late() -> None:
            for index, (tool, arguments) in enumerate(list(late_calls.items()) * 20):
                getattr(twins[index % 2], METHODS[tool])(arguments)

        details["profile"] = profile_call(replay_late)
    # last: emptying the cache drops the run's recorded checkpoints from it for good
    elsewhere = _time_alternating(module, {early: early_calls, late: late_calls}, reps, issued=False)
    details["issued_elsewhere"] = {
        "what": "the same calls with the cache of issued checkpoints emptied before each (another replica)",
        f"{early}_s": sum(elsewhere[early].values()),
        f"{late}_s": sum(elsewhere[late].values()),
        "ratio": sum(elsewhere[late].values()) / sum(elsewhere[early].values()),
    }
    growth = token_growth(calls)
    final_token = next(c.result["checkpoint"] for c in reversed(calls) if c.result.get("checkpoint"))
    growth.update(per_kind_growth(module, final_token, spec.steps))
    tokens = Figure(
        "P4 token/receipt",
        "checkpoint token bytes per added artifact/validator receipt (slope over the run)",
        growth["bytes_per_receipt"],
        None,
        "B",
        "value",
        TARGET_BYTES_PER_RECEIPT,
        details=growth,
    )
    return [cost, tokens]
