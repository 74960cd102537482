"""The host kit's run files under stress: a huge log, a resume state past its bound, a write that fails mid-move.

Runs go through real engine modules over real signed releases (support.engines;
one release built from the packaged catalogue with its objective unbounded), and
the faults are real: a directory where the state file must be written, a log
padded with megabytes. The session in memory must never run ahead of its files.
"""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from rimthan_host.confirmations import BY_ELICITATION, ConfirmedStateBook
from rimthan_host.harness import HarnessError, RunResult, WorkflowHarness
from rimthan_host.protocol import MoveNotRecorded
from rimthan_host.runlog import (
    CHECKPOINT_KEY,
    MAX_OFFER_BYTES,
    MAX_STATE_BYTES,
    OFFER_KEY,
    RunLog,
    StateTooLarge,
    kept_offer,
)
from rimthan_host.session import HostSession
from rimthan_workflow_mcp.cli import main as mcp_main
from rimthan_workflow_mcp.workflow_engine import WorkflowEngineQueryModule
from rimthan_workflow_registry.errors import FailureCode, WorkflowProtocolError
from rimthan_workflow_registry.limits import MAX_ARGUMENT_DEPTH, MAX_CONFIRMED_STATE_BYTES, depth_exceeds
from rimthan_workflow_registry.release.trust import load_trust
from rimthan_workflow_registry.release.verify import verify_release
from rimthan_workflow_registry.run.confirmed_state import ConfirmedState
from support.engines import Engines, ExamplesScenario, TickingClock, WireEngine, make_engines, run
from support.releases import build_release, make_keypair, trust_dir, unbounded_objective_source

SELECT_ROUTE = "select-route"  # the packaged workflow's step that asks for research_route


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory) -> Engines:
    return make_engines(tmp_path_factory.mktemp("runfiles"), TickingClock())


def _harness(engines: Engines, project: Path, run_id: str) -> WorkflowHarness:
    log = RunLog(project, run_id)
    scenario = ExamplesScenario("desk-research")
    return WorkflowHarness(engines.call("1.2.0"), scenario, project_dir=project, clock=engines.clock, run_log=log)


async def _at_question(harness: WorkflowHarness) -> RunResult:
    """Start the run and follow it to the route question."""
    await harness.run(await harness.start("research", initial_version="1.2.0"), until_step=SELECT_ROUTE)
    asked = await harness.session.advance()
    assert asked.status == "input_required", asked
    return asked


def _audited(engines: Engines, log: RunLog, tmp_path: Path) -> dict[str, Any]:
    keys = tmp_path / "checkpoint-keys.json"
    engines.keyring.save(keys)
    out = CliRunner().invoke(mcp_main, ["audit", str(log.log_path), "--checkpoint-keys", str(keys), "--json"])
    assert out.exit_code == 0, out.output
    history: dict[str, Any] = json.loads(out.output)
    return history


def test_a_failed_save_leaves_the_session_at_the_log_and_the_run_goes_on(engines: Engines, tmp_path: Path) -> None:
    """The verifier issued a checkpoint the host could not record: the session stays at the logged one."""
    harness = _harness(engines, tmp_path / "project", "run-unsaved")
    session, log = harness.session, RunLog(tmp_path / "project", "run-unsaved")

    async def go() -> RunResult:
        asked = await _at_question(harness)
        blocker = log.state_path.with_suffix(".json.tmp")
        blocker.mkdir()  # a directory where the state is written: the save fails for real
        with pytest.raises(MoveNotRecorded) as unrecorded:
            await session.advance({"research_route": "desk-research"})
        assert isinstance(unrecorded.value.cause, IsADirectoryError)
        assert unrecorded.value.cause.filename == str(blocker)
        assert session.checkpoint == log.tokens()[-1] == asked.wire["checkpoint"]  # not the unlogged one
        assert session.state.projection() == log.load_state()["confirmed_state"]  # without the answer
        assert "research_route" not in session.state.values
        assert session.position.status == "input_required" and session.position.step_id == SELECT_ROUTE
        blocker.rmdir()
        answered = await session.advance({"research_route": "desk-research"})  # from the logged checkpoint
        return await harness.run(answered)

    assert run(go()).status == "completed"
    assert log.tokens() == harness.record.checkpoints
    assert _audited(engines, log, tmp_path)["ok"] is True


