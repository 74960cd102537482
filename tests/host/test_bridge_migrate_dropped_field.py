"""migrate_run to a release whose workflow's confirmed state no longer has a field the run holds.

The bridge sent every value of the run (with the user's facts) as the target's confirmed state, so a field the
target version dropped (my-flow 0.1.0 asks ``audience``, 0.2.0 has no such field) had the verifier refuse the
migration, ``confirmed_state_invalid``, at the preview and at the migration alike: no fact the model could pass
fixed it. It now sends the run's values of the fields the offer says the target's state has
(``target_needs.confirmed_state``). Real releases built from ``rimthan-pack init``'s scaffold with the installed
``rimthan-pack``, signed with a real key, served by the real ``rimthan-host serve`` and its ``rimthan-mcp`` child.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import anyio
from mcp.client.stdio import StdioServerParameters
from rimthan_host.protocol import client_caller
from rimthan_host.session import HostSession
from rimthan_host.standin import StandIn
from support.bridge import BIN, check_replies
from support.checked_client import CheckedClient
from support.pack_cli import asks_audience, edit_text, init_scaffold, pack
from support.releases import KeyPair
from support.servers import stdio_client_for


def _releases(tmp_path: Path, keypair: KeyPair) -> tuple[Path, Path]:
    """my-flow 0.1.0 (asking ``audience``) and 0.2.0 (the scaffold's state: no ``audience``), built and signed; the
    summary written under research/, where the bridge's default policy writes."""
    first = init_scaffold(tmp_path)
    edit_text(first / "workflows" / "my-flow.toml", '"out/summary.json"', '"research/summary.json"')  # (the bridge's)
    second = first.parent / "0.2.0"
    shutil.copytree(first, second)
    for toml in (second / "catalogue.toml", second / "workflows" / "my-flow.toml"):
        edit_text(toml, 'version = "0.1.0"', 'version = "0.2.0"')
    asks_audience(first)
    for source in (first, second):
        built = pack("build", source, "--key", keypair.private_path, "--out", tmp_path / "rel")
        assert built.returncode == 0, built.stderr
    return tmp_path / "rel" / "my-flow-0.1.0", tmp_path / "rel" / "my-flow-0.2.0"


def test_migrate_run_leaves_behind_a_field_the_target_dropped(keypair: KeyPair, trust: Path, tmp_path: Path) -> None:
    old, new = _releases(tmp_path, keypair)
    project = tmp_path / "project"
    project.mkdir()
    verifier = ["--release", str(old), "--migration-target", str(new), "--trust", str(trust)]
    verifier += ["--state-dir", str(tmp_path / "state")]
    args = ["serve", "--project", str(project), "--", *verifier]
    params = StdioServerParameters(command=str(BIN / "rimthan-host"), args=args)

    async def go() -> None:
        async with CheckedClient(params, mode="legacy") as client:
            model = StandIn(client, project, {"0.1.0": old / "catalogue" / "examples"}, version="0.1.0")
            started = await model.call("start_run", {"workflow": "my-flow", "facts": {"goal": "Decide the meeting"}})
            assert started.data["migration"]["to_release"] == "my-flow@0.2.0", started.text
            planned = await model.call("step_done", {"step": "plan"})
            assert planned.data["question"]["field"] == "audience", planned.text
            answered = await model.call("answer_question", {"answer": "board", "field": "audience"})
            assert answered.data["step"]["id"] == "write-summary", answered.text
            preview = await model.call("migrate_run", {"confirm": False})
            assert not preview.is_error and preview.data["status"] == "preview", preview.text
            moved = await model.call("migrate_run", {"confirm": True})
            assert not moved.is_error and "Migrated run" in moved.text, moved.text
            check_replies(model)

    anyio.run(go)


def test_migrate_run_naming_a_release_with_no_offer_known_leaves_the_dropped_field_behind(
    keypair: KeyPair, trust: Path, tmp_path: Path
) -> None:
    """A run resumed from its log knows no offer (its saved result had none: the verifier had no migration target
    then); the user names the release installed since. With no offer, the bridge sent every value of the run, so
    ``audience`` (dropped by 0.2.0) had the preview refused, ``confirmed_state_invalid``. It asks the verifier what
    the named release needs (a preview with no values) and sends only those fields."""
    old, new = _releases(tmp_path, keypair)
    project = tmp_path / "project"
    project.mkdir()
    served = ["--release", str(old), "--trust", str(trust), "--state-dir", str(tmp_path / "state")]

    def bridge(*verifier: str) -> StdioServerParameters:
        args = ["serve", "--project", str(project), "--", *verifier]
        return StdioServerParameters(command=str(BIN / "rimthan-host"), args=args)

    async def started() -> None:  # only 0.1.0 served: no result offers a migration
        async with CheckedClient(bridge(*served), mode="legacy") as client:
            model = StandIn(client, project, {"0.1.0": old / "catalogue" / "examples"}, version="0.1.0")
            facts = {"goal": "Decide the meeting", "audience": "board"}
            at = await model.call("start_run", {"workflow": "my-flow", "facts": facts})
            assert at.data["step"]["id"] == "plan" and "migration" not in at.data, at.text
            check_replies(model)

    async def migrated() -> None:  # 0.2.0 installed since; the run resumed at plan (ungated) from its log, no call
        async with CheckedClient(bridge(*served, "--migration-target", str(new)), mode="legacy") as client:
            model = StandIn(client, project, {"0.1.0": old / "catalogue" / "examples"}, version="0.1.0")
            assert (await model.call("resume_run", {})).data["step"]["id"] == "plan"
            preview = await model.call("migrate_run", {"confirm": False, "to_release": "my-flow@0.2.0"})
            assert not preview.is_error and preview.data["status"] == "preview", preview.text
            moved = await model.call("migrate_run", {"confirm": True, "to_release": "my-flow@0.2.0"})
            assert not moved.is_error and "Migrated run" in moved.text, moved.text
            check_replies(model)

    anyio.run(started)
    anyio.run(migrated)


def test_the_library_s_migrate_leaves_behind_a_field_the_target_dropped(
    keypair: KeyPair, trust: Path, tmp_path: Path
) -> None:
    """HostSession.migrate itself carries only the target's fields (before, only the bridge's migrate_run and the
    scripted harness did, so a library caller passing the run's values had the verifier refuse the migration)."""
    old, new = _releases(tmp_path, keypair)
    verifier = ["--release", str(old), "--migration-target", str(new), "--trust", str(trust)]
    args = [str(BIN / "rimthan-mcp"), "serve", *verifier, "--state-dir", str(tmp_path / "state")]

    async def go() -> None:
        async with stdio_client_for(args, (tmp_path / "stderr.log").open("w")) as client:
            session = HostSession(client_caller(client), project_dir=tmp_path / "project")
            await session.start("my-flow", {"goal": "Decide the meeting"})
            assert session.migration_offer is not None
            values = {**session.state.values, "audience": "board"}  # (0.1.0's field, which 0.2.0 dropped)
            moved = await session.migrate("my-flow@0.2.0", values, confirm=True)
            assert moved.status == "active" and session.release_id == "my-flow@0.2.0", moved.failures
            assert "audience" not in session.state.values

    anyio.run(go)
