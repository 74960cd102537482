"""Files a JSON output names by path and SHA-256: the bridge computes the digests, never the model.

research-decision 1.3.0's decision record binds the route step's two files
in ``basis`` by path and sha256. A real ``rimthan-host serve`` serving 1.3.0
(its verifier the real child): a model that leaves sha256 out gets it filled
in from disk; one that writes a wrong digest, or names evidence edited after
it was validated, is refused before anything is sent. The log is audited.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import StdioServerParameters
from rimthan_host.runlog import RunLog
from rimthan_host.standin import Reply, StandIn
from support.bridge import FIX_NEXT, audit, stand_in
from support.checked_client import CheckedClient
from support.processes import serve_options
from support.servers import ServerWorld, build_world

RECORD = "research/decision-record.json"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("named-files-world"))


def _params(project: Path, world: ServerWorld, state: Path) -> StdioServerParameters:
    options = serve_options(world.built["1.3.0"], world.trust, state, log_level="warning")
    host = str(Path(sys.executable).parent / "rimthan-host")
    return StdioServerParameters(command=host, args=["serve", "--project", str(project), "--", *options])


async def _to_decision_record(model: StandIn) -> Reply:
    reply = await model.start()
    for _ in range(40):
        assert not reply.is_error, reply.text
        step = (reply.data.get("step") or {}).get("id")
        if step == "decision-record" and reply.data.get("status") != "validators_pending":
            return reply
        if reply.data.get("question"):
            reply = await model.call("answer_question", {"answer": "desk-research", "field": "research_route"})
        elif reply.data.get("status") == "validators_pending":
            for v in reply.data["validators"]:
                reply = await model.call("record_verdict", {"validator": v["name"], "verdict": "pass"})
        else:
            for path in reply.data.get("files") or []:
                (model.project / path).parent.mkdir(parents=True, exist_ok=True)
                (model.project / path).write_text(model.compose(path), "utf-8")
            reply = await model.call("step_done", {"step": step})
    raise AssertionError("the run did not reach decision-record")


def _record(model: StandIn, **sha: Any) -> dict[str, Any]:
    record: dict[str, Any] = json.loads(model.compose(RECORD))
    for entry in record["basis"]:
        entry.pop("sha256", None)
        if entry["artifact_id"] in sha:
            entry["sha256"] = sha[entry["artifact_id"]]
    return record


async def _naming(model: StandIn, path: str) -> Reply:
    """step_done with the decision record's first ``basis`` entry naming ``path`` (its sha256 left out)."""
    record = _record(model)
    record["basis"][0]["path"] = path
    (model.project / RECORD).write_text(json.dumps(record), "utf-8")
    return await model.call("step_done", {"step": "decision-record"})


def test_the_bridge_fills_in_and_checks_the_digests_of_the_files_a_record_names(
    world: ServerWorld, tmp_path: Path
) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()
    expected = {e["path"]: e["sha256"] for e in json.loads(
        (Path(__file__).parents[2] / "catalogues/research-decision/1.3.0/examples/decision-record.json").read_text()
    )["basis"]}  # fmt: skip

    async def go() -> str:
        async with CheckedClient(_params(project, world, state), mode="legacy") as client:
            model = stand_in(client, project)
            model.version = "1.3.0"
            at = await _to_decision_record(model)
            assert "leave sha256 out" in at.text, at.text  # the step's reply says who computes digests
            run = str(at.data["run"])
            logged = RunLog(project, run).tokens()
            (project / "research/decision-memo.md").write_text(model.compose("research/decision-memo.md"), "utf-8")

            (project / RECORD).write_text(json.dumps(_record(model, **{"evidence-log": "0" * 64})), "utf-8")
            wrong = await model.call("step_done", {"step": "decision-record"})
            assert wrong.is_error and wrong.data["failures"] == ["file_digest_mismatch"], wrong.text
            assert "basis/0" in wrong.text and "delete the sha256 member" in wrong.text

            missing = await _naming(model, "research/no-such-file.md")
            assert missing.is_error and missing.data["failures"] == ["file_missing"], missing.text
            assert "names research/no-such-file.md, which cannot be read" in missing.text, missing.text

            absolute = _record(model)  # a model that names the file it wrote by the path its own tools use
            absolute["basis"][0]["path"] = str(project / absolute["basis"][0]["path"])
            (project / RECORD).write_text(json.dumps(absolute), "utf-8")
            spelled = await model.call("step_done", {"step": "decision-record"})
            assert spelled.is_error and spelled.data["failures"] == ["path_unsafe"], spelled.text
            said = f"path {project}/research/evidence-log.json is absolute; write it as research/evidence-log.json"
            assert said in spelled.text and "escapes" not in spelled.text, spelled.text  # it is inside the project

            held = await _naming(model, "research/evidence-log.json\u0000.md")  # the OS raised ValueError: run dropped
            assert held.is_error and held.data["failures"] == ["path_unsafe"], held.text
            assert "evidence-log.json\\x00.md holds a NUL character" in held.text, held.text

            findings = project / "research/findings.md"
            validated = findings.read_bytes()
            findings.write_bytes(validated + b"\nOne more finding, added after the auditor passed the file.\n")
            (project / RECORD).write_text(json.dumps(_record(model)), "utf-8")
            edited = await model.call("step_done", {"step": "decision-record"})
            assert edited.is_error and edited.data["failures"] == ["input_binding_mismatch"], edited.text
            assert "research/findings.md (findings) changed after this run validated it" in edited.text
            assert RunLog(project, run).tokens() == logged  # nothing was sent for either
            findings.write_bytes(validated)

            filled = await model.call("step_done", {"step": "decision-record"})
            assert filled.data["status"] == "validators_pending", filled.text
            assert "Filled in the SHA-256 of the file named in research/decision-record.json at /basis/0" in filled.text
            on_disk = json.loads((project / RECORD).read_text("utf-8"))
            assert {e["path"]: e["sha256"] for e in on_disk["basis"]} == expected
            for v in filled.data["validators"]:
                done = await model.call("record_verdict", {"validator": v["name"], "verdict": "pass"})
            assert done.data["status"] == "completed", done.text
            assert model.leaks() == []
            return run

    run = anyio.run(go)
    history = audit(RunLog(project, run).log_path, state)
    assert history["ok"] is True and history["steps"][-1] == "decision-record"


