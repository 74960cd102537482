"""The host kit's library: symlink-free files, asset delivery, reports, and the run log audit accepts.

Runs go through real engine modules over real signed releases
(support.engines); the run log is checked by ``rimthan-mcp audit`` itself.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from rimthan_host import Finding, Question, RunResult, StepOutput, ValidationRound, Validator
from rimthan_host.confirmations import BY_ELICITATION, ConfirmedStateBook
from rimthan_host.harness import AuthorContext, HarnessError, Review, ReviewFinding, WorkflowHarness
from rimthan_host.project_files import ProjectFiles
from rimthan_host.protocol import HostProfile, NotAProtocolResult, protocol_result
from rimthan_host.reports import findings_problem, validator_payload, validator_report
from rimthan_host.runlog import RunLog, list_runs
from rimthan_host.session import HostSession
from rimthan_host.workspace import deliver_assets
from rimthan_workflow_mcp.cli import main as mcp_main
from rimthan_workflow_registry.canonical import digest_value
from rimthan_workflow_registry.limits import MAX_FINDING_CHARS, MAX_NAME_CHARS
from support.engines import Engines, ExamplesScenario, TickingClock, drive, example_state, make_engines, run
from support.releases import packaged_source
from support.servers import build_world, scenario


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory) -> Engines:
    return make_engines(tmp_path_factory.mktemp("hostlib"), TickingClock())


def test_confirmation_records_digest_time_and_how(tmp_path: Path) -> None:
    book = ConfirmedStateBook(lambda: 1234.9)
    book.confirm("research_route", "experiment", BY_ELICITATION)
    assert book.projection() == {
        "state": {"research_route": "experiment"},
        "confirmations": {
            "research_route": {
                "value_digest": digest_value("experiment"),
                "confirmed_at": 1234,
                "confirmed_by": BY_ELICITATION,
            }
        },
    }
    assert ConfirmedStateBook.from_projection(book.projection()).projection() == book.projection()


def test_files_refuse_symlinks_and_escapes_and_attest_what_was_there(tmp_path: Path) -> None:
    files = ProjectFiles(tmp_path)
    first = files.write("a", "research/a.md", "text/markdown", "one\n")
    assert first.write == "created" and first.sha256 == hashlib.sha256(b"one\n").hexdigest()
    assert files.write("a", "research/a.md", "text/markdown", "two\n").write == "replaced"
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "linked")
    with pytest.raises(HarnessError, match="symbolic link"):
        files.write("b", "linked/b.md", "text/markdown", "x")
    with pytest.raises(HarnessError, match="escapes"):
        files.write("b", "../b.md", "text/markdown", "x")
    os.symlink(tmp_path / "research" / "a.md", tmp_path / "research" / "c.md")
    with pytest.raises(HarnessError, match="symbolic link"):
        files.attest("c", "research/c.md", "text/markdown", existed_before=True, max_bytes=1024)
    with pytest.raises(HarnessError, match="not been written"):
        files.attest("d", "research/d.md", "text/markdown", existed_before=False, max_bytes=1024)
    with pytest.raises(HarnessError, match="research/a.md is 4 bytes; this step takes at most 3 bytes"):
        files.attest("a", "research/a.md", "text/markdown", existed_before=True, max_bytes=3)
    assert files.attest("a", "research/a.md", "text/markdown", existed_before=True, max_bytes=4).text == "two\n"


def test_an_asset_whose_text_breaks_its_pin_is_not_delivered(engines: Engines, tmp_path: Path) -> None:
    kit = engines.harness("pins")
    started = engines.wire("1.2.0").start_workflow(
        {"workflow": "research", "confirmed_state": kit.confirm(example_state("1.2.0")), "host": kit.host()}
    )
    step = started["step"]
    delivered = deliver_assets(ProjectFiles(tmp_path / "ok"), step)
    assert [d["sha256"] for d in delivered] == [a["sha256"] for a in step["host_assets"]]
    bad = {**step, "host_assets": [{**step["host_assets"][0], "text": step["host_assets"][0]["text"] + " "}]}
    with pytest.raises(HarnessError, match="pinned sha256"):
        deliver_assets(ProjectFiles(tmp_path / "bad"), bad)
    assert not (tmp_path / "bad").exists()


def test_a_report_is_bound_to_the_instruction_and_the_artifacts(engines: Engines, tmp_path: Path) -> None:
    step = {"validators": [{"id": "v", "version": "1.0.0", "instruction": {"text": "check it"}}]}
    summary = {"validator_id": "v", "version": "1.0.0", "instruction_digest": "sha256:" + "0" * 64}
    with pytest.raises(HarnessError, match="does not match the bundle digest"):
        validator_payload(step, summary)
    summary["instruction_digest"] = "sha256:" + hashlib.sha256(b"check it").hexdigest()
    assert validator_payload(step, summary)["id"] == "v"
    written = ProjectFiles(tmp_path).write("a", "a.md", "text/markdown", "x")
    report = validator_report(summary, "fail", [{"severity": "error", "message": "m"}], [written], HostProfile())
    assert report["input_artifacts"] == {"a": written.sha256} and report["outcome"] == "fail"
    with pytest.raises(HarnessError, match="pass or fail"):
        validator_report(summary, "maybe", [], [written], HostProfile())


class LongWinded(ExamplesScenario):
    """A review whose one finding is the subagent's whole answer: past MAX_FINDING_CHARS."""

    def review(self, ctx: Any) -> Review:
        return Review("fail", (ReviewFinding("x" * (MAX_FINDING_CHARS + 1)),))


