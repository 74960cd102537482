"""Setup never overwrites what the user owns at the paths the release's assets install to.

The release installs its prompt, skill, subagents and adapter at
``.claude/commands/<id>.md``, ``.claude/agents/<id>.md`` and the like: paths
where a user may keep files of their own. Each test drives the real
``rimthan-host serve`` over stdio with the real verifier as its child, puts
the user's file there for real, and checks that the bridge refuses the setup
in words naming the file, that nothing was delivered (the user's bytes and
every other asset path untouched), and that the run completes, its log
audited, once the user moved the file.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import pytest
from rimthan_host.delivered import MAX_ASSET_BYTES, RECORD_PATH, STORE_DIR, clash
from rimthan_host.project_files import ProjectFiles
from rimthan_host.standin import StandIn
from support.bridge import (
    audited,
    audited_only_run,
    bridge_params,
    check_replies,
    drive,
    refused,
    stand_in,
    write_files,
)
from support.checked_client import CheckedClient
from support.releases import packaged_source
from support.servers import ServerWorld, build_world

AGENT = ".claude/agents/evidence-auditor.md"
PROMPT = ".claude/commands/research-brief.md"
SKILL = ".claude/skills/research-decision/SKILL.md"
OTHER_ASSETS = (PROMPT, SKILL, ".claude/agents/decision-critic.md")
MANIFEST = ".rimthan/workspace-manifest.json"
USERS = "# My own evidence auditor\n\nThe user's work, committed in their repository.\n"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("user-files-world"))


def test_a_users_own_file_at_an_asset_path_is_refused_never_overwritten(world: ServerWorld, tmp_path: Path) -> None:
    """Nothing is delivered while the user's file is there; once it is moved, resume_run sets up and completes."""

    async def script(model: StandIn) -> None:
        own = model.project / AGENT
        own.parent.mkdir(parents=True)
        own.write_text(USERS, "utf-8")
        first = await model.call("start_run", {"workflow": "research", "facts": _facts(model)})
        refused(first, AGENT, "the user's own", "move or rename", "nothing was delivered", "resume_run")
        assert first.data["status"] == "workspace_refused"
        assert own.read_text("utf-8") == USERS
        assert [p for p in (*OTHER_ASSETS, MANIFEST, RECORD_PATH) if (model.project / p).exists()] == []
        run = first.data["run"]
        refused(
            await model.call("step_done"), "No run is active", f"resume_run with one of the unfinished runs here: {run}"
        )

        own.rename(own.with_name("my-evidence-auditor.md"))  # the user moves their file out of the way
        resumed = await model.call("resume_run", {"run": run})
        assert not resumed.is_error, resumed.text
        await model.follow(resumed, "desk-research")

    model, state = drive(world, tmp_path, script)
    assert (model.project / ".claude/agents/my-evidence-auditor.md").read_text("utf-8") == USERS
    assert audited_only_run(model.project, state)["ok"] is True


def test_a_delivered_file_the_user_changed_is_refused_an_untouched_one_is_replaced(
    world: ServerWorld, tmp_path: Path
) -> None:
    """A second run re-delivers the bridge's own files; a file the user edited since is theirs, and refused."""

    async def script(model: StandIn) -> None:
        await model.follow(await model.start(), "desk-research")
        edited = (model.project / PROMPT).read_text("utf-8") + "\nMy own addition.\n"
        (model.project / PROMPT).write_text(edited, "utf-8")
        agent_before = (model.project / AGENT).stat().st_mtime_ns
        again = await model.call("start_run", {"workflow": "research", "facts": _facts(model), "new_run": True})
        refused(again, PROMPT, "was changed since the bridge delivered it", "move or rename")
        assert AGENT not in again.text  # the bridge's own, untouched file is no clash
        record = json.loads((model.project / RECORD_PATH).read_text("utf-8"))["delivered"]
        assert AGENT in record and PROMPT in record
        assert (model.project / PROMPT).read_text("utf-8") == edited
        assert (model.project / AGENT).stat().st_mtime_ns == agent_before  # nothing half-delivered

        (model.project / PROMPT).rename(model.project / ".claude/commands/my-brief.md")
        resumed = await model.call("resume_run", {"run": again.data["run"]})
        assert not resumed.is_error, resumed.text
        await model.follow(resumed, "desk-research")

    drive(world, tmp_path, script)


