"""A harness on the library, over its own SDK client: the verifier killed mid-run is :class:`VerifierLost`.

The harness author's loop (docs/host-kit.md, The library): a lost connection raises the kit's own
``VerifierLost``, not the SDK's ``MCPError``, and a new connection resumes the run from its log to completion.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from rimthan_host.harness import RunResult, WorkflowHarness
from rimthan_host.protocol import VerifierLost, client_caller
from rimthan_host.runlog import RunLog
from support.bridge import BIN, verifier_pids
from support.processes import serve_options
from support.servers import build_world, scenario


def test_a_killed_verifier_is_verifier_lost_and_the_run_resumes_on_a_new_connection(tmp_path: Path) -> None:
    world = build_world(tmp_path / "world")
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()
    options = serve_options(world.built["1.3.0"], world.trust, state, log_level="warning")
    verifier = StdioServerParameters(command=str(BIN / "rimthan-mcp"), args=["serve", *options], env=dict(os.environ))

    def harness(client: Client) -> WorkflowHarness:
        return WorkflowHarness(client_caller(client), scenario(), project_dir=project, run_log=RunLog(project, "run-1"))

    async def killed() -> BaseException:
        async with Client(verifier) as client:
            kit = harness(client)
            with kit.session:  # (closed: the run's lock let go for the new connection's session)
                at = await kit.run(await kit.start("research", "1.3.0"), until_step="desk-research")
                for pid in verifier_pids(state):
                    os.kill(pid, signal.SIGKILL)
                with pytest.raises(VerifierLost) as lost:
                    await kit.run(at)
            return lost.value

    async def resumed() -> RunResult:
        async with Client(verifier) as client:
            kit = harness(client)
            return await kit.run(await kit.session.resume())

    assert "connection to the verifier" in str(anyio.run(killed))
    assert anyio.run(resumed).status == "completed"
