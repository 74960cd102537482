"""A verifier that is not quite rimthan-mcp names where the bridge writes: the bridge keeps to its own policy.

A real ``rimthan-mcp serve --transport http`` sits behind the garbling
verifier (``tests/support/garbling_verifier.py``), which rewrites the setup
step it shows: an asset's install path, or the workspace manifest's path. A
real verifier refuses such paths at setup against the host's repository
policy (``repository_policy_conflict``, once written); the bridge, told them by
a verifier it cannot vouch for, must not write there either: not outside its
own policy, not into what it protects, and never over its own run files.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import pytest
from rimthan_host.delivered import STORE_DIR
from rimthan_host.standin import Reply, StandIn
from support import garbling_verifier
from support.bridge import audit, check_replies, garbled_bridge, refused, stand_in
from support.checked_client import CheckedClient
from support.servers import ServerWorld

MANIFEST = ".rimthan/workspace-manifest.json"  # the file the setup step declares: the bridge writes it
SKILL = ".claude/skills/research-decision/SKILL.md"
# (switch, the path the bridge must not write, why it refuses it)
HOSTILE_PATHS = [
    ("asset-at:conftest.py", "conftest.py", "not writable under this bridge's repository policy"),
    ("asset-at:.git/hooks/post-checkout", ".git/hooks/post-checkout", "protected by this bridge's repository policy"),
    ("manifest-at:.rimthan/delivered.json", ".rimthan/delivered.json", "the bridge's own file"),
    ("asset-at:.rimthan//assets/x", ".rimthan/assets/x", "the bridge's own file"),
]


def _completed_under(world: ServerWorld, tmp_path: Path, fault: str) -> tuple[StandIn, Path]:
    """A run the stand-in completes through a bridge whose verifier answers with ``fault`` throughout; every reply
    checked (:func:`check_replies`); the stand-in and the project."""
    with garbled_bridge(world, tmp_path) as bridge:
        bridge.switch.write_text(fault, "utf-8")

        async def go() -> StandIn:
            async with CheckedClient(bridge.params, mode="legacy") as client:
                model = stand_in(client, bridge.project)
                assert (await model.follow(await model.start(), "experiment")).data["status"] == "completed"
                return model

        model = anyio.run(go)
    check_replies(model)
    return model, bridge.project


def _files(project: Path, run: str) -> dict[str, bytes]:
    """The project's files but the bridge's lock and run files, which a new run changes; ``run``'s own kept."""
    files = {str(p.relative_to(project)): p.read_bytes() for p in sorted(project.rglob("*")) if p.is_file()}
    mine = (f".rimthan/runs/{run}.log", f".rimthan/runs/{run}.json")
    return {k: v for k, v in files.items() if k in mine or not k.startswith((".rimthan/runs/", ".rimthan/bridge."))}


def test_paths_a_verifier_names_outside_the_bridges_policy_are_never_written(
    mcp_world: ServerWorld, tmp_path: Path
) -> None:
    with garbled_bridge(mcp_world, tmp_path) as bridge:
        project, switch = bridge.project, bridge.switch

        async def go() -> tuple[StandIn, str]:
            async with CheckedClient(bridge.params, mode="legacy") as client:
                model = stand_in(client, project)
                started = await model.start()
                facts = json.loads((model.examples[model.version] / "confirmed-state.json").read_text("utf-8"))
                first = (await model.follow(started, "experiment", until_question=True)).data["run"]
                # Another run's log: a manifest declared there would end it.
                log = f".rimthan/runs/{first}.log"
                for switched, path, why in [*HOSTILE_PATHS, (f"manifest-at:{log}", log, "the bridge's own file")]:
                    before = _files(project, first)
                    switch.write_text(switched, "utf-8")
                    reply = await model.call("start_run", {"workflow": "research", "new_run": True, "facts": facts})
                    named = switched.partition(":")[2]
                    refused(reply, "nothing was written", f"{named}: {why}", "repository_policy_conflict")
                    # the bridge's own policy is the user's to change; a path no honest verifier names is the verifier's
                    own_policy = "repository policy" in why
                    assert ("allow those paths" in reply.text) is own_policy, reply.text
                    assert ("check that the bridge's verifier" in reply.text) is not own_policy, reply.text
                    assert reply.data["status"] == "workspace_refused", reply.text
                    after = _files(project, first)
                    assert after == before, switched  # nothing written but the new run's own files
                    assert not (project / path).exists() or path in before
                switch.unlink()
                resumed = await model.call("resume_run", {"run": first})
                assert f"Resumed run {first}" in resumed.text, resumed.text
                assert (await model.follow(resumed, "experiment")).data["status"] == "completed"
                return model, first

        model, first = anyio.run(go)
    check_replies(model)
    assert not (project / "conftest.py").exists() and not (project / ".git").exists()
    history = audit(project / ".rimthan" / "runs" / f"{first}.log", bridge.state)
    assert history["ok"] is True and history["steps"][-1] == "experiment"


