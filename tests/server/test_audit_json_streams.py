"""``rimthan-mcp audit --json``: stdout holds exactly one JSON document, and a successful audit says nothing on stderr.

A real run driven with the scripted harness against real engine modules over
real signed releases (support.engines); its checkpoints are the run log. The
installed ``rimthan-mcp audit`` reads it with a key file whose mode (and whose
directory's mode) others may read or write: the ``key_file_exposed`` warnings
that the text output says on stderr go into the JSON document's ``warnings``.
A refusal under ``--json`` is the one JSON refusal on stdout and its code on
stderr, as every command.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support.engines import DrivenRun, Engines, TickingClock, drive, make_engines
from support.servers import RIMTHAN_MCP, server_env


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory) -> Engines:
    return make_engines(tmp_path_factory.mktemp("audit-json"), TickingClock())


@pytest.fixture(scope="module")
def run(engines: Engines) -> DrivenRun:
    return drive(engines, "1.2.0", "desk-research", name="streams")


def _audit(keys: Path, log: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    args = [RIMTHAN_MCP, "audit", str(log), "--checkpoint-keys", str(keys), *extra]
    return subprocess.run(args, capture_output=True, text=True, timeout=120, env=server_env())


def _exposed_keys(engines: Engines, run: DrivenRun, tmp_path: Path) -> tuple[Path, Path]:
    """The run's log, and its key file readable by others in a directory others may write."""
    folder = tmp_path / "shared-state"
    folder.mkdir()
    keys = folder / "checkpoint-keys.json"
    engines.keyring.save(keys)
    keys.chmod(0o644)
    folder.chmod(0o777)
    log = tmp_path / "run.log"
    log.write_text("\n".join(run.checkpoints) + "\n", "utf-8")
    return keys, log


def test_audit_json_puts_the_key_file_warnings_in_its_one_document_and_nothing_on_stderr(
    engines: Engines, run: DrivenRun, tmp_path: Path
) -> None:
    keys, log = _exposed_keys(engines, run, tmp_path)
    done = _audit(keys, log, "--json")
    assert (done.returncode, done.stderr) == (0, "")
    document: dict[str, Any] = json.loads(done.stdout)  # exactly one JSON document: json.loads refuses more
    assert len(document["checkpoints"]) == len(run.checkpoints)
    warned = {(w["code"], w["path"]) for w in document["warnings"]}
    assert warned == {("key_file_exposed", str(keys)), ("key_file_exposed", str(keys.parent))}
    assert all(w["message"] and w["next_step"].startswith("chmod ") for w in document["warnings"])


def test_audit_text_still_says_the_key_file_warnings_on_stderr(
    engines: Engines, run: DrivenRun, tmp_path: Path
) -> None:
    keys, log = _exposed_keys(engines, run, tmp_path)
    done = _audit(keys, log)
    assert done.returncode == 0
    assert done.stderr.count("warning: key_file_exposed: ") == 2 and done.stderr.count("next: chmod ") == 2
    assert "warnings" not in done.stdout


def test_audit_json_without_warnings_says_an_empty_list(engines: Engines, run: DrivenRun, tmp_path: Path) -> None:
    keys, log = tmp_path / "keys.json", tmp_path / "run.log"
    engines.keyring.save(keys)
    log.write_text("\n".join(run.checkpoints) + "\n", "utf-8")
    done = _audit(keys, log, "--json")
    assert (done.returncode, done.stderr) == (0, "")
    assert json.loads(done.stdout)["warnings"] == []


def test_audit_json_refusing_the_key_file_prints_one_json_refusal_and_its_code_on_stderr(
    run: DrivenRun, tmp_path: Path
) -> None:
    log = tmp_path / "run.log"
    log.write_text("\n".join(run.checkpoints) + "\n", "utf-8")
    done = _audit(tmp_path / "missing-keys.json", log, "--json")
    assert done.returncode == 1
    assert done.stderr.splitlines()[0].startswith("error: key_invalid: ")
    assert "Traceback" not in done.stderr
    document = json.loads(done.stdout)
    assert document["ok"] is False and document["error"]["code"] == "key_invalid"