def test_evidence_edited_while_the_bridge_was_down_is_refused_after_a_resume(
    world: ServerWorld, tmp_path: Path
) -> None:
    """The run's state file keeps each validated file's id, path and digest, so a bridge started again still
    refuses a record naming evidence edited since it was validated. Before, that memory was the first bridge's
    only: the second sent the record. A state file an older bridge wrote (no ``validated``) still resumes."""
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()
    findings = project / "research/findings.md"

    async def first() -> tuple[str, bytes]:
        async with CheckedClient(_params(project, world, state), mode="legacy") as client:
            model = stand_in(client, project)
            model.version = "1.3.0"
            at = await _to_decision_record(model)
            return str(at.data["run"]), findings.read_bytes()

    run, validated = anyio.run(first)
    findings.write_bytes(validated + b"\nOne more finding, added while the bridge was down.\n")
    logged = RunLog(project, run).tokens()

    async def second(expect: str) -> str:
        async with CheckedClient(_params(project, world, state), mode="legacy") as client:
            model = stand_in(client, project)
            model.version = "1.3.0"
            resumed = await model.call("resume_run", {"run": run})
            assert resumed.data["step"]["id"] == "decision-record", resumed.text
            (project / "research/decision-memo.md").write_text(model.compose("research/decision-memo.md"), "utf-8")
            (project / RECORD).write_text(json.dumps(_record(model)), "utf-8")
            done = await model.call("step_done", {"step": "decision-record"})
            assert (done.data.get("failures") or [done.data["status"]]) == [expect], done.text
            return done.text

    said = anyio.run(second, "input_binding_mismatch")
    assert "research/findings.md (findings) changed after this run validated it" in said
    assert RunLog(project, run).tokens() == logged  # nothing was sent

    files = json.loads(RunLog(project, run).state_path.read_text("ascii"))
    for entry in files["states"]:
        del entry["validated"]  # as a bridge before evidence was kept wrote it: resumed, nothing to compare
    RunLog(project, run).state_path.write_text(json.dumps(files), "ascii")
    anyio.run(second, "validators_pending")


ALIASES = {  # how a record may name edited evidence; each was sent, its digest filled in from the edited file
    "a path spelled another way": ("findings", "./research/findings.md", "path_unsafe"),
    "a doubled slash": ("findings", "research//findings.md", "path_unsafe"),
    "another artifact id": ("notes", "research/findings.md", "input_binding_mismatch"),
    "no artifact id": (None, "research/findings.md", "input_binding_mismatch"),
    "the id at another file": ("findings", "research/decision-memo.md", "input_binding_mismatch"),
    "a path through ..": ("findings", "research/../research/findings.md", "path_unsafe"),
    "a symbolic link out of the project": ("findings", "research/link.md", "path_unsafe"),
}


def test_edited_evidence_named_another_way_is_still_refused(world: ServerWorld, tmp_path: Path) -> None:
    """The check of evidence edited since it was validated went by the artifact id and the path exactly as written:
    a record naming the validated id at another file was sent, that file's digest filled in under the id; one naming
    the file another way (``./``, ``//``, another id, none) was sent for this release's schema to refuse, its
    digests filled in first. Now the bridge refuses each before anything is sent: a path not written as the project
    path it names, through ``..`` or a symbolic link is ``path_unsafe`` (was ``file_missing``); a validated file is
    found by its id or its path, and an id at another path than the one validated is ``input_binding_mismatch``."""
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()
    (tmp_path / "outside.md").write_text("outside the project\n", "utf-8")
    (project / "research").mkdir()
    (project / "research/link.md").symlink_to(tmp_path / "outside.md")

    async def go() -> None:
        async with CheckedClient(_params(project, world, state), mode="legacy") as client:
            model = stand_in(client, project)
            model.version = "1.3.0"
            await _to_decision_record(model)
            (project / "research/decision-memo.md").write_text(model.compose("research/decision-memo.md"), "utf-8")
            findings = project / "research/findings.md"
            findings.write_bytes(findings.read_bytes() + b"\nAdded after the auditor passed the file.\n")
            for name, (artifact_id, path, code) in ALIASES.items():
                record = _record(model)
                entry = next(e for e in record["basis"] if e["artifact_id"] == "findings")
                entry["path"] = path
                entry.pop("artifact_id")
                entry.update({"artifact_id": artifact_id} if artifact_id else {"sha256": ""})  # (either: a binding)
                (project / RECORD).write_text(json.dumps(record), "utf-8")
                said = await model.call("step_done", {"step": "decision-record"})
                assert said.is_error and said.data.get("failures") == [code], (name, said.text)
                assert said.data["status"] == "files_refused", (name, said.text)  # the bridge's: nothing was sent
                assert said.data["step"] == {"id": "decision-record"}  # as every result gives a step
                assert said.text.endswith(f"\n{FIX_NEXT} decision-record."), said.text  # the call to make

    anyio.run(go)
