"""What a harness author new to the library meets: a blocked start said as such by every later move, the
validators' keys and instructions without building ``id@version`` or checking digests, a migration offer's
target named. Real signed releases, the verifier's engine read as a client reads it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest
from rimthan_host import Failure, Finding, Question, RunResult, Step, StepOutput, ValidationRound
from rimthan_host.protocol import HarnessError
from rimthan_host.session import HostSession
from rimthan_workflow_registry.canonical import digest_bytes
from support.engines import Engines, TickingClock, example_state, make_engines, run

BLOCKED = "the run did not start (the verifier answered blocked: confirmed_field_missing: required field 'objective'"


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory) -> Engines:
    return make_engines(tmp_path_factory.mktemp("newcomer"), TickingClock())


def _session(engines: Engines, name: str) -> HostSession:
    return HostSession(engines.call("1.3.0"), project_dir=engines.work / "projects" / name, clock=engines.clock)


def test_every_move_after_a_blocked_start_says_the_start_was_blocked_and_why(engines: Engines) -> None:
    """Before: ``set_up_workspace`` said "the current step is None, not setup-workspace", ``prepare`` raised a
    bare ``KeyError: 'id'`` and ``advance`` "no run is in progress here"."""
    session = _session(engines, "blocked")
    facts = {k: v for k, v in example_state("1.3.0").items() if k != "objective"}
    started = run(session.start("research", facts))
    assert started.status == "blocked"
    output = {"id": "x", "path": "x.md", "media_type": "text/markdown"}
    moves: list[Callable[[], object]] = [
        session.set_up_workspace,
        lambda: session.write_output(output, "text"),
        session.read_outputs,
        lambda: run(session.prepare([])),
        lambda: run(session.advance()),
        lambda: session.position,
    ]
    for move in moves:
        with pytest.raises(HarnessError) as refused:
            move()
        assert str(refused.value).startswith(BLOCKED), refused.value
        assert str(refused.value).endswith("; confirm what it names and start again")


def test_a_move_before_any_start_says_to_start_or_resume(engines: Engines) -> None:
    with pytest.raises(HarnessError, match="^no run is in progress here: start or resume one first$"):
        _session(engines, "none").set_up_workspace()


def test_a_started_run_clears_a_blocked_start(engines: Engines) -> None:
    session = _session(engines, "again")
    state = example_state("1.3.0")
    assert run(session.start("research", {k: v for k, v in state.items() if k != "objective"})).status == "blocked"
    assert run(session.start("research", state)).step_id == "setup-workspace"
    assert session.blocked_start is None and session.set_up_workspace().path == ".rimthan/workspace-manifest.json"


def _round(engines: Engines, name: str) -> tuple[HostSession, ValidationRound]:
    """A session at 1.3.0's desk research, its files written from the worked example and prepared."""
    session = _session(engines, name)

    async def to_a_round() -> None:
        await session.start("research", example_state("1.3.0"))
        await session.prepare([session.set_up_workspace()])
        await session.submit()
        while session.step is None or not session.step.outputs:
            question = session.position.question
            await session.advance({question.field: "desk-research"} if question else None)

    run(to_a_round())
    examples = Path(__file__).parents[2] / "catalogues" / "research-decision" / "1.3.0" / "examples"
    assert session.step is not None
    outputs = session.step.outputs
    files = [session.write_output(o, (examples / Path(o.path).name).read_text("utf-8")) for o in outputs]
    return session, run(session.prepare(files))


def test_a_round_names_its_validators_keys_and_the_session_gives_each_one_s_instruction(engines: Engines) -> None:
    session, round_ = _round(engines, "keys")
    assert round_.keys == ("evidence-auditor@1.1.0",)  # (1.3.0's desk research: one validator)
    for key, validator in zip(round_.keys, round_.validators, strict=True):
        assert key == validator.key
        text = session.validator_instruction(key)
        assert digest_bytes(text.encode("utf-8")) == validator.wire["instruction_digest"]
        session.verdict(key, "pass")
    with pytest.raises(HarnessError, match="^no validation waiting here asked for validator critic@9$"):
        session.validator_instruction("critic@9")
    assert run(session.submit()).status == "advanced"
    with pytest.raises(HarnessError, match="asked for validator evidence-auditor@1.1.0$"):
        session.validator_instruction("evidence-auditor@1.1.0")  # (the round is over)


