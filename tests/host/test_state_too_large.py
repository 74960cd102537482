"""A resume state too large to save names the part that is too large, and what to do about that part.

The state file keeps the evidence (each file the run validated: id, path,
SHA-256) beside the confirmed values. Evidence past the bound was refused
as "with these confirmed values ... make the values shorter": the model was
sent to shorten values that were a few bytes. Real run files in a real
project directory.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest
from rimthan_host.runlog import MAX_STATE_BYTES, RunLog, StateTooLarge

SMALL = {"state": {"objective": "a short one"}, "confirmations": {}}


def _state(run: str, validated: Mapping[str, object], confirmed: Mapping[str, object] = SMALL) -> dict[str, object]:
    return {"run": run, "confirmed_state": confirmed, "workflow": "research", "release": None, "step": "findings",
            "gated": True, "existed_before": {}, "validated": validated, "completed": False}  # fmt: skip


def test_evidence_past_the_bound_is_named_not_the_confirmed_values(tmp_path: Path) -> None:
    log = RunLog(tmp_path / "project", "run-evidence")
    log.save_state("token-1", _state(log.run_id, {}), logged=None)
    kept = log.state_path.read_bytes()
    path = "research/" + "p" * 4000 + ".md"
    many = {f"output-{i}": {"path": path, "sha256": "0" * 64} for i in range(MAX_STATE_BYTES // 4000 + 1)}
    with pytest.raises(StateTooLarge) as refused:
        log.save_state("token-2", _state(log.run_id, many), logged="token-1")
    said = str(refused.value)
    assert said.startswith(f"Nothing was recorded: with the files this run validated ({len(many)}: "), said
    assert "confirmed values" not in said and "Make the values shorter" not in said
    assert "stays at its last logged checkpoint" in said and "start_run with new_run true" in said
    assert "\n" not in said and refused.value.part == "validated"
    assert log.state_path.read_bytes() == kept  # nothing replaced