def test_a_huge_log_is_streamed_and_a_line_past_any_token_is_refused(engines: Engines, tmp_path: Path) -> None:
    """Padding of 48 MiB before the last line is read through, never held; a line over 1 MiB is damage."""
    harness = _harness(engines, tmp_path / "project", "run-padded")
    log = RunLog(tmp_path / "project", "run-padded")
    asked = run(_at_question(harness))
    lines = log.log_path.read_bytes()
    log.log_path.write_bytes((b" " * 4095 + b"\n") * (12 * 1024) + lines)  # blank lines: no tokens
    tracemalloc.start()
    try:
        tokens = log.tokens()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert tokens[-1] == asked.wire["checkpoint"] and log.load_state()["step"] == SELECT_ROUTE
    assert peak < 2 * 1024 * 1024, peak  # the log is 48 MiB: it was streamed, not read whole
    log.log_path.write_bytes(lines + b"x" * (2 * 1024 * 1024))  # one line of 2 MiB, no newline
    with pytest.raises(HarnessError) as refused:
        log.load_state()
    said = str(refused.value)
    where = f"(the line ending at byte {len(lines) + 2 * 1024 * 1024} is longer than 1048576 bytes"
    assert said.startswith(f".rimthan/runs/run-padded.log is damaged {where}"), said
    assert "call start_run with new_run true" in said


def _bytes_read() -> int:
    """What this process has read through read(2) and its kin so far (Linux: /proc/self/io)."""
    fields = dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())
    return int(fields["rchar"])