class TypedParts(ExamplesScenario):
    """A scenario that keeps what the harness gives it: the question, each author's context."""

    def __init__(self, route: str, fail_once: frozenset[str]) -> None:
        super().__init__(route, fail_once)
        self.questions: list[Any] = []
        self.authored: list[AuthorContext] = []

    def answer(self, question: Question, workflow_version: str) -> Any:
        self.questions.append(question)
        return super().answer(question, workflow_version)

    def author(self, ctx: Any) -> str:
        self.authored.append(ctx)
        return super().author(ctx)


def test_a_scenario_is_given_typed_parts_and_its_typed_findings_reach_the_verifier(engines: Engines) -> None:
    """The question is a ``Question``, the output a ``StepOutput``, and a repair's findings the ``Finding``s the
    verifier returned for the ``ReviewFinding`` the failed review gave (its message, severity and validator)."""
    typed = TypedParts("desk-research", frozenset({"evidence-auditor@1.1.0"}))
    driven = drive(engines, "1.3.0", "desk-research", name="typed-parts", scenario=typed)
    assert driven.harness.record.final is not None and driven.harness.record.final["status"] == "completed"
    assert typed.questions and all(type(q) is Question for q in typed.questions)
    assert {q.field for q in typed.questions} == {"research_route"}
    assert typed.authored and all(type(c.output) is StepOutput for c in typed.authored)
    repairs = [c for c in typed.authored if c.attempt == 1]
    assert repairs, [(c.step_id, c.attempt) for c in typed.authored]
    for ctx in repairs:
        assert ctx.findings and all(type(f) is Finding for f in ctx.findings)
        said = [(f.validator, f.severity, f.message) for f in ctx.findings]
        assert said == [
            ("evidence-auditor@1.1.0", "error", "evidence-auditor@1.1.0: scripted failure to exercise repair")
        ]
    assert all(not c.findings for c in typed.authored if c.attempt == 0)


def test_a_review_finding_is_sent_as_its_wire() -> None:
    assert ReviewFinding("no source").wire == {"severity": "error", "message": "no source"}
    said = ReviewFinding("thin", severity="warning", artifact_id="decision").wire
    assert said == {"severity": "warning", "message": "thin", "artifact_id": "decision"}


def test_a_verdict_the_verifier_would_refuse_is_not_recorded(engines: Engines) -> None:
    with pytest.raises(HarnessError) as refused:
        drive(engines, "1.3.0", "desk-research", name="long-winded", scenario=LongWinded("desk-research"))
    assert str(refused.value) == (
        "the verifier would refuse the verdict of evidence-auditor@1.1.0: finding 1 is "
        f"{MAX_FINDING_CHARS + 1} characters, past the {MAX_FINDING_CHARS} a finding may hold"
    )


