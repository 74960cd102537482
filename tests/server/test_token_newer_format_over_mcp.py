"""A checkpoint a newer Rimthan version issued, met by this one's real server process (a rolling upgrade).

The installed ``rimthan-mcp serve`` (stdio) starts a real run through the SDK client; the run's checkpoint is then
sent back with its header's ``typ`` naming token format 2 (``rimthan-checkpoint-2+jwt``), as a replica of a newer
version would have issued it. The refusal is ``checkpoint_invalid`` saying so and pointing at a replica of that
version (or the finished upgrade); the run's real checkpoint goes on being served.
"""

from __future__ import annotations

from pathlib import Path

import anyio
from rimthan_host.harness import client_caller
from support.processes import stdio_client_process
from support.servers import RIMTHAN_MCP, ServerWorld, harness, serve_args, structured_error
from support.token_headers import numbered


def test_a_checkpoint_of_a_newer_token_format_is_refused_as_such_and_the_real_one_still_works(
    mcp_world: ServerWorld, tmp_path: Path
) -> None:
    module_args = serve_args(mcp_world, mcp_world.built["1.2.0"], state_dir=tmp_path / "state")
    assert module_args[:3] == ["-m", "rimthan_workflow_mcp", "serve"]
    errlog = tmp_path / "stderr.log"

    async def scenario() -> None:
        async with stdio_client_process(RIMTHAN_MCP, module_args[2:], errlog.open("w")) as client:
            run = harness(client_caller(client), tmp_path / "project")
            started = await run.start("research", initial_version="1.2.0")
            token, state = started.wire["checkpoint"], run.state.projection()
            refused = await client.call_tool(
                "rimthan.continue_workflow", {"checkpoint": numbered(token, 2), "confirmed_state": state}
            )
            error = structured_error(refused)
            assert error["code"] == "checkpoint_invalid", error
            assert error["message"] == (
                "the checkpoint token was issued by a newer Rimthan version (format 2; this one reads format 1)"
            )
            assert "replica of the Rimthan version that issued the token" in error["next"], error
            assert "finish the upgrade" in error["next"], error
            served = await client.call_tool(
                "rimthan.continue_workflow", {"checkpoint": token, "confirmed_state": state}
            )
            assert not served.is_error, served

    anyio.run(scenario)
    assert "Traceback" not in errlog.read_text("utf-8")
