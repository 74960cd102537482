"""migrate_run naming a release the verifier now holds, on a run resumed at an ungated step.

A run pinned to 1.2.0 is set aside at ``interview`` (no files: the bridge shows it again from its saved
result on resume, with no call, so no offer is known); the operator installs 1.3.0. The user asks to
migrate: ``migrate_run`` with ``to_release`` asks the verifier for the preview instead of answering
"no newer release is offered".

Every result of a move says whether a newer release can take the run: ``start_run``'s (its setup is a
validated step's submit) names the release the verifier holds, as a step without files does, and a resume
keeps the offer saved with the run's last result. A resume whose saved result held none does not know yet
whether a release installed since can take the run: ``migrate_run`` says so and when it will know, not
"no newer release is offered" while the verifier holds one. An offer kept for a release withdrawn since (the
verifier restarted without it) is dropped by the next result, which says ``migration: null``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from mcp.client.stdio import StdioServerParameters
from rimthan_host.standin import StandIn
from support.bridge import BIN, bridge_params, check_replies, stand_in
from support.checked_client import CheckedClient
from support.servers import ServerWorld, build_world, example_state


def _text(reply: Any) -> str:
    return "\n".join(getattr(c, "text", "") for c in reply.content)


def _served_from_releases(tmp_path: Path, *flags: str) -> tuple[ServerWorld, Path, StdioServerParameters]:
    """A project serving its ./releases (1.2.0 published) with ``flags`` for the verifier: the world, the project,
    and the bridge's parameters there (checkpoint keys and the activation floor in ``tmp_path``)."""
    world = build_world(tmp_path / "world")
    project = tmp_path / "project"
    world.publish("1.2.0", project / "releases")
    shutil.copytree(world.trust, project / "keys" / "local")
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "RIMTHAN_STATE_DIR": str(tmp_path)}
    args = ["serve", "--", *flags]
    return world, project, StdioServerParameters(command=str(BIN / "rimthan-host"), args=args, cwd=project, env=env)


def test_migrate_run_names_a_release_installed_after_the_run_was_set_aside(tmp_path: Path) -> None:
    world, project, params = _served_from_releases(tmp_path, "--migrate-to-newest")

    async def started() -> dict[str, Any]:
        async with CheckedClient(params) as client:
            reply = await client.call_tool("start_run", {"workflow": "research", "facts": example_state("1.2.0")})
            return dict(reply.structured_content or {})

    async def migrated() -> tuple[str, str]:
        async with CheckedClient(params) as client:
            await client.call_tool("resume_run", {})
            unknown = _text(await client.call_tool("migrate_run", {"confirm": False}))
            assert "the verifier has not said yet whether a newer release can take run" in unknown, unknown
            assert "next move (step_done, answer_question" in unknown, unknown
            named = await client.call_tool("migrate_run", {"confirm": False, "to_release": "research-decision@1.3.0"})
            offered = await client.call_tool("migrate_run", {"confirm": False})
            return _text(named), _text(offered)

    assert anyio.run(started)["step"]["id"] == "interview"
    world.publish("1.3.0", project / "releases")
    named, offered = anyio.run(migrated)
    assert "no newer release is offered" not in named and "research-decision@1.3.0" in named, named
    assert "no newer release is offered" not in offered, offered  # the preview made it the offer


def test_start_run_says_the_offer_and_a_resume_keeps_the_one_saved(
    tmp_path: Path,
) -> None:
    world = build_world(tmp_path / "world")
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()

    async def started(model: StandIn) -> None:
        assert (await model.start()).data["migration"]["to_release"] == "research-decision@1.3.0"
        early = await model.call("migrate_run", {"confirm": False})
        assert early.data["status"] == "preview" and "restarts at setup-workspace" in early.text, early.text
        assert "Steps walked again: setup-workspace (redoes workspace-manifest)." in early.text, early.text

    async def resumed(model: StandIn) -> None:  # a new bridge: the run shown from its log, no call made
        assert (await model.call("resume_run", {})).data["step"]["id"] == "interview"
        kept = await model.call("migrate_run", {"confirm": False})  # the offer saved with the run's last result
        assert kept.data["status"] == "preview" and "research-decision@1.3.0" in kept.text, kept.text
        interviewed = await model.call("step_done", {"step": "interview"})
        assert interviewed.data["migration"]["to_release"] == "research-decision@1.3.0", interviewed.text
        preview = await model.call("migrate_run", {"confirm": False})
        assert "restarts at setup-workspace" in preview.text, preview.text
        # the steps the run walks again, each with the files it produces again
        assert "Steps walked again: setup-workspace (redoes workspace-manifest), interview." in preview.text

    for script in (started, resumed):

        async def go(script: Callable[[StandIn], Awaitable[None]] = script) -> None:
            async with CheckedClient(bridge_params(project, world, state), mode="legacy") as client:
                model = stand_in(client, project)
                await script(model)
                check_replies(model)

        anyio.run(go)


def test_an_offer_kept_from_a_release_withdrawn_since_is_dropped_by_the_next_result(tmp_path: Path) -> None:
    """The operator withdraws 1.3.0 after a result offered it: removed from ./releases and the verifier restarted
    (``--lower-floor``: the floor 1.3.0 set is lowered back to 1.2.0). The run resumed from its log still keeps
    the offer saved with its last result, and the verifier refuses it (``migration_unavailable``); the run's next
    move gets ``migration: null``, the bridge drops the kept offer, and neither the step's words nor migrate_run
    offer it again."""
    world, project, params = _served_from_releases(tmp_path, "--migrate-to-newest", "--lower-floor")

    async def started(model: StandIn) -> None:
        assert "migration" not in (await model.start()).data  # only 1.2.0 is served

    async def offered(model: StandIn) -> None:  # 1.3.0 published since: the next move's result offers it
        assert (await model.call("resume_run", {})).data["step"]["id"] == "interview"
        interviewed = await model.call("step_done", {"step": "interview"})
        assert interviewed.data["migration"]["to_release"] == "research-decision@1.3.0", interviewed.text

    async def withdrawn(model: StandIn) -> None:  # 1.3.0 withdrawn since
        resumed = await model.call("resume_run", {})
        assert resumed.data["migration"]["to_release"] == "research-decision@1.3.0", resumed.text  # kept, stale
        stale = await model.call("migrate_run", {"confirm": False})
        assert stale.is_error and stale.data["refused"] == "migration_unavailable", stale.text
        moved = await model.call("step_done", {"step": "confirm-contract"})
        assert moved.data["step"]["id"] == "select-route", moved.text
        assert "migration" not in moved.data and "A newer release is offered" not in moved.text, moved.text
        none = await model.call("migrate_run", {"confirm": False})
        assert none.data["status"] == "no_offer" and "no newer release is offered for run" in none.text, none.text

    for script in (started, offered, withdrawn):
        if script is offered:
            world.publish("1.3.0", project / "releases")
        if script is withdrawn:
            shutil.rmtree(project / "releases" / world.built["1.3.0"].name)

        async def go(script: Callable[[StandIn], Awaitable[None]] = script) -> None:
            async with CheckedClient(params, mode="legacy") as client:
                model = stand_in(client, project)
                await script(model)
                check_replies(model)

        anyio.run(go)