@pytest.mark.parametrize(
    ("finding", "said"),
    [
        (
            {"severity": "error", "message": "No source.\n" * MAX_FINDING_CHARS},
            f"finding 1 is {11 * MAX_FINDING_CHARS} characters, past the {MAX_FINDING_CHARS} a finding may hold",
        ),
        (
            {"severity": "error", "message": "No source.", "artifact_id": "x" * (MAX_NAME_CHARS + 1)},
            f"finding 1/artifact_id is {MAX_NAME_CHARS + 1} characters, past the {MAX_NAME_CHARS} a finding may hold",
        ),
    ],
)
def test_an_over_long_finding_gets_one_line_naming_the_bound(finding: dict[str, str], said: str) -> None:
    """The verifier's ``finding`` contract is the one check: its length bound said in one line, the text not echoed."""
    assert findings_problem("fail", [finding], []) == said


class SaysPassWithAnError(ExamplesScenario):
    """A review that says pass but lists an error: the verifier refuses it as ``report_contradictory``."""

    def review(self, ctx: Any) -> Review:
        return Review("pass", (ReviewFinding("the decision has no evidence"),))


def test_a_pass_verdict_with_an_error_finding_is_not_recorded(engines: Engines) -> None:
    with pytest.raises(HarnessError) as refused:
        drive(engines, "1.3.0", "desk-research", name="says-pass", scenario=SaysPassWithAnError("desk-research"))
    assert str(refused.value) == (
        "the verifier would refuse the verdict of evidence-auditor@1.1.0: a pass carries an error finding "
        "(an error fails the validator): send fail, or make it a warning"
    )


def test_the_run_log_of_a_repaired_run_passes_rimthan_mcp_audit(engines: Engines, tmp_path: Path) -> None:
    project = tmp_path / "project"
    log = RunLog(project, "run-audited")
    harness = WorkflowHarness(
        engines.call("1.2.0"),
        ExamplesScenario("experiment", frozenset({"decision-critic@1.0.0"})),
        project_dir=project,
        clock=engines.clock,
        run_log=log,
    )

    async def go() -> RunResult:
        return await harness.run(await harness.start("research", initial_version="1.2.0"))

    assert run(go()).status == "completed"
    assert list_runs(project) == ["run-audited"]
    assert log.tokens() == harness.record.checkpoints
    saved = log.load_state()
    assert saved["completed"] is True and saved["confirmed_state"] == harness.state.projection()
    keys = tmp_path / "checkpoint-keys.json"
    engines.keyring.save(keys)
    out = CliRunner().invoke(mcp_main, ["audit", str(log.log_path), "--checkpoint-keys", str(keys), "--json"])
    assert out.exit_code == 0, out.output
    history = json.loads(out.output)
    assert history["ok"] is True and history["steps"] == harness.record.steps_visited
    assert len(history["checkpoints"]) == len(log.tokens())
    releases = ["--releases-dir", str(engines.work / "releases"), "--trust", str(engines.work / "trust")]
    told = CliRunner().invoke(
        mcp_main, ["audit", str(log.log_path), "--checkpoint-keys", str(keys), *releases, "--json"]
    )
    assert told.exit_code == 0, told.output
    document = json.loads(told.output)
    assert document["outcome"]["outcome"] == "completed" and document["outcome"]["step"] == history["final"]["step"]
    assert [r["findings"] for r in document["final"]["failed_validation_rounds"]] == [1]


def test_run_ids_are_plain_names(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match="run id"):
        RunLog(tmp_path, "../escape")
    with pytest.raises(HarnessError, match="run id"):
        RunLog(tmp_path, "run-1\n")  # re's "$" would take it: the log would be "run-1\n.log"


