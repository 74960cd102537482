"""A harness on the library resuming a run against a verifier that holds other checkpoint keys: CheckpointNotHeld.

docs/host-kit.md, The library: a verifier started with another state directory than the run was made with refuses
the run's last checkpoint, and ``HostSession.resume`` raises :class:`CheckpointNotHeld` (a ``HarnessError``
naming the run and the verifier's code), nothing of the run made current and its lock let go; with the run's own
state directory the same resume goes on to completion. Real signed releases, the real ``rimthan-mcp serve`` over
stdio, a real SDK client.
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest
from mcp.client.stdio import StdioServerParameters
from rimthan_host.harness import RunResult, WorkflowHarness
from rimthan_host.protocol import HarnessError, client_caller
from rimthan_host.runlog import RunLog
from rimthan_host.session_resume import CheckpointNotHeld
from support.bridge import BIN
from support.checked_client import CheckedClient
from support.processes import serve_options
from support.servers import build_world, scenario


def test_a_resume_on_a_verifier_with_other_keys_is_checkpoint_not_held(tmp_path: Path) -> None:
    world = build_world(tmp_path / "world")
    project = tmp_path / "project"
    project.mkdir()
    log = RunLog(project, "run-1")

    def verifier(state: Path) -> StdioServerParameters:
        options = serve_options(world.built["1.3.0"], world.trust, state, log_level="warning")
        return StdioServerParameters(command=str(BIN / "rimthan-mcp"), args=["serve", *options], env=dict(os.environ))

    def harness(client: CheckedClient) -> WorkflowHarness:
        return WorkflowHarness(client_caller(client), scenario(), project_dir=project, run_log=RunLog(project, "run-1"))

    async def started() -> None:
        async with CheckedClient(verifier(tmp_path / "state")) as client:
            kit = harness(client)
            with kit.session:
                await kit.run(await kit.start("research", "1.3.0"), until_step="desk-research")

    async def elsewhere() -> CheckpointNotHeld:
        async with CheckedClient(verifier(tmp_path / "other-state")) as client:
            kit = harness(client)
            with pytest.raises(CheckpointNotHeld) as refused:
                await kit.session.resume()
            assert kit.session.lock is not None and not kit.session.lock.held  # (let go for another session)
            with pytest.raises(HarnessError, match="no run is in progress here"):
                kit.session.position  # noqa: B018 (nothing of the run made current)
            return refused.value

    async def at_home() -> RunResult:
        async with CheckedClient(verifier(tmp_path / "state")) as client:
            kit = harness(client)
            return await kit.run(await kit.session.resume())

    anyio.run(started)
    logged = log.tokens()
    refused = anyio.run(elsewhere)
    assert isinstance(refused, HarnessError)
    assert (refused.run, refused.code) == ("run-1", "checkpoint_key_unknown"), (refused.run, refused.code)
    assert "refuses run run-1's last checkpoint" in str(refused) and refused.said, str(refused)
    assert log.tokens() == logged  # nothing logged by the refused resume
    assert anyio.run(at_home).status == "completed"