def test_a_token_or_digest_a_verifier_writes_into_a_steps_words_never_reaches_the_model(
    mcp_world: ServerWorld, tmp_path: Path
) -> None:
    """Text and structured data alike: the step's title and instruction and the question's prompt carry the run's
    own checkpoint and a digest; the model sees neither, and the run completes."""
    model, _ = _completed_under(mcp_world, tmp_path, "token-in-words")
    assert any("[omitted]" in str(r.data.get("question")) for r in model.received)


@pytest.mark.parametrize(
    ("fault", "where"),
    [
        ('set:/step/instruction="x"', "/step/instruction is not an object"),
        ('set:/step/host_assets="x"', "/step/host_assets is not an array"),
        ("set:/step/outputs/0/path=5", "/step/outputs/0/path is not a string"),
        ("set:/release/id=7", "/release/id is not a string"),
    ],
)
def test_a_result_of_the_wrong_shape_is_no_protocol_result(
    mcp_world: ServerWorld, tmp_path: Path, fault: str, where: str
) -> None:
    """A part the bridge reads, of another type (a string for a list, a number for a path): named, nothing of it
    used or written, never an unexpected failure; without the fault the run goes on to its end."""
    with garbled_bridge(mcp_world, tmp_path) as bridge:

        async def go() -> StandIn:
            async with CheckedClient(bridge.params, mode="legacy") as client:
                model = stand_in(client, bridge.project)
                bridge.switch.write_text(fault, "utf-8")
                reply = await model.start()
                refused(reply, "not a protocol result: ", f"a result whose {where}; check --verifier-url")
                assert "unexpected" not in reply.text and not (bridge.project / ".claude").exists()
                bridge.switch.unlink()
                again = await model.start()
                assert (await model.follow(again, "experiment")).data["status"] == "completed", again.text
                return model

        model = anyio.run(go)
    check_replies(model)


def _set_up_once_resumed(
    world: ServerWorld, tmp_path: Path, fault: str, judge: Callable[[StandIn, Reply], Awaitable[None]]
) -> tuple[StandIn, Path]:
    """A run started under ``fault`` (its setup refused: ``judge`` checks the reply while the run is set aside);
    then the verifier answers as rimthan-mcp, ``resume_run`` sets the workspace up and the run completes, every
    reply checked. The stand-in and the run's log."""
    with garbled_bridge(world, tmp_path) as bridge:
        bridge.switch.write_text(fault, "utf-8")

        async def go() -> StandIn:
            async with CheckedClient(bridge.params, mode="legacy") as client:
                model = stand_in(client, bridge.project)
                reply = await model.start()
                await judge(model, reply)
                bridge.switch.unlink()
                resumed = await model.call("resume_run", {"run": reply.data["run"]})
                assert "The workspace is set up" in resumed.text, resumed.text
                assert (await model.follow(resumed, "experiment")).data["status"] == "completed", resumed.text
                return model

        model = anyio.run(go)
    check_replies(model)
    run = model.received[0].data["run"]
    assert audit(bridge.project / ".rimthan" / "runs" / f"{run}.log", bridge.state)["ok"] is True
    return model, bridge.project


