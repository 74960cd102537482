"""``rimthan-mcp audit`` says how a run ended, read from the verified release it is pinned to.

Real runs driven with the scripted harness (rimthan_host) against real engine
modules over real signed releases (support.engines); each run's log is the
checkpoints the harness received, in order. The installed ``rimthan-mcp
audit`` reads the log, the checkpoint keys, and (with --releases-dir and
--trust) the releases, and must say: completed, or waiting for what (an
answer and its field, a gated step's outputs and validators, a repair with
the failed round's findings count, the setup), and migrated to what.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from rimthan_workflow_mcp.workflow_engine import WorkflowEngineQueryModule
from rimthan_workflow_registry.release.trust import load_trust
from rimthan_workflow_registry.release.verify import verify_release
from support.engines import (
    DrivenRun,
    Engines,
    TickingClock,
    WireEngine,
    drive,
    drive_migrated,
    example_state,
    make_engines,
)
from support.releases import branching_setup_source, build_release, make_keypair, trust_dir
from support.servers import RIMTHAN_MCP, server_env

REPAIR = frozenset({"decision-critic@1.0.0"})


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory) -> Engines:
    engines = make_engines(tmp_path_factory.mktemp("audit-outcome"), TickingClock())
    engines.keyring.save(engines.work / "state" / "checkpoint-keys.json")
    return engines


@pytest.fixture(scope="module")
def repaired(engines: Engines) -> DrivenRun:
    return drive(engines, "1.2.0", "desk-research", name="repaired", fail_once=REPAIR)


def _audit(engines: Engines, tokens: list[str], *extra: str | Path, name: str = "run") -> tuple[str, dict[str, Any]]:
    """The text and --json outputs of the installed ``rimthan-mcp audit`` on ``tokens`` as a run log."""
    log = engines.work / "logs" / f"{name}.log"
    log.parent.mkdir(exist_ok=True)
    log.write_text("\n".join(tokens) + "\n", "utf-8")
    args = [RIMTHAN_MCP, "audit", str(log), "--state-dir", str(engines.work / "state"), *map(str, extra)]
    outputs = []
    for more in ([], ["--json"]):
        done = subprocess.run([*args, *more], capture_output=True, text=True, timeout=120, env=server_env())
        assert done.returncode == 0 and done.stderr == "", done.stderr
        outputs.append(done.stdout)
    return outputs[0], json.loads(outputs[1])


def _with_releases(engines: Engines) -> tuple[str | Path, ...]:
    return ("--releases-dir", engines.work / "releases", "--trust", engines.work / "trust")


def _step(engines: Engines, version: str, step_id: str) -> Any:
    workflow = engines.releases[version].catalogue.workflow("research-decision", version)
    assert workflow is not None
    return workflow.step(step_id)


def test_a_completed_run_with_a_failed_round_says_completed_and_counts_the_findings(
    engines: Engines, repaired: DrivenRun
) -> None:
    assert repaired.harness.record.final["status"] == "completed"
    text, document = _audit(engines, repaired.checkpoints, *_with_releases(engines), name="completed")
    assert "outcome: completed at step desk-research on research-decision@1.2.0" in text
    (round_,) = document["final"]["failed_validation_rounds"]
    assert round_["step"] == "desk-research" and round_["findings"] == 1
    assert f"1 failed validation round(s): desk-research (line {round_['line']}, 1 finding(s))" in text
    outcome = document["outcome"]
    assert (outcome["outcome"], outcome["step"], outcome["waiting_for"]) == ("completed", "desk-research", None)
    assert outcome["migrated_to"] is None


def test_a_run_stopped_at_a_branch_waits_for_the_answer_to_its_question(engines: Engines) -> None:
    stopped = drive(engines, "1.2.0", "desk-research", name="at-question", until_step="select-route")
    question = _step(engines, "1.2.0", "select-route").question
    text, document = _audit(engines, stopped.checkpoints, *_with_releases(engines), name="question")
    outcome = document["outcome"]
    assert (outcome["outcome"], outcome["waiting_for"]) == ("waiting", "question")
    assert outcome["question"] == {"field": question.field, "choices": list(question.choices)}
    assert question.field == "research_route"
    assert (
        "outcome: waiting at step select-route on research-decision@1.2.0 for an answer to its question, "
        "field research_route" in text
    )


def test_a_run_stopped_at_a_gated_step_waits_for_its_outputs_and_validators(engines: Engines) -> None:
    stopped = drive(engines, "1.2.0", "desk-research", name="at-gate", until_step="desk-research")
    step = _step(engines, "1.2.0", "desk-research")
    text, document = _audit(engines, stopped.checkpoints, *_with_releases(engines), name="gated")
    outcome = document["outcome"]
    assert (outcome["outcome"], outcome["waiting_for"]) == ("waiting", "validation")
    assert outcome["outputs"] == [o.id for o in step.outputs] and outcome["outputs"]
    assert outcome["validators"] == list(step.validators) and len(step.validators) == 2
    outputs = ", ".join(o.id for o in step.outputs)
    assert f"for its outputs {outputs} to submit with validators {', '.join(step.validators)}" in text


def test_a_run_stopped_after_a_failed_round_waits_for_a_repair_of_the_failed_validator(
    engines: Engines, repaired: DrivenRun
) -> None:
    _, full = _audit(engines, repaired.checkpoints, name="full")
    line = full["final"]["failed_validation_rounds"][0]["line"]
    text, document = _audit(engines, repaired.checkpoints[:line], *_with_releases(engines), name="repair")
    outcome = document["outcome"]
    assert (outcome["outcome"], outcome["waiting_for"], outcome["findings"]) == ("waiting", "repair", 1)
    assert outcome["validators"] == ["decision-critic@1.0.0"]  # the other validator's pass is kept
    assert "the last validation round failed with 1 finding(s)" in text


def test_a_run_stopped_at_an_ungated_step_waits_for_continue_to_its_next_step(engines: Engines) -> None:
    stopped = drive(engines, "1.2.0", "desk-research", name="at-interview", until_step="interview")
    step = _step(engines, "1.2.0", "interview")
    assert not step.gated and step.next is not None
    text, document = _audit(engines, stopped.checkpoints, *_with_releases(engines), name="continue")
    outcome = document["outcome"]
    assert (outcome["outcome"], outcome["waiting_for"], outcome["next_step"]) == ("waiting", "continue", step.next)
    assert f"for continue_workflow to move on to {step.next}" in text


def test_a_run_just_started_waits_for_its_setup(engines: Engines) -> None:
    started = drive(engines, "1.2.0", "desk-research", name="at-setup", until_step="setup-workspace")
    assert len(started.checkpoints) == 1
    step = _step(engines, "1.2.0", "setup-workspace")
    text, document = _audit(engines, started.checkpoints, *_with_releases(engines), name="setup")
    outcome = document["outcome"]
    assert (outcome["outcome"], outcome["waiting_for"]) == ("waiting", "setup")
    assert outcome["host_assets"] == list(step.host_assets) and outcome["host_assets"]
    assert "outcome: waiting at step setup-workspace on research-decision@1.2.0 for the setup to deliver" in text


def test_a_migrated_run_says_to_what_and_how_it_ended_there(engines: Engines) -> None:
    migrated = drive_migrated(engines, name="migrated")
    assert migrated.harness.record.final["status"] == "completed"
    text, document = _audit(engines, migrated.checkpoints, *_with_releases(engines), name="migrated")
    outcome = document["outcome"]
    assert (outcome["outcome"], outcome["release"]) == ("completed", "research-decision@1.3.0")
    assert outcome["migrated_to"] == "research-decision@1.3.0" and document["final"]["migrated"] is True
    assert outcome["migrated_from"] == "research-decision@1.2.0"
    assert (
        f"outcome: completed at step {document['final']['step']} on research-decision@1.3.0 "
        "(migrated from research-decision@1.2.0 to research-decision@1.3.0)" in text
    )
    restarted = next(m["line"] for m in document["migrations"])
    text, document = _audit(
        engines, migrated.checkpoints[:restarted], "--release", engines.releases["1.3.0"].root, "--trust",
        engines.work / "trust", name="just-migrated",
    )  # fmt: skip
    assert (document["outcome"]["waiting_for"], document["outcome"]["migrated_to"]) == (
        "setup",
        "research-decision@1.3.0",
    )


def test_without_its_verified_release_the_outcome_is_not_told_and_says_why(
    engines: Engines, repaired: DrivenRun, tmp_path: Path
) -> None:
    text, document = _audit(engines, repaired.checkpoints, name="no-release")
    assert document["outcome"]["outcome"] == "unknown" and document["ok"] is True
    assert "outcome: not told at step desk-research" in text and "pass --releases-dir DIR" in text
    other = trust_dir(tmp_path / "other-trust", make_keypair(tmp_path / "keys", "stranger"))
    text, document = _audit(
        engines, repaired.checkpoints, "--releases-dir", engines.work / "releases", "--trust", other, name="untrusted"
    )
    assert document["outcome"]["outcome"] == "unknown"
    assert "refused here: " in document["outcome"]["reason"] and "research-decision-1.2.0: " in text


def _audit_examples() -> list[str]:
    """Every ``rimthan-mcp audit`` example of its --help and of docs/server.md, as written."""
    shown = subprocess.run([RIMTHAN_MCP, "audit", "--help"], capture_output=True, text=True, env=server_env()).stdout
    doc = (Path(__file__).resolve().parents[2] / "docs" / "server.md").read_text("utf-8")
    found = [line.strip() for line in shown.splitlines() if line.strip().startswith("rimthan-mcp audit ")]
    found += [
        line.removeprefix("uv run ").strip()
        for line in doc.splitlines()
        if line.startswith("uv run rimthan-mcp audit ")
    ]
    return found


def test_every_audit_example_in_help_and_docs_runs_as_written(engines: Engines, tmp_path: Path) -> None:
    examples = _audit_examples()
    assert sum("--releases-dir" in e or "--release " in e for e in examples) >= 3, examples
    migrated = drive_migrated(engines, name="examples")
    shutil.copytree(engines.work / "releases", tmp_path / "releases")
    shutil.copytree(engines.work / "trust", tmp_path / "keys" / "local")
    assert (tmp_path / "releases" / "research-decision-1.3.0").is_dir()
    (tmp_path / "run.log").write_text("\n".join(migrated.checkpoints) + "\n", "utf-8")
    state, srv = engines.work / "state", tmp_path / "srv" / "rimthan"
    srv.mkdir(parents=True)
    shutil.copy(state / "checkpoint-keys.json", srv / "checkpoint-keys.json")  # its mode too (0600: no warning)
    env = {**server_env(), "RIMTHAN_STATE_DIR": str(state)}
    for example in examples:
        command, _, jq = example.split("#")[0].partition("|")
        command = command.replace("[--json]", "--json").replace("STATE_DIR", str(state))
        command = command.replace("/srv/rimthan", str(srv))
        args = [RIMTHAN_MCP if a == "rimthan-mcp" else a for a in shlex.split(command)]
        done = subprocess.run(args, capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
        assert done.returncode == 0 and done.stderr == "", (example, done.stderr)
        if "--json" in args:
            document = json.loads(done.stdout)
            jq_filter = jq.strip().removeprefix("jq").strip()  # only `jq .key` is used: the key must be there
            assert jq_filter == "" or document[jq_filter.removeprefix(".")], example
            told = {"unknown": "not"}.get(document["outcome"]["outcome"], document["outcome"]["outcome"])
        else:
            told = done.stdout.splitlines()[-1].split()[1]
        reads_releases = "--releases-dir" in args or "--release" in args
        assert told == ("completed" if reads_releases else "not"), (example, told)


def test_a_passing_submit_that_keeps_the_step_is_no_failed_round(engines: Engines, tmp_path: Path) -> None:
    """At a validated gated step waiting for its answer, a second passing submit re-issues the checkpoint on
    the same step, state and artifacts: the shape of a failed round, but no round failed (no findings claim)."""
    key = make_keypair(tmp_path / "keys", "branching")
    release = build_release(branching_setup_source(tmp_path), tmp_path / "releases", [key])
    verified = verify_release(release, load_trust(trust_dir(tmp_path / "trust", key)))
    engine = WireEngine(WorkflowEngineQueryModule(verified, engines.keyring, clock=engines.clock))
    kit = engines.harness("passing-again")
    state = kit.confirm(example_state("1.2.0"))
    started = engine.start_workflow({"workflow": "research", "confirmed_state": state, "host": kit.host()})
    asked = kit.pass_setup(engine, started, state)
    again = kit.pass_setup(engine, {**started, "checkpoint": asked["checkpoint"]}, state)
    assert (asked["status"], again["status"]) == ("input_required", "input_required")
    assert again["checkpoint"] != asked["checkpoint"]
    text, document = _audit(engines, [started["checkpoint"], asked["checkpoint"], again["checkpoint"]], name="again")
    assert document["final"]["failed_validation_rounds"] == [], document["final"]
    assert "no failed validation round" in text and "failed validation round(s)" not in text
