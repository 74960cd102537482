"""The run's state file keeps as validated only the files the verifier accepted.

Its ``validated`` list is what ``input_binding_mismatch`` compares a later
record against ("changed after this run validated it"). Files were entered
there as soon as the bridge read them, so files the verifier refused (a
deterministic check, a validator's fail verdict) were kept as validated. A
real ``rimthan-host serve`` with its real verifier child; the state file read
from the project after each move.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from rimthan_host.runlog import RunLog
from rimthan_host.standin import StandIn
from support.bridge import audited_only_run, drive, write_files
from support.servers import ServerWorld, build_world


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("evidence-world"))


def _validated(model: StandIn, run: str) -> dict[str, Any]:
    """The ``validated`` entries of the run's state file, by path."""
    kept = RunLog(model.project, run).load_state()["validated"]
    return {entry["path"]: entry["sha256"] for entry in kept.values()}


def test_files_the_verifier_refused_are_not_kept_as_validated(world: ServerWorld, tmp_path: Path) -> None:
    async def script(model: StandIn) -> None:
        await model.follow(await model.start(), "", until_question=True)
        step = await model.call("answer_question", {"answer": "desk-research", "field": "research_route"})
        run, (log, md) = str(step.data["run"]), step.data["files"]
        before = _validated(model, run)
        assert log not in before and md not in before

        write_files(model, step, md)
        write_files(model, step, log, "{not json")
        invalid = await model.call("step_done", {"step": step.data["step"]["id"]})
        assert invalid.data["status"] == "deterministic_validation_failed", invalid.text
        assert _validated(model, run) == before  # refused: neither file is evidence

        write_files(model, step)
        pending = await model.call("step_done", {"step": step.data["step"]["id"]})
        assert pending.data["status"] == "validators_pending", pending.text
        names = [v["name"] for v in pending.data["validators"]]
        for name in names:
            verdict = {"verdict": "fail", "findings": ["The log cites no source."]} if name == names[0] else {}
            failed = await model.call("record_verdict", {"validator": name, "verdict": "pass", **verdict})
        assert failed.data["status"] == "validation_failed", failed.text
        assert _validated(model, run) == before  # a validator failed them: still no evidence

        again = await model.call("step_done", {"step": step.data["step"]["id"]})
        assert again.data["status"] == "validators_pending", again.text
        for waiting in again.data["validators"]:  # (after a fail: the failed one runs again)
            passed = await model.call("record_verdict", {"validator": waiting["name"], "verdict": "pass"})
        assert not passed.is_error, passed.text
        accepted = _validated(model, run)
        assert set(accepted) == {*before, log, md}  # accepted: both are evidence now, as the verifier took them
        assert accepted[log] == hashlib.sha256((model.project / log).read_bytes()).hexdigest()

    model, state = drive(world, tmp_path, script)
    audited_only_run(model.project, state)