def test_the_documented_library_example_runs_as_written(tmp_path: Path) -> None:
    """docs/host-kit.md's Python example, extracted and run as a script in a project with real signed releases,
    the verifier a real ``rimthan-mcp serve`` child: it sets up the workspace and prints what the doc says."""
    doc = (Path(__file__).parents[2] / "docs" / "host-kit.md").read_text("utf-8")
    (example,) = re.findall(r"```python\n(.*?)```", doc, flags=re.S)
    world = build_world(tmp_path / "world")
    project = tmp_path / "project"
    world.publish("1.3.0", project / "releases")
    shutil.copytree(world.trust, project / "keys" / "local")
    shutil.copy(packaged_source("1.3.0") / "examples" / "confirmed-state.json", project / "facts.json")
    (project / "harness.py").write_text(example, "utf-8")
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "RIMTHAN_STATE_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "harness.py"], cwd=project, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "advanced interview", done.stdout
    assert (project / ".rimthan" / "runs" / "run-1.log").is_file()


@pytest.mark.parametrize("version", ["1.2.0", "1.3.0"])
def test_a_harness_start_without_a_version_starts_the_one_the_verifier_picks(engines: Engines, version: str) -> None:
    """As the protocol and the bridge's start_run: no version, the newest the verifier holds, with its facts."""
    harness = WorkflowHarness(
        engines.call(version),
        scenario(),
        project_dir=engines.work / "projects" / f"no-version-{version}",
        clock=engines.clock,
    )

    async def go() -> tuple[RunResult, RunResult]:
        started = await harness.start("research")
        return started, await harness.run(started)

    started, final = run(go())
    assert (started.status, started.workflow, started.workflow_version) == ("active", "research-decision", version)
    assert final.status == "completed"
    assert harness.record.statuses[0] == ("rimthan.start_workflow", "active", "setup-workspace")  # (asking: no move)


def test_a_session_s_moves_return_typed_results_with_the_verifier_s_result_kept_whole(engines: Engines) -> None:
    """``RunResult`` for a move of the run, ``ValidationRound`` for prepare: frozen, exported by ``rimthan_host``."""
    session = HostSession(engines.call("1.3.0"), project_dir=engines.work / "projects" / "typed", clock=engines.clock)

    async def go() -> tuple[RunResult, ValidationRound, RunResult]:
        started = await session.start("research", example_state("1.3.0"))
        prepared = await session.prepare([session.set_up_workspace()])
        for validator in prepared.validators:
            session.verdict(f"{validator.validator_id}@{validator.version}", "pass")
        return started, prepared, await session.submit()

    started, prepared, submitted = run(go())
    assert (type(started), type(prepared), type(submitted)) == (RunResult, ValidationRound, RunResult)
    assert (started.status, started.step_id, started.release) == (
        "active",
        "setup-workspace",
        "research-decision@1.3.0",
    )
    assert started.step is not None and started.step.wire == started.wire["step"] == started.step_wire
    assert started.question is None and started.failures == ()
    assert prepared.ready and [v.wire for v in prepared.validators] == prepared.wire["validators"]
    assert all(isinstance(v, Validator) and v.key == f"{v.validator_id}@{v.version}" for v in prepared.validators)
    assert (started.message, prepared.message) == (started.wire["message"], prepared.wire["message"])
    assert started.walked_again == () and started.migration is None  # (no migration target: nothing walked again)
    assert (submitted.status, submitted.step_id, submitted.workflow_version) == ("advanced", "interview", "1.3.0")
    assert session.checkpoint == submitted.wire["checkpoint"]
    assert session.position == submitted and session.position is session.position  # typed once, as it was placed
    with pytest.raises(dataclasses.FrozenInstanceError):
        submitted.status = "completed"


@pytest.mark.parametrize(
    ("walked", "where"),
    [
        ("setup-workspace", "/migration/walked_again is not an array"),
        ([{"step": 5, "outputs": []}], "/migration/walked_again/0/step is not a string"),
        ([{"step": "interview", "outputs": "x"}], "/migration/walked_again/0/outputs is not an array"),
    ],
)
def test_a_walked_again_of_the_wrong_shape_is_no_protocol_result(walked: Any, where: str) -> None:
    """``RunResult.walked_again`` is typed from the preview: a verifier's part of another type is refused first."""
    result = {"status": "blocked", "message": "blocked", "migration": {"walked_again": walked}}
    with pytest.raises(NotAProtocolResult, match=f"a result whose {where}"):
        protocol_result("rimthan.continue_workflow", result, is_error=False)
