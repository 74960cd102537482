"""What the model hands each validator's subagent: the files by artifact id and path, and the confirmed state.

The delivered subagents expect "a list of artifacts (artifact id, path, ...)
and the confirmed state values" and fail a round without the artifact list;
the validators' checks compare the files against the confirmed objective and
options. The bridge said only "give it the instruction text and the files",
naming neither, so a model in a new context (after a restart) had nothing
to give. A real ``rimthan-host serve`` with its real verifier child.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rimthan_host.standin import StandIn
from support.bridge import audited_only_run, drive, write_files
from support.releases import packaged_source
from support.servers import ServerWorld, build_world

SKILL = Path(__file__).parents[2] / "host/claude-plugin/rimthan/skills/rimthan-run/SKILL.md"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("brief-world"))


def test_validators_waiting_name_the_files_and_the_confirmed_state(world: ServerWorld, tmp_path: Path) -> None:
    facts = json.loads((packaged_source("1.2.0") / "examples" / "confirmed-state.json").read_text("utf-8"))

    async def script(model: StandIn) -> None:
        await model.follow(await model.start(), "", until_question=True)
        step = await model.call("answer_question", {"answer": "desk-research", "field": "research_route"})
        missing = await model.call("step_done", {"step": step.data["step"]["id"]})
        assert missing.data["status"] == "files_missing", missing.text
        assert missing.data["step"] == {"id": "desk-research"}  # an object, as in every result (it was the bare id)
        said = f"Write these files in the project directory {model.project} (each path is relative to it)"
        assert said in step.text, step.text  # a host whose working directory is not the project (Claude Desktop)
        assert "Where it says to hash files, attest them or compare or keep digests, do not" in step.text
        write_files(model, step)
        pending = await model.call("step_done", {"step": step.data["step"]["id"]})
        assert pending.data["status"] == "validators_pending", pending.text
        assert pending.data["files"] == ["research/evidence-log.json", "research/findings.md"]
        listed = "evidence-log (research/evidence-log.json), findings (research/findings.md)"
        assert f"The files (artifact id and path; the subagent reads them itself): {listed}." in pending.text
        assert "has no digest to compare" in pending.text
        assert facts["objective"] in pending.text and all(option in pending.text for option in facts["options"])
        assert "research_route" in pending.text  # confirmed mid-run, too
        report = {"severity": "error", "artifact_id": "evidence-log", "message": "/gaps: none listed."}
        as_is = await model.call(
            "record_verdict", {"validator": "evidence-auditor", "verdict": "fail", "findings": [report]}
        )
        said = "findings.0 must be a string, not an object: each finding is one sentence, e.g. the message of a finding"
        assert as_is.is_error and said in as_is.text, as_is.text  # the subagent's report's findings, passed as they are
        served = {t.name: t.description or "" for t in (await model.client.list_tools()).tools}
        assert "the step's files, the confirmed state" in served["record_verdict"]  # the tool says it too
        skill = " ".join(SKILL.read_text().split())
        assert "the files by artifact id and path, and the confirmed state" in skill
        assert "and in `facts` every field the user confirmed in the step" in skill  # as step_done's description
        assert "never ask the user for a checkpoint token" in skill  # the release's prompt asks for one
        shown = await model.call("show_step")
        assert shown.data["files"] == pending.data["files"] and listed in shown.text  # after a restart, too
        await model.follow(pending, "desk-research")

    model, state = drive(world, tmp_path, script)
    audited_only_run(model.project, state)