def _facts(model: StandIn) -> dict[str, object]:
    facts: dict[str, object] = json.loads((model.examples[model.version] / "confirmed-state.json").read_text("utf-8"))
    return facts


def test_a_run_set_aside_gets_its_own_releases_subagents_back_before_its_validators_run(
    world: ServerWorld, tmp_path: Path
) -> None:
    """Run A on 1.2.0 set aside; run B migrates to 1.3.0 and installs 1.3.0's subagents; A resumed runs 1.2.0's."""
    critic = ".claude/agents/decision-critic.md"
    pinned = {v: (packaged_source(v) / "assets/subagents/decision-critic.md").read_bytes() for v in ("1.2.0", "1.3.0")}
    assert pinned["1.2.0"] != pinned["1.3.0"]

    async def script(model: StandIn) -> None:
        first = await model.follow(await model.start(), "", until_question=True)
        run_a = first.data["run"]
        second = await model.call("start_run", {"workflow": "research", "facts": _facts(model), "new_run": True})
        await model.follow(second, "", until_question=True)
        facts = {"risk_tolerance": "medium", "stakeholders": ["CTO", "Backend team leads"]}
        moved = await model.call("migrate_run", {"confirm": True, "facts": facts})
        assert "Migrated run" in moved.text, moved.text
        assert (model.project / critic).read_bytes() == pinned["1.3.0"]  # run B's setup installed 1.3.0's

        resumed = await model.call("resume_run", {"run": run_a})
        assert f"Re-installed {critic}" in resumed.text, resumed.text  # (put back as run A is resumed)
        step = await model.call("answer_question", {"answer": "desk-research", "field": "research_route"})
        assert not resumed.is_error and not step.is_error, step.text
        write_files(model, step)
        waiting = await model.call("step_done")
        assert waiting.data["status"] == "validators_pending", waiting.text
        assert (model.project / critic).read_bytes() == pinned["1.2.0"]  # what run A's validators are defined by
        await model.follow(waiting, "desk-research")

    model, state = drive(world, tmp_path, script)
    for log in (model.project / ".rimthan/runs").glob("*.log"):
        assert audited(model.project, state, log.stem)["ok"] is True


def test_a_run_resumed_gets_its_own_releases_prompt_and_skill_back_never_over_the_users(
    world: ServerWorld, tmp_path: Path
) -> None:
    """Run A on 1.2.0 set aside, run B migrated to 1.3.0 (whose skill says to write a decision record, a step
    1.2.0 lacks): resuming A puts 1.2.0's prompt, skill and subagents back, resuming B 1.3.0's; a file the user
    changed meanwhile refuses the resume in words, untouched, and the active run stays active."""
    paths = {PROMPT: "assets/prompts/research-brief.md", SKILL: "assets/skills/research-decision.md"}
    pinned = {v: {p: (packaged_source(v) / a).read_bytes() for p, a in paths.items()} for v in ("1.2.0", "1.3.0")}
    assert all(pinned["1.2.0"][p] != pinned["1.3.0"][p] for p in paths)

    def on_disk(model: StandIn) -> dict[str, bytes]:
        return {p: (model.project / p).read_bytes() for p in paths}

    async def script(model: StandIn) -> None:
        run_a = (await model.follow(await model.start(), "", until_question=True)).data["run"]
        second = await model.call("start_run", {"workflow": "research", "facts": _facts(model), "new_run": True})
        run_b = (await model.follow(second, "", until_question=True)).data["run"]
        facts = {"risk_tolerance": "medium", "stakeholders": ["CTO", "Backend team leads"]}
        assert "Migrated run" in (await model.call("migrate_run", {"confirm": True, "facts": facts})).text
        assert on_disk(model) == pinned["1.3.0"]

        resumed = await model.call("resume_run", {"run": run_a})
        assert not resumed.is_error and on_disk(model) == pinned["1.2.0"], resumed.text
        assert all(f"Re-installed {p}: run {run_a}'s release delivered it otherwise" in resumed.text for p in paths)
        back = await model.call("resume_run", {"run": run_b})
        assert not back.is_error and on_disk(model) == pinned["1.3.0"], back.text

        edited = pinned["1.3.0"][SKILL] + b"\nMy own notes.\n"
        (model.project / SKILL).write_bytes(edited)
        stopped = await model.call("resume_run", {"run": run_a})
        refused(stopped, f"Run {run_a} was not resumed", SKILL, "was changed since the bridge delivered it")
        refused(stopped, "move or rename", f"resume_run {run_a} again")
        assert stopped.data["status"] == "workspace_refused"
        assert (model.project / SKILL).read_bytes() == edited and (model.project / PROMPT).read_bytes() == pinned[
            "1.3.0"
        ][PROMPT]  # nothing written, not even the prompt that could be
        assert (await model.call("show_step")).text.startswith(f"Run {run_b}")  # run B stays the active run

        (model.project / SKILL).rename(model.project / ".claude/my-notes.md")  # the user moves their file
        (model.project / RECORD_PATH).write_text("[]", "utf-8")  # and the record is damaged meanwhile
        damaged = await model.call("resume_run", {"run": run_a})
        refused(damaged, f"{RECORD_PATH} is damaged", "resume_run for a run waiting at its setup or being resumed")
        assert not (model.project / SKILL).exists()  # nothing written
        (model.project / RECORD_PATH).unlink()
        resumed = await model.call("resume_run", {"run": run_a})  # no record: nothing is known to put back
        assert not resumed.is_error and "Re-installed" not in resumed.text, resumed.text

    drive(world, tmp_path, script)


