"""``rimthan-mcp audit`` meets a token of a later token format as the live tools do: issued by a newer version.

A real run is driven in-process over a real signed release (support.engines); its checkpoint log is audited by the
installed ``rimthan-mcp audit`` with the run's real key file. A line of the log is then a checkpoint whose header's
``typ`` names token format 2 (``rimthan-checkpoint-2+jwt``, as a newer version would issue it), or a validation
bundle of that format signed with the same keys. The refusal keeps ``checkpoint_invalid`` at that line, says the
token was issued by a newer Rimthan version (the live tools' words), and its next step is to upgrade the verifier
to read that format - not the words for an edited or cut line. A line that is merely damaged keeps those.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from rimthan_workflow_registry.run.token_wire import TOKEN_FORMAT, claims_payload
from rimthan_workflow_registry.run.tokens import BUNDLE_TYPE
from support.engines import DrivenRun, Engines, TickingClock, drive, make_engines
from support.refusals import refusal
from support.servers import RIMTHAN_MCP, server_env
from support.token_headers import numbered


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory) -> Engines:
    return make_engines(tmp_path_factory.mktemp("audit-newer"), TickingClock())


@pytest.fixture(scope="module")
def run(engines: Engines) -> DrivenRun:
    return drive(engines, "1.2.0", "desk-research", name="newer", until_step="select-route")


def _audit(engines: Engines, tokens: list[str], tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], Any]:
    log = tmp_path / "run.log"
    log.write_text("\n".join(tokens) + "\n", "utf-8")
    engines.keyring.save(tmp_path / "state" / "checkpoint-keys.json")  # the run's real key file
    args = [RIMTHAN_MCP, "audit", str(log), "--state-dir", str(tmp_path / "state")]
    text = subprocess.run(args, capture_output=True, text=True, timeout=120, env=server_env())
    as_json = subprocess.run([*args, "--json"], capture_output=True, text=True, timeout=120, env=server_env())
    assert text.returncode == as_json.returncode == 1 and text.stdout == "", text
    return text, json.loads(as_json.stdout)["error"]


def test_a_checkpoint_of_a_newer_format_is_said_to_need_a_newer_verifier(
    engines: Engines, run: DrivenRun, tmp_path: Path
) -> None:
    tokens = list(run.checkpoints)
    line = len(tokens)
    tokens[-1] = numbered(tokens[-1], 2)
    text, error = _audit(engines, tokens, tmp_path)
    said = refusal(text.stderr)
    assert said.error.endswith(
        f":{line}: line {line}: the checkpoint token was issued by a newer Rimthan version "
        f"(format 2; this one reads format {TOKEN_FORMAT})"
    ), said
    assert said.code == "checkpoint_invalid" and error["code"] == "checkpoint_invalid"
    assert said.next.startswith("audit this log with `rimthan-mcp audit` of the Rimthan version that issued it"), said
    assert "upgrade the verifier to read token format 2" in said.next and "edited" not in said.next, said
    assert error["details"] == {"line": line, "break": "newer_format"}


def test_a_bundle_of_a_newer_format_in_the_log_is_named_as_such(
    engines: Engines, run: DrivenRun, tmp_path: Path
) -> None:
    bundle = engines.keyring.sign_payload(claims_payload({"iat": 1, "run": "r"}), BUNDLE_TYPE)
    tokens = [*run.checkpoints[:2], numbered(bundle, 3)]
    text, error = _audit(engines, tokens, tmp_path)
    said = refusal(text.stderr)
    assert said.error.endswith(
        ":3: line 3: a validation bundle token, not a checkpoint token; it was issued by a newer Rimthan version "
        f"(format 3; this one reads format {TOKEN_FORMAT})"
    ), said
    assert said.code == "checkpoint_invalid" and error["details"] == {"line": 3, "break": "newer_format"}
    assert said.next.startswith("a run's log holds its checkpoint tokens only"), said
    assert "upgrade the verifier to read token format 3" in said.next, said


def test_a_damaged_line_keeps_the_words_for_an_edited_line(engines: Engines, run: DrivenRun, tmp_path: Path) -> None:
    tokens = list(run.checkpoints)
    header, claims, signature = tokens[1].split(".")
    tokens[1] = f"{header}.{claims}.{signature[:-2]}{'AA' if signature[-2:] != 'AA' else 'BA'}"
    text, error = _audit(engines, tokens, tmp_path)
    said = refusal(text.stderr)
    assert said.code == "checkpoint_invalid" and error["details"] == {"line": 2, "break": "invalid"}
    assert said.next.startswith("the line is not a checkpoint token as the server issued it"), said