def test_an_asset_larger_than_any_catalogue_file_is_not_delivered(mcp_world: ServerWorld, tmp_path: Path) -> None:
    """A 2 MiB asset whose digest agrees with it: refused before anything is written; the run waits at setup, and
    is set up and completed once the verifier answers as rimthan-mcp."""

    async def judge(model: StandIn, reply: Reply) -> None:
        refused(reply, "nothing was written", "research-brief is 2097152 bytes", "resume_run")
        assert not (model.project / ".claude").exists()

    _set_up_once_resumed(mcp_world, tmp_path, "big-asset", judge)


def test_a_schema_larger_than_any_catalogue_file_is_not_copied(mcp_world: ServerWorld, tmp_path: Path) -> None:
    """A 2 MiB JSON Schema read from the verifier costs the model its hint, and nothing of it is written."""
    model, project = _completed_under(mcp_world, tmp_path, garbling_verifier.BIG_RESOURCE)
    assert any("bytes, past any catalogue file's" in r.text for r in model.received)
    schemas = project / ".rimthan" / "schemas"
    assert not schemas.exists() or not [p for p in schemas.rglob("*") if p.is_file()]


def test_a_workspace_the_verifier_refuses_sets_the_run_aside_until_resume_run_sets_it_up_again(
    mcp_world: ServerWorld, tmp_path: Path
) -> None:
    """The verifier refuses the workspace manifest the bridge set up, for a check the bridge does not make itself
    (an honest rimthan-mcp refuses setup only for the repository policy, which the bridge checks before it writes:
    this reply is reached only through a verifier it cannot vouch for). The refused files' reply, with the run and
    the call to make; no run stays active at a step only the bridge does; once the verifier answers as rimthan-mcp,
    resume_run sets the workspace up again and the run completes."""

    async def judge(model: StandIn, setup: Reply) -> None:
        run = setup.data["run"]
        said = "  - json_schema_failed: not the manifest this verifier expects"
        head = f"Setting up the workspace failed.\nThe verifier refused the files:\n{MANIFEST}:\n{said}\n"
        todo = f"next: tell the user what the verifier refused; run {run} waits at its setup step, and once"
        refused(setup, head, todo, f"call resume_run {run}, which sets the workspace up again")
        failures, step = ["json_schema_failed"], {"id": "setup-workspace"}
        assert setup.data == {"run": run, "status": "deterministic_validation_failed", "failures": failures,
                              "step": step}  # fmt: skip
        assert (await model.call("show_step")).data["status"] == "no_run"  # set aside, in its log

    _set_up_once_resumed(mcp_world, tmp_path, "files-refused", judge)


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("conftest.py", "not writable under this bridge's repository policy"),
        (".git/hooks/post-checkout", "protected by this bridge's repository policy"),
        (".rimthan/delivered.json", "the bridge's own file"),
    ],
)
def test_step_files_a_verifier_names_outside_the_bridges_policy_are_never_named_nor_read(
    mcp_world: ServerWorld, tmp_path: Path, path: str, why: str
) -> None:
    """A step's output moved where the bridge does not write: the model is not told to write it, step_done reads
    nothing there (the delivery record would have gone to the verifier as the step's file), in the setup's words;
    once the verifier answers as rimthan-mcp the run completes."""
    with garbled_bridge(mcp_world, tmp_path) as bridge:
        project, switch = bridge.project, bridge.switch

        async def go() -> StandIn:
            async with CheckedClient(bridge.params, mode="legacy") as client:
                model = stand_in(client, project)
                at_question = await model.follow(await model.start(), "", until_question=True)
                field = at_question.data["question"]["field"]
                kept = {p: p.read_bytes() for p in project.rglob("*") if p.is_file() and "runs" not in p.parts}
                switch.write_text(f'set:/step/outputs/0/path="{path}"', "utf-8")
                moved = await model.call("answer_question", {"answer": "desk-research", "field": field})
                run = at_question.data["run"]
                # set aside as a refused setup is: step_done reads nothing, resume_run asks the verifier again
                refused(await model.call("step_done"), "No run is active")
                for reply in (moved, await model.call("resume_run", {"run": run})):
                    todo = f"\nnext: tell the user what was refused; run {run} waits at this step, and once that is"
                    refused(reply, "Nothing was read, written or checked", f"{path}: {why}", todo)
                    assert reply.text.endswith(f" fixed, call resume_run {run}."), reply.text
                    assert reply.data["failures"] == ["repository_policy_conflict"], reply.text
                    assert path not in reply.data.get("files", []), reply.data
                    own_policy = "repository policy" in why
                    assert ("allow those paths" in reply.text) is own_policy, reply.text
                assert {p: p.read_bytes() for p in kept} == kept and not (project / ".git").exists()
                switch.unlink()
                shown = await model.call("resume_run", {"run": run})
                assert (await model.follow(shown, "desk-research")).data["status"] == "completed", shown.text
                return model

        model = anyio.run(go)
    check_replies(model)
    assert not (project / "conftest.py").exists()