def test_a_subagent_file_the_user_changed_stops_the_validators_in_words(world: ServerWorld, tmp_path: Path) -> None:
    """The validators are never named while their subagent file is not the release's; once moved, it is put back."""
    critic = ".claude/agents/decision-critic.md"

    async def script(model: StandIn) -> None:
        await model.follow(await model.start(), "", until_question=True)
        edited = (model.project / critic).read_text("utf-8") + "\nAlways pass.\n"
        (model.project / critic).write_text(edited, "utf-8")
        step = await model.call("answer_question", {"answer": "desk-research", "field": "research_route"})
        write_files(model, step)
        stopped = await model.call("step_done")
        refused(stopped, "The validators were not started", critic, "was changed since the bridge delivered it")
        refused(stopped, "move or rename", "step_done again")
        assert stopped.data["status"] == "workspace_refused" and stopped.data["step"] == {"id": "desk-research"}
        assert (model.project / critic).read_text("utf-8") == edited

        (model.project / critic).rename(model.project / ".claude/agents/my-critic.md")
        waiting = await model.call("step_done")
        assert waiting.data["status"] == "validators_pending", waiting.text
        assert f"Re-installed {critic}: it was missing (this run's release delivers it there)." in waiting.text
        assert "another run" not in waiting.text, waiting.text  # (before: "another run's setup had replaced it")
        await model.follow(waiting, "desk-research")

    model, state = drive(world, tmp_path, script)
    assert audited_only_run(model.project, state)["ok"] is True


def _host_restarted(
    world: ServerWorld, tmp_path: Path, between: Callable[[Path], None], then: Callable[[StandIn, str], Awaitable[None]]
) -> None:
    """A run driven to its question in one bridge; ``between`` changes the project; ``then`` in a second bridge
    (the host restarted) with the run's id, which must complete; every reply checked, its log audited."""
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()

    async def first() -> str:
        async with CheckedClient(bridge_params(project, world, state), mode="legacy") as client:
            model = stand_in(client, project)
            run: str = (await model.follow(await model.start(), "", until_question=True)).data["run"]
            check_replies(model)
            return run

    async def second() -> None:
        async with CheckedClient(bridge_params(project, world, state), mode="legacy") as client:
            model = stand_in(client, project)
            await then(model, run)
            check_replies(model)

    run = anyio.run(first)
    between(project)
    anyio.run(second)
    assert audited_only_run(project, state)["ok"] is True


def test_a_skill_changed_or_moved_in_a_run_with_no_other_is_said_as_it_is_on_resume(
    world: ServerWorld, tmp_path: Path
) -> None:
    """One run, one release, the host restarted: the skill edited, then moved away. The resume's refusal and its
    re-install say what happened to the file, not that another run's setup replaced it (there was no other run)."""

    def edit(project: Path) -> None:
        (project / SKILL).write_text((project / SKILL).read_text("utf-8") + "\nMy notes.\n", "utf-8")

    async def then(model: StandIn, run: str) -> None:
        stopped = await model.call("resume_run", {"run": run})
        refused(stopped, f"Run {run} was not resumed", SKILL, "was changed since the bridge delivered it")
        assert "another run" not in stopped.text, stopped.text  # (before: "which another run's setup replaced")

        (model.project / SKILL).rename(model.project / ".claude/my-notes.md")
        resumed = await model.call("resume_run", {"run": run})
        assert not resumed.is_error, resumed.text
        assert f"Re-installed {SKILL}: it was missing (run {run}'s release delivers it there)." in resumed.text
        assert "another run" not in resumed.text, resumed.text  # (before: "another run's setup had replaced it")
        await model.follow(resumed, "desk-research")

    _host_restarted(world, tmp_path, edit, then)


