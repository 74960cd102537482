"""A model that does not know the workflow's name learns which ones it may start, from the bridge's replies.

``show_step`` with no run, and a ``start_run`` with no, an empty, a misspelt or an unknown workflow name, each
name the workflows the verifier offers: id, title, the release a run of it starts on, its other names. The
bridge reads them from the verifier's resource listing (no fifth tool). Each test drives the real
``rimthan-host serve`` over stdio, which starts the real verifier on real signed releases.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.stdio import StdioServerParameters
from rimthan_host.offered import OFFERED_SHOWN, Offered, OfferedList, release_offers
from rimthan_host.standin import StandIn
from rimthan_workflow_registry.protocol_names import NEW_RUNS_META, RELEASE_META, WORKFLOWS_META
from support.bridge import BIN, check_replies, drive, no_run, refused, stand_in
from support.checked_client import CheckedClient
from support.servers import RIMTHAN_PACK, ServerWorld, build_world


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("offered-world"))


RESEARCH = "research-decision (Research decision, release research-decision@1.2.0; also called decide, research)"
LISTED = "Workflows you can start (pass the name as start_run's workflow): "


def test_no_run_and_each_unknown_name_list_the_workflows_to_start(world: ServerWorld, tmp_path: Path) -> None:
    async def script(model: StandIn) -> None:
        shown = await model.call("show_step")
        no_run(shown, "No run is active. Call start_run.", LISTED + RESEARCH + ".")
        assert shown.data == {"status": "no_run", "workflows": ["research-decision"]}
        wrong: list[dict[str, Any]] = [
            {"workflow": "reserch", "facts": {}},
            {"workflow": "nope", "facts": {"objective": "x"}},
            {"workflow": "", "facts": {}},
            {"workflow": "  ", "facts": {}},
            {"facts": {}},
            {"workflow": 7, "facts": {}},
        ]
        for arguments in wrong:
            said = await model.call("start_run", arguments)
            refused(said, "start_run again", LISTED + RESEARCH + ".")
            assert said.data["workflows"] == ["research-decision"], said.data
        empty = await model.call("start_run", {"workflow": "", "facts": {}})
        refused(empty, "Nothing was done: workflow is empty.")
        assert empty.data["status"] == "bad_arguments"
        assert not list(model.project.glob(".rimthan/runs/*.log"))  # none of it started a run
        started = await model.start()
        assert not started.is_error and "Workflows you can start" not in started.text, started.text

    drive(world, tmp_path, script)


def test_an_unknown_name_names_each_workflow_once(world: ServerWorld, tmp_path: Path) -> None:
    """The verifier's ``workflow_not_found`` names the release's workflows (ids, aliases, versions) in its words and
    in its details: the bridge says the refusal in its own words, each workflow named once (its message unread)."""

    async def script(model: StandIn) -> None:
        for facts in ({}, {"objective": "x"}):  # (a start; with facts, the question of what it needs first)
            said = await model.call("start_run", {"workflow": "reserch", "facts": facts})
            reason = "no workflow or alias 'reserch' is among the workflows it serves."
            refused(said, f"The verifier refused: workflow_not_found: {reason}\nNothing changed")
            assert said.text.endswith(LISTED + RESEARCH + "."), said.text
            assert "available:" not in said.text and said.text.count("decide") == 1, said.text
            assert said.data == {
                "status": "refused",
                "refused": "workflow_not_found",
                "workflows": ["research-decision"],
            }

    drive(world, tmp_path, script)


def test_a_verifier_serving_two_catalogues_names_each_with_its_release(world: ServerWorld, tmp_path: Path) -> None:
    releases, project, state = tmp_path / "releases", tmp_path / "project", tmp_path / "state"
    project.mkdir()
    world.publish("1.3.0", releases)
    source = tmp_path / "catalogues" / "other"
    subprocess.run([RIMTHAN_PACK, "init", str(source)], check=True, capture_output=True, timeout=60)
    build = [RIMTHAN_PACK, "build", str(source), "--key", str(world.key.private_path), "--out", str(releases)]
    subprocess.run(build, check=True, capture_output=True, timeout=120)
    options = ["--releases-dir", str(releases), "--trust", str(world.trust), "--state-dir", str(state)]
    params = StdioServerParameters(
        command=str(BIN / "rimthan-host"), args=["serve", "--project", str(project), "--", *options]
    )

    async def go() -> StandIn:
        async with CheckedClient(params, mode="legacy") as client:
            model = stand_in(client, project)
            for tool, arguments in (("show_step", {}), ("start_run", {"workflow": "nowhere", "facts": {}})):
                said = await model.call(tool, arguments)
                named = ("release other@0.1.0", "release research-decision@1.3.0", "start_run")
                if tool == "start_run":
                    refused(said, *named)
                else:
                    no_run(said, *named)
                assert sorted(said.data["workflows"]) == ["other", "research-decision"], said.data
            return model

    check_replies(anyio.run(go))


def test_the_list_is_bounded_and_takes_only_what_fits_its_shape() -> None:
    many = OfferedList(tuple(Offered(f"wf-{i}", "cat@1.0.0", "", ()) for i in range(OFFERED_SHOWN + 3)))
    assert many.words().endswith(f"wf-{OFFERED_SHOWN - 1} (release cat@1.0.0); and 3 more.")
    assert f"wf-{OFFERED_SHOWN}" not in many.words() and len(many.names()) == OFFERED_SHOWN
    assert OfferedList().words() == ""
    odd = [{"id": 3}, "x", {"id": "ok", "title": ["no"], "aliases": ["a", 1]}, {"id": "t\nx", "title": "T" * 500}]
    taken = release_offers({RELEASE_META: "cat@1.0.0", NEW_RUNS_META: True, WORKFLOWS_META: odd})
    assert taken[0] == Offered("ok", "cat@1.0.0", "", ("a",))
    assert "\n" not in taken[1].words() and len(taken[1].words()) < 200
    assert release_offers({RELEASE_META: 1, WORKFLOWS_META: odd}) == []