def test_a_result_names_the_release_an_unconfirmed_offer_targets() -> None:
    offer = {"to": {"release": "research-decision@1.3.0"}, "confirmed": False}
    assert RunResult.of({"status": "active", "migration": offer}).offered_release == "research-decision@1.3.0"
    assert RunResult.of({"status": "active", "migration": {**offer, "confirmed": True}}).offered_release is None
    assert RunResult.of({"status": "active"}).offered_release is None


@pytest.mark.parametrize(
    ("findings", "problem"),
    [
        ([{"severity": "error"}], "finding 1: 'message' is a required property"),
        ([{"message": "no evidence id"}], "finding 1: 'severity' is a required property"),
        ([{"severity": "high", "message": "x"}], "finding 1/severity: 'high' is not one of ['error', 'warning']"),
        ([{"severity": "error", "message": ""}], "finding 1/message: '' should be non-empty"),
        ([{"severity": "error", "message": "x", "line": 3}], "finding 1: Additional properties are not allowed"),
        (["no evidence id"], "finding 1 is a str, not an object"),
    ],
)
def test_a_finding_the_verifier_would_refuse_is_said_as_one_before_anything_is_sent(
    engines: Engines, findings: list[object], problem: str
) -> None:
    """Before: a finding without ``message`` raised a bare ``KeyError``, a string ``ValueError``, and one without
    ``severity`` or with another severity was recorded, for the verifier to refuse the whole submit."""
    session, round_ = _round(engines, "findings")
    (key,) = round_.keys
    with pytest.raises(HarnessError) as refused:
        session.verdict(key, "fail", findings)  # type: ignore[arg-type]
    said = str(refused.value)
    assert said.startswith(f"the verifier would refuse the verdict of {key}: {problem}"), said
    assert said.endswith(
        'a finding is {"severity": "error" or "warning", "message": "...", optionally "artifact_id": "..."}'
    )


def test_a_results_parts_are_typed_each_keeping_the_verifiers_json(engines: Engines) -> None:
    """``RunResult``'s step, question, failures and findings are frozen dataclasses (``rimthan_host``'s exports),
    each with its JSON in ``wire``; ``write_output`` takes a typed output as it comes."""
    session = _session(engines, "typed-parts")
    state = example_state("1.3.0")

    async def go() -> tuple[RunResult, RunResult, RunResult, RunResult]:
        blocked = await session.start("research", {k: v for k, v in state.items() if k != "objective"})
        started = await session.start("research", state)
        await session.prepare([session.set_up_workspace()])
        asked = await session.submit()
        while asked.question is None:
            asked = await session.advance()
        at_files = await session.advance({asked.question.field: "desk-research"})
        assert at_files.step is not None
        examples = Path(__file__).parents[2] / "catalogues" / "research-decision" / "1.3.0" / "examples"
        files = [
            session.write_output(o, (examples / Path(o.path).name).read_text("utf-8")) for o in at_files.step.outputs
        ]
        round_ = await session.prepare(files)
        for key in round_.keys:
            session.verdict(key, "fail", [{"severity": "error", "artifact_id": files[0].artifact_id, "message": "no"}])
        return blocked, started, asked, await session.submit()

    blocked, started, asked, failed = run(go())
    [failure] = [f for f in blocked.failures if f.pointer == "/objective"]
    assert isinstance(failure, Failure) and failure.code == "confirmed_field_missing"
    assert failure.message and failure.wire["details"]["field"] == "objective"  # (details: in its JSON)
    step = started.step
    assert isinstance(step, Step) and (step.id, step.gated) == ("setup-workspace", True) and step.instruction
    assert step.outputs == (StepOutput("workspace-manifest", ".rimthan/workspace-manifest.json", "application/json",
                                       step.wire["outputs"][0]),)  # fmt: skip
    assert step.wire == started.wire["step"] == started.step_wire
    question = asked.question
    assert isinstance(question, Question) and question.field == "research_route" and question.prompt
    assert "desk-research" in question.choices and question.wire == asked.wire["question"]
    [finding] = failed.findings
    assert failed.status == "validation_failed" and isinstance(finding, Finding)
    assert (finding.validator, finding.severity, finding.message) == ("evidence-auditor@1.1.0", "error", "no")
    assert finding.artifact_id and finding.wire == failed.wire["findings"][0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        finding.message = "yes"  # type: ignore[misc]