def test_a_move_reads_the_log_tail_not_the_whole_log(engines: Engines, tmp_path: Path) -> None:
    """Appending to a 16 MiB log, and finding its last checkpoint, reads a few KiB: a move costs the same at
    the thousandth move as at the first (the whole log was read on every move: quadratic in a run)."""
    harness = _harness(engines, tmp_path / "project", "run-long")
    log = RunLog(tmp_path / "project", "run-long")
    asked = run(_at_question(harness))
    real = log.log_path.read_bytes()
    log.log_path.write_bytes(real * (16 * 1024 * 1024 // len(real)))  # thousands of moves' tokens
    before = _bytes_read()
    log.append("the-next-checkpoint")  # compares with the last line first (a repeat is skipped)
    assert log.last_token() == "the-next-checkpoint"
    log.append("the-next-checkpoint")
    read = _bytes_read() - before
    assert read < 64 * 1024, read  # three reads of the tail, each one block: the whole log read was 16 MiB
    assert log.tokens()[-2:] == [asked.wire["checkpoint"], "the-next-checkpoint"]  # the whole log, streamed: intact


def test_a_log_ending_in_more_blank_lines_than_any_token_is_refused_as_damaged(
    engines: Engines, tmp_path: Path
) -> None:
    """The bridge never writes a blank line: a tail of them longer than the longest token (how far a move reads
    back) holds no checkpoint to go on from, and is refused in words rather than taken for an empty log."""
    harness = _harness(engines, tmp_path / "project", "run-blank-tail")
    log = RunLog(tmp_path / "project", "run-blank-tail")
    run(_at_question(harness))
    real = log.log_path.read_bytes()
    log.log_path.write_bytes(real + (b" " * 1023 + b"\n") * 2048)  # 2 MiB of blank lines after the last token
    with pytest.raises(HarnessError) as refused:
        log.last_token()
    said = str(refused.value)
    assert said.startswith(".rimthan/runs/run-blank-tail.log is damaged (its last 1048578 bytes hold no checkpoint")
    assert log.log_path.read_bytes().startswith(real)  # nothing was written


def test_a_log_damaged_before_its_tail_does_not_stop_the_run_but_fails_the_audit(
    engines: Engines, tmp_path: Path
) -> None:
    """The bridge checks what it reads (the tail); the audit checks the whole log. A run whose log was damaged
    at its head goes on from its last checkpoint (the verifier checks that), and the audit still refuses it."""
    harness = _harness(engines, tmp_path / "project", "run-headless")
    log = RunLog(tmp_path / "project", "run-headless")
    asked = run(_at_question(harness))
    real = log.log_path.read_bytes()
    padding = (b" " * 1023 + b"\n") * 2048  # blank lines: 2 MiB, past the farthest a tail is read back
    log.log_path.write_bytes("é, not a token\n".encode() + padding + real)
    assert log.last_token() == asked.wire["checkpoint"]
    answered = run(harness.session.advance({"research_route": "desk-research"}))
    assert answered.step_id == "desk-research" and log.last_token() == answered.wire["checkpoint"]
    with pytest.raises(HarnessError, match=r"run-headless.log is damaged \(byte 0 is not ASCII\)"):
        log.tokens()
    keys = tmp_path / "checkpoint-keys.json"
    engines.keyring.save(keys)
    out = CliRunner().invoke(mcp_main, ["audit", str(log.log_path), "--checkpoint-keys", str(keys), "--json"])
    assert out.exit_code == 1 and '"ok": false' in out.output, out.output
    log.log_path.write_bytes(log.log_path.read_bytes() + "é\n".encode())  # damage in the tail: refused
    with pytest.raises(HarnessError, match=r"run-headless.log is damaged \(byte \d+ is not ASCII\)"):
        log.append("the-next-checkpoint")


def _unbounded_engine(tmp_path: Path, engines: Engines) -> WireEngine:
    """The packaged 1.2.0 catalogue with no maxLength on objective, built and signed for real."""
    key = make_keypair(tmp_path / "keys", "unbounded")
    built = build_release(unbounded_objective_source(tmp_path), tmp_path / "built", [key])
    release = verify_release(built, load_trust(trust_dir(tmp_path, key)))
    return WireEngine(WorkflowEngineQueryModule(release, engines.keyring, clock=engines.clock))


def test_a_resume_state_past_its_bound_is_not_written_and_the_run_stays_resumable(
    engines: Engines, tmp_path: Path
) -> None:
    """This verifier refuses a 5 MiB objective (MAX_CONFIRMED_STATE_BYTES) before the host saves anything; a
    verifier that took one (another version or implementation) would leave a state no state file holds twice:
    saving it is refused, and the run stays resumable from its last logged checkpoint."""
    engine = _unbounded_engine(tmp_path, engines)
    project = tmp_path / "project"
    log = RunLog(project, "run-large")
    session = HostSession(engine.call, project_dir=project, clock=engines.clock, run_log=log)
    facts = ExamplesScenario("desk-research").initial_state("1.2.0")
    huge = {**facts, "objective": "o" * (MAX_STATE_BYTES * 3 // 5)}

    async def go() -> None:
        with pytest.raises(WorkflowProtocolError) as refused_start:  # (the engine in process: the server answers it)
            await session.start("research", huge)
        assert refused_start.value.code is FailureCode.CONFIRMED_STATE_INVALID and not log.state_path.exists()
        started = await session.start("research", facts)
        saved = {k: v for k, v in log.load_state().items() if k != CHECKPOINT_KEY}
        large = {**saved, "confirmed_state": {**saved["confirmed_state"], "state": huge}}
        log.save_state(started.wire["checkpoint"] + "x", large, logged=started.wire["checkpoint"])  # one fits
        kept = log.state_path.read_bytes(), log.log_path.read_bytes()
        with pytest.raises(HarnessError) as refused:  # two (the new one and the one kept) are past the bound
            log.save_state(started.wire["checkpoint"] + "y", large, logged=started.wire["checkpoint"] + "x")
        said = str(refused.value)
        assert said.startswith("Nothing was recorded: with these confirmed values the resume state of run run-large")
        assert f"past the {MAX_STATE_BYTES} bytes" in said and "stays at its last logged checkpoint" in said
        assert (log.state_path.read_bytes(), log.log_path.read_bytes()) == kept  # nothing replaced
        assert not log.state_path.with_suffix(".json.tmp").exists()
        session.close()  # (the run's lock: one session moves it at a time)
        again = HostSession(engine.call, project_dir=project, clock=engines.clock, run_log=log)
        resumed = await again.resume()  # the state of the logged checkpoint still reads, and the verifier takes it
        assert resumed.status == "active" and resumed.step_id == "setup-workspace"

    run(go())


def _largest_values() -> dict[str, Any]:
    """Values at exactly MAX_CONFIRMED_STATE_BYTES as canonical JSON, each byte as costly as it can be in a state
    file: a list of zeros nested as deep as a tool call's arguments take (indented JSON pays per level), and
    characters JSON escapes as \\uXXXX (6 bytes for 2)."""
    depth = MAX_ARGUMENT_DEPTH - 3  # the arguments {"confirmed_state": {"state": {"deep": [...]}}} hold 3 above
    zeros = [0] * (MAX_CONFIRMED_STATE_BYTES // 4)
    deep: list[Any] = zeros
    for _ in range(depth - 1):
        deep = [deep]
    values: dict[str, Any] = {"deep": deep, "text": ""}
    rest = MAX_CONFIRMED_STATE_BYTES - ConfirmedState.from_json({"state": values}).size
    values["text"] = "\u00e9" * (rest // 2) + "o" * (rest % 2)
    return values


def test_the_largest_state_a_run_can_hold_is_kept_and_a_file_one_byte_past_its_bound_is_refused(
    tmp_path: Path,
) -> None:
    """MAX_STATE_BYTES is derived from what a run state can legitimately hold: two saved states of the largest
    confirmed values the verifier takes (limits.MAX_CONFIRMED_STATE_BYTES, nested as deep as its arguments go)
    are written and read back; a state file one byte past the bound is refused in words, nothing replaced."""
    values = _largest_values()
    book = ConfirmedStateBook(lambda: 1_800_000_000)
    for name, value in values.items():
        book.confirm(name, value, BY_ELICITATION)
    arguments = {"checkpoint": "c" * 1024, "confirmed_state": book.projection()}
    assert ConfirmedState.from_json(book.projection()).size == MAX_CONFIRMED_STATE_BYTES  # the verifier takes it
    assert not depth_exceeds(arguments, MAX_ARGUMENT_DEPTH)
    log = RunLog(tmp_path / "project", "run-largest")
    state = {"run": log.run_id, "confirmed_state": book.projection(), "workflow": "research", "release": None,
             "step": "select-route", "existed_before": {"evidence-log.json": False}, "completed": False}  # fmt: skip
    log.save_state("token-1", state, logged=None)
    log.save_state("token-2", state, logged="token-1")  # two kept: the new checkpoint's and the logged one's
    assert log.state_for("token-1")["confirmed_state"]["state"] == values
    assert log.state_for("token-2")["confirmed_state"]["state"] == values

    small = {**state, "confirmed_state": {"state": {"text": ""}, "confirmations": {}}}
    log.save_state("token-3", small, logged=None)
    pad = MAX_STATE_BYTES - log.state_path.stat().st_size  # each ASCII character of a value is one byte more
    exact = {**small, "confirmed_state": {"state": {"text": "o" * pad}, "confirmations": {}}}
    log.save_state("token-3", exact, logged=None)
    assert log.state_path.stat().st_size == MAX_STATE_BYTES and log.state_for("token-3") == {
        **exact, CHECKPOINT_KEY: log.state_for("token-3")[CHECKPOINT_KEY]
    }  # fmt: skip
    kept = log.state_path.read_bytes()
    past = {**small, "confirmed_state": {"state": {"text": "o" * (pad + 1)}, "confirmations": {}}}
    with pytest.raises(StateTooLarge) as refused:
        log.save_state("token-3", past, logged=None)
    said = str(refused.value)
    assert said.startswith("Nothing was recorded: with these confirmed values the resume state of run run-largest")
    assert f"would be {MAX_STATE_BYTES + 1} bytes, past the {MAX_STATE_BYTES} bytes a run state file may hold" in said
    assert log.state_path.read_bytes() == kept


def test_a_saved_migration_offer_that_is_not_an_object_makes_the_state_damaged(tmp_path: Path) -> None:
    """The last offer a run saw is kept in its state (``migration_offer``) and restored on resume; one that is not
    an object or null is not guessed from: the state is damaged, in words naming the field."""
    log = RunLog(tmp_path / "project", "run-offer")
    state: dict[str, Any] = {"run": log.run_id, "confirmed_state": {"state": {}, "confirmations": {}},
                             "workflow": "research", "release": None, "step": None, "existed_before": {},
                             "completed": False}  # fmt: skip
    log.save_state("token-1", {**state, OFFER_KEY: {"to": {"release": "research-decision@1.3.0"}}}, logged=None)
    assert log.state_for("token-1")[OFFER_KEY] == {"to": {"release": "research-decision@1.3.0"}}
    log.save_state("token-1", {**state, OFFER_KEY: "research-decision@1.3.0"}, logged=None)
    with pytest.raises(HarnessError, match="its migration_offer is not an object or null"):
        log.state_for("token-1")


def test_an_offer_past_its_bound_is_not_kept_and_a_resume_asks_again() -> None:
    """``kept_offer``: the offer as it is (null: none seen), or nothing past MAX_OFFER_BYTES or nested deeper than
    a state is read back, so the state file stays within MAX_STATE_BYTES and a resume asks the verifier again."""
    assert kept_offer(None) == {OFFER_KEY: None}
    offer = {"to": {"release": "research-decision@1.3.0"}, "target_needs": {"confirmed_state": ["objective"]}}
    assert kept_offer(offer) == {OFFER_KEY: offer}
    assert kept_offer({"description": "x" * MAX_OFFER_BYTES}) == {}
    deep: dict[str, Any] = {}
    for _ in range(MAX_ARGUMENT_DEPTH):
        deep = {"a": deep}
    assert kept_offer(deep) == {}