def test_a_kept_copy_gone_is_not_taken_from_a_verifier_serving_other_bytes(
    mcp_world: ServerWorld, tmp_path: Path
) -> None:
    """The skill and the bridge's kept copies deleted. A verifier that serves no file leaves the refusal as it was
    (put the file back, or a new run). One that serves the skill's release file with a line more: the bridge
    fetches it to put the skill back, finds its SHA-256 is not the one it delivered, and refuses the resume with
    the code (``file_digest_mismatch``), nothing kept or put back; once the verifier serves the release's bytes,
    the resume puts the skill back and the run completes."""
    with garbled_bridge(mcp_world, tmp_path) as bridge:
        project = bridge.project

        async def bridged(script: Callable[[StandIn], Awaitable[Reply]]) -> Reply:
            async with CheckedClient(bridge.params, mode="legacy") as client:
                model = stand_in(client, project)
                got = await script(model)
                check_replies(model)
                return got

        async def asked(model: StandIn) -> Reply:
            return await model.follow(await model.start(), "experiment", until_question=True)

        run = anyio.run(bridged, asked).data["run"]
        (project / SKILL).unlink()
        for kept in (project / STORE_DIR).iterdir():
            kept.unlink()

        async def resumed(model: StandIn) -> Reply:
            return await model.call("resume_run", {"run": run})

        bridge.switch.write_text(garbling_verifier.NO_FILE, "utf-8")  # (served no file: the refusal as it was)
        unserved = anyio.run(bridged, resumed)
        refused(unserved, f"Nothing was changed: {SKILL} is missing, and the copy the bridge kept of it in "
                ".rimthan/assets is gone or altered", f"then call resume_run {run} again")  # fmt: skip
        assert unserved.data == {"run": run, "status": "workspace_refused"}, unserved.data
        bridge.switch.write_text(garbling_verifier.ALTERED_FILE, "utf-8")
        stopped = anyio.run(bridged, resumed)
        assert stopped.is_error, stopped.text
        assert stopped.data == {"run": run, "status": "workspace_refused", "refused": "file_digest_mismatch"}
        assert stopped.text.startswith("Nothing was changed: file_digest_mismatch: the copy the bridge kept of "), (
            stopped.text
        )
        assert "the verifier served that file with SHA-256" in stopped.text, stopped.text
        assert not (project / SKILL).exists() and list((project / STORE_DIR).iterdir()) == []
        bridge.switch.unlink()

        async def completed(model: StandIn) -> Reply:
            back = await model.call("resume_run", {"run": run})
            assert f"Re-installed {SKILL}: it was missing" in back.text, back.text
            return await model.follow(back, "experiment")

        assert anyio.run(bridged, completed).data["status"] == "completed"
