"""A clumsy model: every bridge tool called out of order or with wrong arguments, then the run completes.

Each test drives the real ``rimthan-host serve`` over stdio with the SDK
client (the bridge starts the real verifier as its child). Every mistake
gets a tool result - an error where nothing happened - whose words say what
to do next; none holds a traceback, a token, a digest or an attestation.
After the mistakes the stand-in completes the run and ``rimthan-mcp audit``
verifies its log: a mistake never corrupts a run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rimthan_host.standin import StandIn
from rimthan_host.tools import TOOLS
from support.bridge import FIX_NEXT, audited, audited_only_run, drive, no_run, refused, write_files
from support.servers import ServerWorld, build_world

SCHEMA_COPY = ".rimthan/schemas/research-decision@1.2.0/evidence-log.schema.json"
NEW_FACTS = {"risk_tolerance": "medium", "stakeholders": ["CTO", "Backend team leads"]}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("mistakes-world"))


def test_moves_before_a_run_wrong_arguments_and_a_second_start(world: ServerWorld, tmp_path: Path) -> None:
    async def script(model: StandIn) -> None:
        no_run(await model.call("show_step"), "No run is active. Call start_run")  # (a state: + the workflows)
        moves: list[tuple[str, dict[str, Any]]] = [
            ("step_done", {}),
            ("record_verdict", {"validator": "evidence-auditor", "verdict": "pass"}),
            ("answer_question", {"answer": "desk-research", "field": "research_route"}),
            ("migrate_run", {"confirm": False}),
        ]
        for tool, arguments in moves:
            refused(await model.call(tool, arguments), "No run is active. Call start_run")
        refused(await model.call("resume_run", {"run": "run-nope"}), "no run run-nope", "start_run")
        refused(await model.call("resume_run"), "No unfinished run", "start_run")
        extra = await model.call("start_run", {"workflow": "research", "facts": {}, "mode": "fast"})
        refused(extra, "Nothing was done: unknown argument mode", "it takes workflow, facts, new_run")
        refused(await model.call("start_run", {"workflow": "research", "facts": "all"}), "facts must be an object")
        refused(await model.call("show_step", {"run": "run-1"}), "unknown argument run", "takes no arguments")
        hinted = await model.call("show_step", {"wait_for_previous": True})  # Gemini CLI's hint: taken, dropped
        no_run(hinted, "No run is active. Call start_run")
        assert not (model.project / ".rimthan").exists()  # none of it started anything
        blocked = await model.start({"objective": "x"})
        refused(blocked, "decision_owner", "call start_run again with every fact")
        assert blocked.data["needs"] == ["decision_owner"], blocked.data  # by name, as a migration's needs
        unknown = await model.call("start_run", {"workflow": "nope", "facts": {}})
        refused(unknown, "workflow_not_found", "research-decision")
        assert unknown.data == {
            "status": "refused",
            "refused": "workflow_not_found",
            "workflows": ["research-decision"],
        }

        started = await model.start()
        run = started.data["run"]
        again = await model.start()
        refused(again, f"{run} (unfinished, at step interview)", f"Run {run} is the active one", "new_run true")
        assert again.data == {"status": "refused", "unfinished": [run]}
        assert (await model.call("show_step")).data["run"] == run  # the refusal changed nothing
        assert (await model.call("show_step", {"wait_for_previous": False})).data["run"] == run

        final = await model.follow(started, "desk-research")
        assert final.data["status"] == "completed"
        after_end: list[tuple[str, dict[str, Any]]] = [
            ("step_done", {}),
            ("record_verdict", {"validator": "decision-critic", "verdict": "pass"}),
            ("answer_question", {"answer": "experiment", "field": "research_route"}),
            ("migrate_run", {"confirm": True}),
        ]
        for tool, arguments in after_end:
            refused(await model.call(tool, arguments), f"Run {run} is complete", "start_run")
        refused(await model.call("resume_run", {"run": run}), f"Run {run} is already complete", "start_run")
        shown = await model.call("show_step")
        assert not shown.is_error and f"Run {run} is complete." in shown.text

    model, state = drive(world, tmp_path, script)
    history = audited_only_run(model.project, state)
    assert history["steps"][-1] == "desk-research"


def test_file_mistakes_name_the_file_the_schema_copy_and_the_finding(world: ServerWorld, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()

    async def script(model: StandIn) -> None:
        at_question = await model.follow(await model.start(), "", until_question=True)
        refused(await model.call("step_done"), "waiting for an answer")
        step = await model.call("answer_question", {"answer": "desk-research", "field": "research_route"})
        log, md = step.data["files"]
        refused(await model.call("record_verdict", {"validator": "evidence-auditor", "verdict": "pass"}),
                 "No validator is waiting", "not been checked yet", "step_done")  # fmt: skip
        missing = await model.call("step_done")
        refused(missing, f"{log} does not exist", f"{md} does not exist", str(model.project), "step_done again")
        assert missing.text.endswith(f"\n{FIX_NEXT} desk-research."), missing.text
        write_files(model, step, md)
        write_files(model, step, log, "  \n")
        refused(await model.call("step_done"), f"{log} is empty", "step_done again")
        write_files(model, step, log, "{not json")
        invalid = await model.call("step_done")
        refused(invalid, f"{log} (its JSON Schema: {SCHEMA_COPY}", "json_parse_failed", "is not valid JSON")
        assert invalid.data["status"] == "deterministic_validation_failed"
        # a refusal of the files ends, as every refusal does, with the call to make (before: no next: line)
        assert invalid.text.endswith(f"\n{FIX_NEXT} desk-research."), invalid.text
        assert invalid.data["step"] == {"id": "desk-research"}, invalid.data
        assert (model.project / SCHEMA_COPY).is_file()  # the copy the words name is there to read
        write_files(model, step, log, json.dumps({"route": "desk-research", "sources": "none"}))
        wrong = await model.call("step_done")
        refused(wrong, SCHEMA_COPY, "json_schema_failed", "'decision_question' is a required property")
        assert "at /sources" in wrong.text  # the pointer to the wrong value
        assert "unchanged" not in wrong.text, wrong.text  # (the file changed since "{not json")
        # the same bytes again: said so (before, the second refusal read as the first)
        again = await model.call("step_done")
        refused(again, "json_schema_failed", f"\n{log} is unchanged since the last attempt: the verifier refused")
        assert again.text.endswith(f"\n{FIX_NEXT} desk-research."), again.text
        assert md not in again.text.split("The verifier refused the files:")[1], again.text  # (only the refused file)

        (outside / "evidence-log.json").write_text(model.compose(log), "utf-8")
        (model.project / log).unlink()
        (model.project / log).symlink_to(outside / "evidence-log.json")
        refused(await model.call("step_done"), f"{log} is a symbolic link", f"write the file itself at {log}")
        research = model.project / log.split("/")[0]
        research.rename(outside / "research")
        research.symlink_to(outside / "research")
        escaped = await model.call("step_done")
        refused(escaped, "is a symbolic link, so", "outside the project", "Replace research with a real directory")
        research.unlink()
        write_files(model, step, None)
        assert (await model.call("step_done")).data["status"] == "validators_pending"
        final = await model.follow(await model.call("show_step"), "desk-research")
        assert final.data["status"] == "completed" and not at_question.is_error

    model, state = drive(world, tmp_path, script)
    assert audited_only_run(model.project, state)["steps"][-1] == "desk-research"


def test_verdict_mistakes_leave_the_round_intact(world: ServerWorld, tmp_path: Path) -> None:
    async def script(model: StandIn) -> None:
        await model.follow(await model.start(), "", until_question=True)
        step = await model.call("answer_question", {"answer": "desk-research", "field": "research_route"})
        write_files(model, step)
        pending = await model.call("step_done")
        assert [v["name"] for v in pending.data["validators"]] == ["evidence-auditor", "decision-critic"]
        unknown = await model.call("record_verdict", {"validator": "fact-checker", "verdict": "pass"})
        refused(unknown, "fact-checker is not a validator of this step", "evidence-auditor (subagent evidence-auditor)")
        other = await model.call("record_verdict", {"validator": "evidence-auditor@9.9.9", "verdict": "pass"})
        refused(other, "evidence-auditor@9.9.9 is not a validator of this step (it runs evidence-auditor@1.0.0)")
        for verdict in ("passed", "PASS", "looks good"):
            reply = await model.call("record_verdict", {"validator": "evidence-auditor", "verdict": verdict})
            refused(reply, f'verdict must be exactly "pass" or "fail", not "{verdict}"', "Call record_verdict again")
        bare_fail = await model.call("record_verdict", {"validator": "evidence-auditor", "verdict": "fail"})
        refused(bare_fail, "a fail verdict needs findings", 'verdict "fail" and findings')
        one = {"validator": "evidence-auditor", "verdict": "fail", "findings": "E2 has no URL."}
        refused(await model.call("record_verdict", one), "findings must be an array")
        assert not (await model.call("record_verdict", {"validator": "evidence-auditor", "verdict": "pass"})).is_error
        twice = await model.call(
            "record_verdict", {"validator": "evidence-auditor", "verdict": "fail", "findings": ["x"]}
        )
        refused(twice, "evidence-auditor already has a verdict (pass); it stands", "decision-critic (subagent")
        refused(await model.call("step_done"), "validators still wait", "decision-critic")
        shown = await model.call("show_step")
        assert "Validator decision-critic (subagent decision-critic), version 1.0.0. Instruction:" in shown.text
        assert "evidence-auditor" not in [v["name"] for v in shown.data["validators"]]

        md = model.project / step.data["files"][1]
        md.write_text(md.read_text("utf-8") + "\nOne more line.\n", "utf-8")  # edited while validators ran
        stale = await model.call("record_verdict", {"validator": "decision-critic", "verdict": "pass"})
        refused(stale, f"{step.data['files'][1]} changed after step_done", "Call step_done")
        rechecked = await model.call("step_done")
        assert [v["name"] for v in rechecked.data["validators"]] == ["evidence-auditor", "decision-critic"]
        final = await model.follow(rechecked, "desk-research")
        assert final.data["status"] == "completed"

    model, state = drive(world, tmp_path, script)
    audited_only_run(model.project, state)


def test_question_and_migration_mistakes(world: ServerWorld, tmp_path: Path) -> None:
    async def script(model: StandIn) -> None:
        at_question = await model.follow(await model.start(), "", until_question=True)
        offered = at_question.data["migration"]["to_release"]
        not_offered = await model.call("answer_question", {"answer": "Desk research", "field": "research_route"})
        refused(not_offered, "branch_no_match: nothing was recorded: 'Desk research' is not one of the choices",
                "next: ask the user to choose one of desk-research, user-interviews, experiment")  # fmt: skip
        refused(await model.call("answer_question", {"answer": [3]}), "answer must be a string, a number or a boolean")
        elsewhere = {"to_release": "research-decision@9.9.9", "confirm": True}
        refused(await model.call("migrate_run", elsewhere), f"the release offered is {offered}", "without to_release")
        refused(await model.call("migrate_run", {"confirm": "yes"}), "confirm must be a boolean")
        refused(await model.call("migrate_run", {"confirm": True}), "risk_tolerance", "pass it as facts")
        preview = await model.call("migrate_run", {"confirm": False, "facts": NEW_FACTS})
        assert not preview.is_error and "restarts at setup-workspace" in preview.text
        moved = await model.call("migrate_run", {"confirm": True, "facts": NEW_FACTS})
        assert "Migrated run" in moved.text, moved.text
        refused(await model.call("migrate_run", {"confirm": False}), "no newer release is offered", "show_step")
        model.version = "1.3.0"
        final = await model.follow(moved, "desk-research")
        assert final.data["status"] == "completed"

    model, state = drive(world, tmp_path, script)
    assert len(audited_only_run(model.project, state)["migrations"]) == 1


def test_two_runs_in_one_project_switch_clearly_and_both_audit(world: ServerWorld, tmp_path: Path) -> None:
    runs: list[str] = []

    async def script(model: StandIn) -> None:
        first = await model.follow(await model.start(), "experiment")
        runs.append(first.data["run"])
        second = await model.follow(await model.start(), "", until_question=True)  # after a completed run: fine
        runs.append(second.data["run"])
        assert f"Run {runs[1]} (1.2.0): step select-route" in (await model.call("show_step")).text
        refused(await model.start(), f"{runs[1]} (unfinished, at step select-route)", "new_run true")
        refused(await model.call("resume_run", {"run": runs[0]}), f"Run {runs[0]} is already complete")
        third = await model.call("start_run", {"workflow": "research", "facts": _facts(model), "new_run": True})
        runs.append(third.data["run"])
        assert f"Run {runs[1]} is set aside unfinished: resume_run {runs[1]}" in third.text
        back = await model.call("resume_run", {"run": runs[1]})
        assert f"Resumed run {runs[1]}" in back.text and f"Run {runs[2]} is set aside" in back.text, back.text
        assert back.data["run"] == runs[1] and back.data["step"]["id"] == "select-route"
        done = await model.follow(back, "user-interviews")
        assert done.data["run"] == runs[1] and done.data["status"] == "completed"
        latest = await model.call("resume_run")  # the latest unfinished: the third
        assert latest.data["run"] == runs[2], latest.text
        assert (await model.follow(latest, "desk-research")).data["status"] == "completed"

    model, state = drive(world, tmp_path, script)
    routes = {runs[0]: "experiment", runs[1]: "user-interviews", runs[2]: "desk-research"}
    for run, route in routes.items():
        assert route in audited(model.project, state, run)["steps"]


def _facts(model: StandIn) -> dict[str, object]:
    facts: dict[str, object] = json.loads((model.examples["1.2.0"] / "confirmed-state.json").read_text("utf-8"))
    return facts


def test_the_tool_definitions_stay_within_6_kb() -> None:
    size = len(
        json.dumps(
            [t.model_dump(by_alias=True, include={"name", "description", "input_schema"}) for t in TOOLS],
            separators=(",", ":"),
        ).encode("utf-8")
    )
    assert size <= 6000, size
    for tool in TOOLS:
        assert tool.input_schema.get("additionalProperties") is False  # a stray key is refused, not ignored
