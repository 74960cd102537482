"""A client's tool calls at once, and values of megabytes, against a real ``rimthan-host serve`` over stdio.

A host may send several tool calls at once (Claude Code does). Before, each
was handled as it came: two ``answer_question`` calls both went from the same
checkpoint, both were answered, and the run's log forked (``rimthan-mcp
audit``: run_chain_broken, fork); two ``start_run`` both started a run. Now a
bridge handles one call at a time, and the second sees where the first left
the run. Before, too, a value the model sent came back whole in the words of
a refusal: a 5 MB run id or answer, a 5 MB reply. Now each is quoted cut
(``errors.quoted``), like an unknown tool's name.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from rimthan_host.standin import Reply, StandIn
from support.bridge import audited_only_run, drive, refused, write_files
from support.servers import ServerWorld, build_world

HUGE = 5_000_000
REPLY_CHARS = 4_000  # the longest a refusal quoting a cut value may be, words and structured content alike


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("parallel-calls-world"))


async def at_once(*calls: Callable[[], Awaitable[Reply]]) -> list[Reply]:
    """The calls sent together, on one client; their replies in the order given."""
    replies: dict[int, Reply] = {}

    async def one(index: int) -> None:
        replies[index] = await calls[index]()

    async with anyio.create_task_group() as tasks:
        for index in range(len(calls)):
            tasks.start_soon(one, index)
    return [replies[index] for index in range(len(calls))]


def one_went_through(replies: list[Reply]) -> tuple[Reply, Reply]:
    """The reply that went through, and the other's refusal."""
    done = [r for r in replies if not r.is_error]
    others = [r for r in replies if r.is_error]
    assert len(done) == 1 and len(others) == 1, [r.text[:300] for r in replies]
    return done[0], others[0]


def test_two_answers_at_once_one_is_recorded_and_the_log_stays_one_chain(world: ServerWorld, tmp_path: Path) -> None:
    async def script(model: StandIn) -> None:
        await model.follow(await model.start(), "", until_question=True)
        replies = await at_once(
            lambda: model.call("answer_question", {"answer": "experiment", "field": "research_route"}),
            lambda: model.call("answer_question", {"answer": "desk-research", "field": "research_route"}),
        )
        answered, second = one_went_through(replies)
        refused(second, "No question is waiting; nothing was recorded.", "call step_done")
        assert (await model.follow(answered, "")).data["status"] == "completed"

    model, state = drive(world, tmp_path, script)
    assert len(audited_only_run(model.project, state)["steps"]) > 2  # before: run_chain_broken (a fork)


def test_two_starts_at_once_start_one_run(world: ServerWorld, tmp_path: Path) -> None:
    async def script(model: StandIn) -> None:
        started, second = one_went_through(await at_once(model.start, model.start))
        refused(second, "Nothing was started: this project has unfinished runs", "show_step says what it needs")
        assert second.data["unfinished"] == [started.data["run"]], second.data
        assert (await model.follow(started, "desk-research")).data["status"] == "completed"

    model, state = drive(world, tmp_path, script)
    audited_only_run(model.project, state)  # exactly one run's log, and it audits


def bounded(reply: Reply, *words: str) -> None:
    """A refusal holding ``words`` whose text and structured content stay short, whatever the model sent."""
    refused(reply, *words)
    assert len(reply.text) < REPLY_CHARS, reply.text[:300]
    assert reply.data_text == reply.text and len(json.dumps(reply.data)) < REPLY_CHARS, json.dumps(reply.data)[:300]


CUT = f"...[{HUGE} chars, cut]"
ROUTE = "research_route"
HUGE_CALLS: list[tuple[str, dict[str, Any], tuple[str, ...]]] = [
    ("resume_run", {"run": "r" * HUGE}, (f"There is no run {'r' * 100}", CUT)),
    ("answer_question", {"answer": "x" * HUGE, "field": ROUTE}, (f"nothing was recorded: '{'x' * 100}", CUT)),
    ("migrate_run", {"to_release": "v" * HUGE, "confirm": False}, (f"Nothing was done: {'v' * 100}", CUT)),
    ("show_step", {"k" * HUGE: 1}, (f"unknown argument {'k' * 100}", " chars, cut]")),  # the whole problem cut
    ("start_run", {"workflow": "w" * HUGE, "facts": {}, "new_run": True}, ("The verifier refused", "…")),  # its cut
]


def test_a_value_of_megabytes_is_quoted_cut_in_every_refusal(world: ServerWorld, tmp_path: Path) -> None:
    async def script(model: StandIn) -> None:
        await model.follow(await model.start(), "", until_question=True)
        for tool, arguments, words in HUGE_CALLS:
            bounded(await model.call(tool, arguments), *words)
        step = await model.call("answer_question", {"answer": "desk-research", "field": "research_route"})
        write_files(model, step)
        await model.call("step_done")
        verdict = {"validator": "a" * HUGE, "verdict": "pass"}
        bounded(await model.call("record_verdict", verdict), "is not a validator", CUT)
        model.sent.clear()  # (what was sent is no model's to keep)
        shown = await model.call("show_step")
        assert (await model.follow(shown, "desk-research")).data["status"] == "completed"

    model, state = drive(world, tmp_path, script)
    assert audited_only_run(model.project, state)["steps"][-1] == "desk-research"
