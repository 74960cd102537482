"""A harness on the library, over its own SDK client: the verifier killed mid-run is :class:`VerifierLost`.

The harness author's loop (docs/host-kit.md, The library): a lost connection raises the kit's own
``VerifierLost``, not the SDK's ``MCPError``, and a new connection resumes the run from its log to completion.
"""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path

import anyio
import pytest
from mcp.client.stdio import StdioServerParameters
from rimthan_host.harness import RunResult, WorkflowHarness
from rimthan_host.protocol import VerifierLost, client_caller
from rimthan_host.runlog import RunLog
from support.bridge import BIN, verifier_pids
from support.checked_client import CheckedClient
from support.processes import http_server_process, serve_options
from support.servers import build_world, scenario, server_env


def test_a_killed_verifier_is_verifier_lost_and_the_run_resumes_on_a_new_connection(tmp_path: Path) -> None:
    world = build_world(tmp_path / "world")
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()
    options = serve_options(world.built["1.3.0"], world.trust, state, log_level="warning")
    verifier = StdioServerParameters(command=str(BIN / "rimthan-mcp"), args=["serve", *options], env=dict(os.environ))

    def harness(client: CheckedClient) -> WorkflowHarness:
        return WorkflowHarness(client_caller(client), scenario(), project_dir=project, run_log=RunLog(project, "run-1"))

    async def killed() -> BaseException:
        async with CheckedClient(verifier) as client:
            kit = harness(client)
            with kit.session:  # (closed: the run's lock let go for the new connection's session)
                at = await kit.run(await kit.start("research", "1.3.0"), until_step="desk-research")
                for pid in verifier_pids(state):
                    os.kill(pid, signal.SIGKILL)
                with pytest.raises(VerifierLost) as lost:
                    await kit.run(at)
            return lost.value

    async def resumed() -> RunResult:
        async with CheckedClient(verifier) as client:
            kit = harness(client)
            return await kit.run(await kit.session.resume())

    assert "connection to the verifier" in str(anyio.run(killed))
    assert anyio.run(resumed).status == "completed"


def test_a_restarted_http_verifier_s_lost_session_is_verifier_lost_and_the_run_resumes(tmp_path: Path) -> None:
    """`serve --transport http --http-sessions` behind one address, restarted (a rolling restart, or the balancer
    sending the call to another replica): a 2025-11-25 client's next call names a session the server does not
    hold and is answered 404 "Session not found". The library raised the SDK's MCPError, which a harness (and the
    bridge) took for a refusal of the move, not for a lost connection to reconnect and resume from."""
    world = build_world(tmp_path / "world")
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()
    options = serve_options(world.built["1.3.0"], world.trust, state, log_level="warning")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    argv = [str(BIN / "rimthan-mcp"), "serve", *options, "--transport", "http", "--port", str(port), "--http-sessions"]

    def harness(client: CheckedClient) -> WorkflowHarness:
        return WorkflowHarness(client_caller(client), scenario(), project_dir=project, run_log=RunLog(project, "run-1"))

    async def restarted(url: str) -> BaseException:
        async with CheckedClient(url, mode="legacy") as client:
            kit = harness(client)
            with kit.session:
                at = await kit.run(await kit.start("research", "1.3.0"), until_step="desk-research")
                await anyio.to_thread.run_sync(restart)
                with pytest.raises(VerifierLost) as lost:
                    await kit.run(at)
            return lost.value

    async def resumed(url: str) -> RunResult:
        async with CheckedClient(url, mode="legacy") as client:
            kit = harness(client)
            return await kit.run(await kit.session.resume())

    servers = [http_server_process(argv, env=server_env())]

    def restart() -> None:
        servers[0].__exit__(None, None, None)
        servers[0] = http_server_process(argv, env=server_env())
        servers[0].__enter__()

    url = servers[0].__enter__().url
    try:
        assert "session" in str(anyio.run(restarted, url))
        assert anyio.run(resumed, url).status == "completed"
    finally:
        servers[0].__exit__(None, None, None)