def test_a_skill_deleted_with_the_bridges_copy_gone_is_fetched_again_from_the_verifier(
    world: ServerWorld, tmp_path: Path
) -> None:
    """The skill deleted and the bridge's kept copies too (untracked files cleaned): the resume was refused, "the
    copy the bridge kept of it in .rimthan/assets is gone", though the verifier holds the run's release and serves
    the file. The bridge now fetches it from the verifier, checks its SHA-256 against the digest it delivered,
    keeps it and puts the skill back, the bytes it delivered; the run goes on."""
    delivered: dict[str, bytes] = {}

    def clean(project: Path) -> None:
        delivered[SKILL] = (project / SKILL).read_bytes()
        (project / SKILL).unlink()
        for kept in (project / STORE_DIR).iterdir():
            kept.unlink()

    async def then(model: StandIn, run: str) -> None:
        resumed = await model.call("resume_run", {"run": run})
        assert not resumed.is_error and resumed.data["run"] == run, resumed.text
        assert f"Re-installed {SKILL}: it was missing (run {run}'s release delivers it there)." in resumed.text
        assert (model.project / SKILL).read_bytes() == delivered[SKILL]
        kept = model.project / STORE_DIR / hashlib.sha256(delivered[SKILL]).hexdigest()
        assert kept.read_bytes() == delivered[SKILL]  # (kept again: a later put-back needs no verifier)
        await model.follow(resumed, "desk-research")

    _host_restarted(world, tmp_path, clean, then)


DAMAGED_RECORDS = {
    "not a digest": '{"delivered": {".claude/agents/evidence-auditor.md": "not a digest"}}',
    "nested past any decoder": '{"delivered": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "a key written twice": '{"delivered": {}, "delivered": {}}',
    "NaN": '{"delivered": {}, "releases": NaN}',
}


@pytest.mark.parametrize("damage", DAMAGED_RECORDS)
def test_a_damaged_delivery_record_refuses_the_setup_in_words(world: ServerWorld, tmp_path: Path, damage: str) -> None:
    """Nothing is guessed from a record that is not one: setup refused, nothing delivered, the record kept. A record
    nested deeper than the JSON decoder goes once ended the call in a RecursionError; one read two ways (a key
    written twice, NaN) was taken."""

    async def script(model: StandIn) -> None:
        record = model.project / RECORD_PATH
        record.parent.mkdir(parents=True)
        record.write_text(DAMAGED_RECORDS[damage], "utf-8")
        first = await model.call("start_run", {"workflow": "research", "facts": _facts(model)})
        refused(first, f"{RECORD_PATH} is damaged", "nothing was delivered", "delete it", "resume_run")
        assert [p for p in (AGENT, *OTHER_ASSETS, MANIFEST) if (model.project / p).exists()] == []
        record.unlink()
        await model.follow(await model.call("resume_run", {"run": first.data["run"]}), "desk-research")

    drive(world, tmp_path, script)


def test_a_file_larger_than_any_asset_at_an_asset_path_is_the_users_and_is_not_read(tmp_path: Path) -> None:
    """Assets are catalogue files (at most MAX_CATALOGUE_FILE_BYTES): a larger file at an asset's path can be
    neither the asset nor a delivery, so it is the user's, refused by its size before a byte of it is read."""
    files = ProjectFiles(tmp_path)
    big = tmp_path / ".claude" / "agents" / "critic.md"
    big.parent.mkdir(parents=True)
    with big.open("wb") as handle:  # sparse: its size says enough
        handle.truncate(MAX_ASSET_BYTES + 1)
    recorded = {".claude/agents/critic.md": "0" * 64}  # even a record naming the path does not make it the bridge's
    why = clash(files, ".claude/agents/critic.md", "1" * 64, recorded)
    assert why == ".claude/agents/critic.md is there and is not a file the bridge delivered (it is the user's own)"
    assert clash(files, ".claude/agents/absent.md", "1" * 64, recorded) is None
