"""A host that is not Claude Code: no elicitation, no roots, the 2025-06-18 era, a bridge process per call.

The client is the SDK's, declaring no capability at all and offering 2025-06-18 (the era before 2025-11-25 that
the bridge serves as offered); the bridge is the real ``rimthan-host serve`` and its real verifier. Some clients
start a server for each call (the MCP Inspector's CLI, ``--method tools/call``, does): every call here is a new
bridge process, so each picks the run up from its log. Before, a new process answered every move "No run is
active. Call start_run or resume_run", and the ``resume_run`` it asked for was gone with its process: such a
client could never move a run past its first step.
"""

from __future__ import annotations

import json
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import mcp.client.session
import pytest
from mcp_types import CallToolResult
from rimthan_host.confirmations import BY_MODEL
from rimthan_host.standin import StandIn
from support.bridge import audit, bridge_params, check_replies, stand_in
from support.checked_client import CheckedClient
from support.servers import ServerWorld, build_world

ERA = "2025-06-18"
PICKED_UP = "from its log first: this bridge process started after the run's last move"
MOVES = ("show_step", "step_done", "answer_question", "record_verdict", "migrate_run")  # act on the active run


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("other-hosts-world"))


class RestartingClient:
    """An SDK client offering 2025-06-18 and no capability that starts the bridge anew every ``every`` calls (a
    client starting a server per call, as the Inspector's CLI does, is ``every=1``; fewer processes keep it short)."""

    def __init__(self, project: Path, world: ServerWorld, state: Path, every: int) -> None:
        self.params = bridge_params(project, world, state)
        self.every = every
        self.eras: list[str] = []  # the era each bridge process served
        self.served = 0
        self._stack: AsyncExitStack | None = None
        self._client: CheckedClient | None = None

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> CallToolResult:
        if self._client is None or self.served % self.every == 0:
            await self.close()
            self._stack = AsyncExitStack()
            self._client = await self._stack.enter_async_context(CheckedClient(self.params, mode="legacy"))
            self.eras.append(self._client.protocol_version)
        self.served += 1
        return await self._client.call_tool(name, arguments)

    async def close(self) -> None:
        if self._stack is not None:
            await self._stack.aclose()
        self._stack, self._client = None, None


def _only_log(project: Path) -> Path:
    (log,) = sorted((project / ".rimthan" / "runs").glob("*.log"))
    return log


async def _broken_file(model: StandIn, reply: Any) -> None:
    """A wrong step output (its JSON cut short), refused by name, nothing moved."""
    for path in reply.data["files"]:
        (model.project / path).parent.mkdir(parents=True, exist_ok=True)
        (model.project / path).write_text(model.compose(path), "utf-8")
    (path,) = [p for p in reply.data["files"] if p.endswith(".json")]
    (model.project / path).write_text('{"route": ', "utf-8")
    refused = await model.call("step_done", {"step": reply.data["step"]["id"]})
    assert refused.is_error and path in refused.text and "step_done" in refused.text, refused.text


def test_a_client_without_capabilities_starting_a_bridge_per_call_completes_a_migrated_run(
    world: ServerWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mcp.client.session, "LATEST_HANDSHAKE_VERSION", ERA)
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()
    client = RestartingClient(project, world, state, every=4)
    new_facts = {"risk_tolerance": "medium", "stakeholders": ["CTO", "Backend team leads"]}

    async def go() -> StandIn:
        try:
            return await run(stand_in(client, project, fail_once={"decision-critic"}))  # type: ignore[arg-type]
        finally:
            await client.close()

    async def run(model: StandIn) -> StandIn:
        started = await model.start()
        assert f"Started run {started.data['run']} ({BY_MODEL})." in started.text, started.text
        at_question = await model.follow(started, "desk-research", until_question=True)
        offered = at_question.data["migration"]["to_release"]
        preview = await model.call("migrate_run", {"confirm": False, "facts": new_facts})
        assert not preview.is_error and "restarts at setup-workspace" in preview.text, preview.text
        moved = await model.call("migrate_run", {"to_release": offered, "confirm": True, "facts": new_facts})
        assert "Migrated run" in moved.text and moved.data["step"]["id"] == "interview", moved.text
        model.version = "1.3.0"
        at_route = await model.follow(moved, "desk-research", until_question=True)
        answered = await model.call("answer_question", {"answer": "desk-research", "field": "research_route"})
        assert answered.data["step"]["id"] == "desk-research" and not at_route.is_error, answered.text
        await _broken_file(model, answered)
        final = await model.follow(answered, "desk-research")  # the files written right, step_done again
        assert final.data["status"] == "completed", final.text
        return model

    model = anyio.run(go)
    check_replies(model)
    assert set(client.eras) == {ERA} and len(client.eras) == -(-model.calls // 4)
    assert ["decision-critic"] in model.rounds  # the failed round, run again
    for i, ((name, _), reply) in enumerate(zip(model.sent, model.received, strict=True)):
        fresh = i > 0 and i % 4 == 0  # each new bridge process picked the run up before its first move
        assert (PICKED_UP in reply.text) == (fresh and name in MOVES), (i, name, reply.text)
    history = audit(_only_log(project), state)
    assert history["ok"] is True and len(history["migrations"]) == 1
    assert history["releases"][-1]["id"] == "research-decision@1.3.0"


def test_a_new_bridge_with_two_unfinished_runs_still_asks_which(world: ServerWorld, tmp_path: Path) -> None:
    """The pick-up takes only the one unfinished run: with two, a move says both and names resume_run."""
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()
    client = RestartingClient(project, world, state, every=2)

    async def go() -> tuple[Any, list[str]]:
        try:
            return await run(stand_in(client, project))  # type: ignore[arg-type]
        finally:
            await client.close()

    async def run(model: StandIn) -> tuple[Any, list[str]]:
        runs = [(await model.start()).data["run"]]
        facts = json.loads((model.examples["1.2.0"] / "confirmed-state.json").read_text("utf-8"))
        runs.append(
            (await model.call("start_run", {"workflow": "research", "facts": facts, "new_run": True})).data["run"]
        )
        shown = await model.call("show_step")  # the third call: a new bridge process
        return shown, runs

    shown, runs = anyio.run(go)
    assert not shown.is_error and shown.data["status"] == "no_run" and PICKED_UP not in shown.text, shown.text
    assert all(run in shown.text for run in runs) and "resume_run" in shown.text
