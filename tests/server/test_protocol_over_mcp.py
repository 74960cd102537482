"""The packaged workflow and an explicit migration, driven end to end through the real MCP transport.

A real ``rimthan-mcp serve`` process (stdio, and the shared HTTP server of ``mcp_http``), the SDK
client and the scripted harness: one run with a validator repair loop to completion, every
resource a step references read back at its immutable URI and checked against the manifest, and a
run migrated from 1.2.0 to 1.3.0 with preview and confirmation.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import anyio
import pytest
from rimthan_host.harness import client_caller
from rimthan_host.results import WalkedStep
from support.servers import HttpServer, ServerWorld, harness, mcp_client, text_of


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_packaged_workflow_and_migration_driven_through_the_mcp_transport(
    transport: str, mcp_world: ServerWorld, mcp_http: HttpServer, tmp_path: Path
) -> None:
    async def scenario() -> None:
        async with mcp_client(transport, "auto", mcp_world, mcp_http, tmp_path) as client:
            call = client_caller(client)
            run = harness(call, tmp_path / "run", fail_once=frozenset({"decision-critic"}))
            await run.run(await run.start("research", initial_version="1.2.0"))
            log = run.record
            path = [(tool.rsplit(".", 1)[1], status, step) for tool, status, step in log.statuses]
            assert path[0] == ("start_workflow", "active", "setup-workspace")
            assert ("continue_workflow", "input_required", "select-route") in path
            assert ("submit_step_validation", "validation_failed", "desk-research") in path
            assert path[-1][:2] == ("submit_step_validation", "completed")
            assert log.final["release"]["id"] == "research-decision@1.2.0"
            assert (tmp_path / "run" / "research" / "findings.md").is_file()

            # every resource a step payload references is served, verified, at its immutable URI
            digest_hex = log.final["release"]["manifest_digest"][7:]
            manifest = json.loads(
                text_of(await client.read_resource(f"rimthan://manifests/{digest_hex}/manifest.json"))
            )
            digests = {f["path"]: f["sha256"] for f in manifest["files"]}
            other = harness(call, tmp_path / "other")
            setup = await other.start("research", initial_version="1.2.0")
            for uri in setup.step_wire["resources"]:
                text = text_of(await client.read_resource(uri))
                assert uri.startswith(f"rimthan://releases/{digest_hex}/")
                path_in_release = uri.split("/", 4)[4]
                assert hashlib.sha256(text.encode("utf-8")).hexdigest() == digests[path_in_release]

            # an explicit migration 1.2.0 -> 1.3.0: preview, confirm, finish on the new release
            migrating = harness(call, tmp_path / "migrating")
            started = await migrating.start("research", initial_version="1.2.0")
            # every result that starts or moves the run says the offer: start, then setup's submit
            assert started.wire["migration"]["to"]["release"] == "research-decision@1.3.0"
            assert started.wire["migration"]["walked_again"] == []  # at setup-workspace: nothing walked yet
            at_interview = await migrating.run(started, until_step="interview")
            assert migrating.record.statuses[-1][0].endswith("submit_step_validation")
            assert at_interview.wire["migration"]["to"]["release"] == "research-decision@1.3.0"
            at_route = await migrating.run(at_interview, until_step="select-route")
            # the server holds a migration target: continue results name it and what it needs
            offer = at_route.wire["migration"]
            assert offer["to"]["release"] == "research-decision@1.3.0" and offer["confirmed"] is False
            assert offer["target_needs"]["workflow"] == {"id": "research-decision", "version": "1.3.0"}
            # for this run's host: its harness's adapter in the target, whose capabilities (skills) are listed too
            assert offer["target_needs"]["host_adapter"] == "claude-code@1.0.0"
            assert offer["target_needs"]["capabilities"] == ["skills", "subagents", "workspace.write"]
            preview = await migrating.migrate(at_route, "research-decision@1.3.0", "1.3.0", confirm=False)
            assert preview.status == "blocked"
            assert [f.code for f in preview.failures] == ["migration_confirmation_required"]
            assert preview.wire["migration"]["invalidated_artifacts"] == ["workspace-manifest"]
            # and which steps it walks again: setup redoes its manifest, interview and confirm-contract are walked
            assert preview.wire["migration"]["walked_again"] == [
                {"step": "setup-workspace", "outputs": ["workspace-manifest"]},
                {"step": "interview", "outputs": []},
                {"step": "confirm-contract", "outputs": []},
            ]
            assert preview.walked_again == (  # typed, as the demo and the bridge read it
                WalkedStep("setup-workspace", ("workspace-manifest",)),
                WalkedStep("interview", ()),
                WalkedStep("confirm-contract", ()),
            )
            assert preview.message == preview.wire["message"] and preview.message
            migration = preview.migration  # typed: the ends, the restart, what the target needs
            assert migration is not None and migration.wire == preview.wire["migration"]
            assert (migration.source_release, migration.target_release) == (
                "research-decision@1.2.0",
                "research-decision@1.3.0",
            )
            assert (migration.confirmed, migration.restart_step) == (False, "setup-workspace")
            needs = {n.field: (n.required, n.present) for n in migration.target_needs}
            assert needs == {
                n["field"]: (n["required"], n["present"])
                for n in preview.wire["migration"]["target_needs"]["confirmed_state"]
            }
            assert migration.missing == tuple(f for f, (req, there) in needs.items() if req and not there)
            assert at_route.offered_release == "research-decision@1.3.0"
            assert at_interview.walked_again == (WalkedStep("setup-workspace", ("workspace-manifest",)),)
            moved = await migrating.migrate(at_route, "research-decision@1.3.0", "1.3.0", confirm=True)
            assert (moved.status, moved.step_id) == ("active", "setup-workspace")
            done = await migrating.run(moved)
            assert done.status == "completed" and done.release == "research-decision@1.3.0"
            assert "decision-record" in migrating.record.steps_visited

    anyio.run(scenario)
