"""Routing reads only verified claims: an edited checkpoint is ``checkpoint_invalid`` and nothing else.

The server routes a checkpoint-bearing call to the release the checkpoint is
pinned to. If it read the claims before checking the MAC, an edited token
would be answered ``pinned_release_unavailable`` (echoing the forged digest)
for releases the server lacks and routed for those it holds: anyone could
probe which releases a server holds. Against a real MCP server application
(SDK client, in-memory transport) holding two real signed releases.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
from rimthan_host.harness import client_caller
from rimthan_workflow_mcp.server import create_mcp_application
from rimthan_workflow_registry.run.token_wire import claims_payload
from rimthan_workflow_registry.run.tokens import CheckpointKeyring
from support.checked_client import CheckedClient
from support.servers import build_world, harness, structured_error


def _edit_claims(token: str, **release: str) -> str:
    """The same header and signature over claims whose release was rewritten (no key needed)."""
    header, payload, signature = token.split(".")
    claims = json.loads(payload)  # the claims travel unencoded
    claims["release"] = {**claims["release"], **release}
    return ".".join([header, claims_payload(claims).decode("ascii"), signature])


def test_edited_claims_are_checkpoint_invalid_whatever_release_they_name(tmp_path: Path) -> None:
    world = build_world(tmp_path / "world")
    keyring = CheckpointKeyring.generate()
    # this server holds 1.2.0 (active) and, from its releases directory, nothing else
    (tmp_path / "empty").mkdir()
    app = create_mcp_application(world.provider("1.2.0", keyring=keyring, releases_dir=tmp_path / "empty"))
    absent = "sha256:" + "ab" * 32

    async def scenario() -> None:
        async with CheckedClient(app) as client:
            run = harness(client_caller(client), tmp_path / "project")
            started = await run.start("research", initial_version="1.2.0")
            token, state = started.wire["checkpoint"], run.state.projection()
            held = started.wire["release"]["manifest_digest"]
            forged = {
                "absent-release": _edit_claims(token, manifest_digest=absent),
                "absent-release-id": _edit_claims(token, id="other@9.9.9", manifest_digest=absent),
                "held-release-other-id": _edit_claims(token, id="other@9.9.9", manifest_digest=held),
            }
            for name, bad in forged.items():
                for tool, extra in (
                    ("rimthan.continue_workflow", {}),
                    ("rimthan.prepare_step_validation", {"host": run.host.to_json(), "artifacts": []}),
                ):
                    result = await client.call_tool(tool, {"checkpoint": bad, "confirmed_state": state, **extra})
                    error = structured_error(result)
                    assert error["code"] == "checkpoint_invalid", (name, tool, error)
                    assert absent not in json.dumps(error), (name, tool)
            served = await client.call_tool(
                "rimthan.continue_workflow", {"checkpoint": token, "confirmed_state": state}
            )
            assert not served.is_error

    anyio.run(scenario)
