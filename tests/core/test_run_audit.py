"""Offline run audit (``rimthan-mcp audit``) on real runs driven in-process, and on broken logs.

Runs are driven with the scripted harness against real engine modules over
real signed releases (engine_support); the audit sees only the logged tokens
and the checkpoint keys. Broken logs are made from those real tokens by
dropping, swapping or adding lines; a fork is a second child the server's own
signing code issues for an already-continued checkpoint.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from rimthan_host.harness import WorkflowHarness
from rimthan_workflow_mcp.audit_log import MAX_LOG_LINE_BYTES
from rimthan_workflow_mcp.cli import main
from rimthan_workflow_registry.errors import FailureCode
from rimthan_workflow_registry.run.audit import RunAuditError, audit_run, describe, read_log
from rimthan_workflow_registry.run.checkpoints import issue_checkpoint, verify_checkpoint
from rimthan_workflow_registry.run.token_wire import token_digest
from rimthan_workflow_registry.run.tokens import CheckpointKeyring
from support.engines import DrivenRun, Engines, TickingClock, drive, drive_migrated, example_state, make_engines
from support.refusals import refusal
from support.servers import RIMTHAN_MCP, server_env

REPAIR = frozenset({"decision-critic@1.0.0"})


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory) -> Engines:
    return make_engines(tmp_path_factory.mktemp("audit"), TickingClock())


@pytest.fixture(scope="module")
def completed(engines: Engines) -> DrivenRun:
    return drive(engines, "1.2.0", "desk-research", name="audited", fail_once=REPAIR)


@pytest.fixture(scope="module")
def migrated(engines: Engines) -> tuple[WorkflowHarness, list[str]]:
    """A run started on 1.2.0, migrated explicitly to 1.3.0 at select-route, completed there."""
    driven = drive_migrated(engines, name="migrated")
    return driven.harness, driven.checkpoints


def _log(tmp_path: Path, tokens: list[str], name: str = "run.log") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return path


def _broken(tokens: list[str], keyring: CheckpointKeyring) -> RunAuditError:
    with pytest.raises(RunAuditError) as caught:
        audit_run(read_log("\n".join(tokens)), keyring, source="run.log")
    return caught.value


# --------------------------------------------------------------------------- an intact run


def test_a_completed_run_is_verified_and_told_step_by_step(completed: DrivenRun, engines: Engines) -> None:
    tokens = completed.checkpoints
    history = audit_run(read_log("\n".join(tokens)), engines.keyring)
    assert [c.checkpoint.sequence for c in history.checkpoints] == list(range(1, len(tokens) + 1))
    assert [c.digest for c in history.checkpoints] == [token_digest(t) for t in tokens]
    assert list(history.steps) == completed.harness.record.steps_visited
    release = engines.releases["1.2.0"]
    assert history.releases == (("research-decision@1.2.0", release.manifest_digest, "research-decision@1.2.0"),)
    assert history.migrations == ()
    final = completed.harness.record.final
    assert final["status"] == "completed" and history.checkpoints[-1].digest == final["checkpoint_digest"]
    written = completed.harness.record.written
    assert {k: r.sha256 for k, r in history.last.artifacts.items()} == {
        k: written[k].sha256 for k in history.last.artifacts
    }
    assert set(history.last.validators) == {"evidence-auditor@1.0.0", "decision-critic@1.0.0"}
    text = "\n".join(describe(history))
    assert f"release research-decision@1.2.0 {release.manifest_digest}" in text
    assert "setup-workspace -> interview -> confirm-contract -> select-route -> desk-research" in text
    assert f"artifact findings sha256:{written['findings'].sha256}" in text
    assert "validator decision-critic@1.0.0 pass on inputs sha256:" in text


def test_a_repeated_line_is_skipped_not_a_break(completed: DrivenRun, engines: Engines) -> None:
    tokens = list(completed.checkpoints)
    history = audit_run(read_log("\n".join([*tokens[:3], tokens[2], *tokens[3:]]) + "\n\n"), engines.keyring)
    assert len(history.checkpoints) == len(tokens) and history.repeated_lines == (4,)


def test_a_migrated_run_reports_the_migration_with_its_parent_link(
    migrated: tuple[WorkflowHarness, list[str]], engines: Engines
) -> None:
    harness, tokens = migrated
    history = audit_run(read_log("\n".join(tokens)), engines.keyring)
    (migration,) = history.migrations
    old, new = engines.releases["1.2.0"], engines.releases["1.3.0"]
    assert (migration.from_release, migration.from_manifest_digest) == ("research-decision@1.2.0", old.manifest_digest)
    assert (migration.to_release, migration.to_manifest_digest) == ("research-decision@1.3.0", new.manifest_digest)
    assert migration.parent_line == migration.line - 1
    assert migration.parent_digest == token_digest(tokens[migration.parent_line - 1])
    assert history.checkpoints[migration.line - 1].checkpoint.step_id == "setup-workspace"
    assert [r[0] for r in history.releases] == ["research-decision@1.2.0", "research-decision@1.3.0"]
    assert history.steps[:4] == ("setup-workspace", "interview", "confirm-contract", "select-route")
    assert history.steps[4] == "setup-workspace" and history.last.workflow_version == "1.3.0"
    assert harness.record.final["status"] == "completed"
    assert f"migration at line {migration.line}: research-decision@1.2.0" in "\n".join(describe(history))


# --------------------------------------------------------------------------- broken chains


def test_a_gap_is_refused_at_the_line_after_it(completed: DrivenRun, engines: Engines) -> None:
    tokens = completed.checkpoints
    error = _broken([*tokens[:2], *tokens[3:]], engines.keyring)
    assert error.code is FailureCode.RUN_CHAIN_BROKEN and error.details == {"line": 3, "break": "gap"}
    assert error.path == "run.log:3" and "checkpoints 3-3 are missing" in error.message
    start = _broken(tokens[1:], engines.keyring)
    assert start.details == {"line": 1, "break": "gap"} and "starts at sequence 2" in start.message


def test_a_reorder_is_refused_where_it_happens(completed: DrivenRun, engines: Engines) -> None:
    tokens = list(completed.checkpoints)
    tokens[2], tokens[3] = tokens[3], tokens[2]
    error = _broken(tokens, engines.keyring)
    assert error.details == {"line": 3, "break": "reorder"}
    assert "logged before line 4 that it follows" in error.message


def test_a_fork_is_refused_naming_both_branches(completed: DrivenRun, engines: Engines) -> None:
    tokens = completed.checkpoints
    parent = verify_checkpoint(engines.keyring, tokens[2]).checkpoint
    sibling = issue_checkpoint(engines.keyring, parent.successor(tokens[2], issued_at=parent.issued_at + 7)).token
    assert sibling != tokens[3]
    error = _broken([*tokens[:4], sibling], engines.keyring)
    assert error.details == {"line": 5, "break": "fork"}
    assert "continues line 3 (sequence 3), which line 4 already continued" in error.message


def test_a_checkpoint_logged_again_later_is_refused_as_a_reorder(completed: DrivenRun, engines: Engines) -> None:
    tokens = completed.checkpoints
    error = _broken([*tokens[:4], tokens[1]], engines.keyring)
    assert error.details == {"line": 5, "break": "reorder"}
    assert "repeats the checkpoint of line 2" in error.message


def test_a_link_whose_sequence_is_not_the_next_is_refused(completed: DrivenRun, engines: Engines) -> None:
    """A child naming the right parent but skipping a sequence number (signed with the server's keys) breaks
    the chain at its line: sequence and parent link must agree."""
    tokens = completed.checkpoints
    parent = verify_checkpoint(engines.keyring, tokens[2]).checkpoint
    child = replace(parent.successor(tokens[2], issued_at=parent.issued_at + 7), sequence=parent.sequence + 2)
    error = _broken([*tokens[:3], issue_checkpoint(engines.keyring, child).token], engines.keyring)
    assert error.details == {"line": 4, "break": "sequence"}
    assert "expected 4" in error.message


def test_a_token_of_another_run_is_refused_as_foreign(completed: DrivenRun, engines: Engines) -> None:
    other = drive(engines, "1.2.0", "desk-research", name="other-run").checkpoints
    tokens = completed.checkpoints
    mid = _broken([*tokens[:3], other[3]], engines.keyring)
    assert mid.details == {"line": 4, "break": "foreign"} and "belongs to another run" in mid.message
    restart = _broken([*tokens[:3], other[0]], engines.keyring)
    assert restart.details == {"line": 4, "break": "foreign"} and "starts another run" in restart.message


def test_tokens_signed_with_other_keys_or_altered_are_refused(completed: DrivenRun, engines: Engines) -> None:
    tokens = completed.checkpoints
    other_keys = _broken(tokens, CheckpointKeyring.generate())
    assert other_keys.code is FailureCode.CHECKPOINT_KEY_UNKNOWN
    assert other_keys.details == {"line": 1, "break": "foreign"} and other_keys.message.startswith(
        "line 1: foreign token:"
    )
    header, claims, signature = tokens[4].split(".")
    altered = f"{header}.{claims}.{signature[:-2]}{'AA' if signature[-2:] != 'AA' else 'BA'}"
    error = _broken([*tokens[:4], altered, *tokens[5:]], engines.keyring)
    assert error.code is FailureCode.CHECKPOINT_INVALID and error.details == {"line": 5, "break": "invalid"}
    assert _broken([], engines.keyring).details == {"line": None, "break": "empty"}


# --------------------------------------------------------------------------- the CLI


def _invoke(*args: str | Path) -> Any:
    return CliRunner().invoke(main, [str(a) for a in args])


def _keys(engines: Engines, tmp_path: Path) -> Path:
    path = tmp_path / "state" / "checkpoint-keys.json"
    engines.keyring.save(path)
    return path


def test_audit_cli_prints_the_history_and_json(
    migrated: tuple[WorkflowHarness, list[str]], engines: Engines, tmp_path: Path
) -> None:
    _, tokens = migrated
    log, keys = _log(tmp_path, tokens), _keys(engines, tmp_path)
    text = _invoke("audit", log, "--checkpoint-keys", keys)
    assert text.exit_code == 0, text.output
    assert text.stdout.startswith(f"run of research-decision: {len(tokens)} checkpoint(s), chain unbroken")
    assert f"release research-decision@1.3.0 {engines.releases['1.3.0'].manifest_digest}" in text.stdout
    assert "migration at line" in text.stdout and "final: sequence" in text.stdout
    as_json = _invoke("audit", log, "--state-dir", keys.parent, "--json")
    assert as_json.exit_code == 0, as_json.output
    document = json.loads(as_json.stdout)
    assert document["ok"] is True and len(document["checkpoints"]) == len(tokens)
    assert document["migrations"][0]["to"]["manifest_digest"] == engines.releases["1.3.0"].manifest_digest
    assert document["final"]["checkpoint_digest"] == token_digest(tokens[-1])


@pytest.mark.parametrize(
    ("edit", "code", "line"),
    [
        (lambda t: [*t[:2], *t[3:]], "run_chain_broken", 3),
        (lambda t: [t[0], t[2], t[1], *t[3:]], "run_chain_broken", 2),
    ],
)
def test_audit_cli_refuses_a_broken_chain_in_one_line(
    completed: DrivenRun, engines: Engines, tmp_path: Path, edit: Callable[[list[str]], list[str]], code: str, line: int
) -> None:
    log, keys = _log(tmp_path, edit(list(completed.checkpoints))), _keys(engines, tmp_path)
    refused = _invoke("audit", log, "--checkpoint-keys", keys)
    assert refused.exit_code == 1 and refused.stdout == ""
    said = refusal(refused.stderr)
    assert said.error.startswith(f"error: {code}: {log}:{line}: line {line}: ")
    assert said.next.startswith("audit the complete log of one run")
    as_json = _invoke("audit", log, "--checkpoint-keys", keys, "--json")
    assert as_json.exit_code == 1
    assert json.loads(as_json.stdout)["error"]["details"]["line"] == line


@pytest.mark.parametrize("damage", ["other keys", "altered"])
def test_audit_cli_says_what_to_do_about_a_token_that_does_not_verify(
    completed: DrivenRun, engines: Engines, tmp_path: Path, damage: str
) -> None:
    """The next step was the live call's (start a new run, route it to another server; send the token exactly as
    the server issued it): an operator auditing a log continues no run and sends nothing."""
    tokens = list(completed.checkpoints)
    keys = _keys(engines, tmp_path)
    if damage == "other keys":
        CheckpointKeyring.generate().save(keys)
    else:
        header, claims, signature = tokens[2].split(".")
        tokens[2] = f"{header}.{claims}.{signature[:-2]}{'AA' if signature[-2:] != 'AA' else 'BA'}"
    refused = _invoke("audit", _log(tmp_path, tokens), "--checkpoint-keys", keys)
    assert refused.exit_code == 1 and refused.stdout == ""
    said = refusal(refused.stderr)
    assert "start a new run" not in said.next and "route it" not in said.next and "send the" not in said.next, said
    expected = "audit with the --checkpoint-keys" if damage == "other keys" else "the line is not a checkpoint token"
    assert said.next.startswith(expected), said


def test_audit_cli_missing_inputs_are_one_line_errors(engines: Engines, tmp_path: Path) -> None:
    keys = _keys(engines, tmp_path)
    missing_log = _invoke("audit", tmp_path / "nope.log", "--checkpoint-keys", keys)
    assert missing_log.exit_code == 1
    said = refusal(missing_log.stderr)
    assert said.error.startswith(f"error: io_error: {tmp_path / 'nope.log'}: ") and said.next.startswith(
        "give the file"
    )
    missing_keys = _invoke("audit", _log(tmp_path, ["x"]), "--checkpoint-keys", tmp_path / "none.json")
    assert missing_keys.exit_code == 1
    said = refusal(missing_keys.stderr)
    assert said.code == "key_invalid" and said.next.startswith("pass the --checkpoint-keys")


def test_audit_cli_refuses_a_log_that_is_not_utf8_at_its_line(
    completed: DrivenRun, engines: Engines, tmp_path: Path
) -> None:
    """A byte that is not UTF-8 (a log re-encoded to Latin-1) once ended audit in a UnicodeDecodeError traceback."""
    log, keys = _log(tmp_path, list(completed.checkpoints)), _keys(engines, tmp_path)
    lines = log.read_bytes().split(b"\n")
    lines[2] += b" caf\xe9"
    log.write_bytes(b"\n".join(lines))
    _refused_at_line_3(log, keys, "is not UTF-8 text (byte 0xe9)")


def _refused_at_line_3(log: Path, keys: Path, message: str) -> None:
    """``rimthan-mcp audit`` (text and --json) refuses ``log`` at line 3 as a damaged line, in one line."""
    for extra in ([], ["--json"]):
        refused = subprocess.run(
            [RIMTHAN_MCP, "audit", str(log), "--checkpoint-keys", str(keys), *extra],
            capture_output=True,
            text=True,
            timeout=120,
            env=server_env(),
        )
        assert refused.returncode == 1 and "Traceback" not in refused.stderr
        said = refusal(refused.stderr)
        assert said.error.startswith(f"error: checkpoint_invalid: {log}:3: line 3: {message}")
        assert said.next.startswith("give the file the harness wrote")
    assert json.loads(refused.stdout)["error"]["details"] == {"line": 3, "break": "invalid"}


@pytest.mark.parametrize("where", ["padded-token", "last-line"])
def test_audit_cli_refuses_a_line_past_the_bound_at_its_line(
    completed: DrivenRun, engines: Engines, tmp_path: Path, where: str
) -> None:
    """A line longer than any token is never kept whole, and refused at its line.

    Before, the whole log was read into memory: a token padded with blanks past the bound audited as valid.
    """
    tokens = list(completed.checkpoints)
    long_line = tokens[2] + " " * MAX_LOG_LINE_BYTES if where == "padded-token" else "A" * (MAX_LOG_LINE_BYTES + 1)
    log, keys = tmp_path / "run.log", _keys(engines, tmp_path)
    tail = "\n" + "\n".join(tokens[3:]) + "\n" if where == "padded-token" else ""
    log.write_text("\n".join([*tokens[:2], long_line]) + tail, encoding="utf-8")
    _refused_at_line_3(log, keys, f"is longer than {MAX_LOG_LINE_BYTES} bytes; no checkpoint token is")


def _endless_line(fifo: Path, first: list[str]) -> threading.Thread:
    """A writer that feeds ``fifo`` the ``first`` lines, then one line that never ends, until its reader goes."""

    def write() -> None:
        with contextlib.suppress(BrokenPipeError), fifo.open("wb") as out:
            out.write("".join(f"{line}\n" for line in first).encode("ascii"))
            while True:
                out.write(b"A" * 65536)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    return writer


@pytest.mark.parametrize("where", ["first-line", "after-a-gap"])
def test_audit_cli_refuses_a_line_that_never_ends_without_reading_on(
    completed: DrivenRun, engines: Engines, tmp_path: Path, where: str
) -> None:
    """A log that is a device (``/dev/zero``) or a pipe whose last line never ends: refused at the first line past
    the bound, or at the break before it. Before, the rest of that line was read before the refusal (and, after a
    break, to look for a later parent): the audit never ended."""
    keys, tokens = _keys(engines, tmp_path), list(completed.checkpoints)
    log, writer = Path("/dev/zero"), None
    if where == "after-a-gap":
        log = tmp_path / "run.log"
        os.mkfifo(log)
        writer = _endless_line(log, [tokens[0], tokens[2]])
    done = subprocess.run(
        [RIMTHAN_MCP, "audit", str(log), "--checkpoint-keys", str(keys)],
        capture_output=True, text=True, timeout=120, env=server_env(), stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    said = refusal(done.stderr)
    if writer is None:
        assert said.error.startswith(f"error: checkpoint_invalid: {log}:1: line 1: is longer than {MAX_LOG_LINE_BYTES}")
    else:
        writer.join(timeout=30)
        assert not writer.is_alive()
        assert said.error.startswith(f"error: run_chain_broken: {log}:2: line 2: sequence 3 after sequence 1"), said


def test_audit_cli_streams_a_log_of_many_lines_as_the_whole_text_audits(
    completed: DrivenRun, engines: Engines, tmp_path: Path
) -> None:
    """Each checkpoint logged 200 times, CRLF line ends and blank lines: the history of the text, line for line."""
    tokens = completed.checkpoints
    text = "\r\n\r\n".join(token for token in tokens for _ in range(200)) + "\r\n  \n"
    log = tmp_path / "many.log"
    log.write_bytes(text.encode("utf-8"))
    expected = audit_run(read_log(text), engines.keyring).to_json()
    audited = _invoke("audit", log, "--checkpoint-keys", _keys(engines, tmp_path), "--json")
    assert audited.exit_code == 0, audited.output
    document = json.loads(audited.stdout)
    assert {key: document[key] for key in expected} == expected
    assert len(document["repeated_lines"]) == 199 * len(tokens)
    assert document["checkpoints"][-1]["line"] == 2 * 200 * (len(tokens) - 1) + 1  # blank lines counted


def test_audit_cli_names_a_break_before_a_damaged_line_further_on(
    completed: DrivenRun, engines: Engines, tmp_path: Path
) -> None:
    """The log is audited in line order: a gap at line 3 is the answer, not a bad byte at line 5."""
    tokens = list(completed.checkpoints)
    log, keys = tmp_path / "run.log", _keys(engines, tmp_path)
    log.write_bytes("\n".join([*tokens[:2], *tokens[3:]]).encode("utf-8").replace(tokens[5].encode(), b"caf\xe9"))
    refused = _invoke("audit", log, "--checkpoint-keys", keys)
    assert refused.exit_code == 1
    assert refusal(refused.stderr).error.startswith(f"error: run_chain_broken: {log}:3: line 3: ")


def test_a_migration_to_another_host_is_told_with_the_host_of_every_checkpoint(engines: Engines) -> None:
    """A migration may rebind the run to another harness (its ``host``); the history names the new host."""
    source, kit = engines.wire("1.2.0"), engines.harness("host-move")
    state = kit.confirm(example_state("1.2.0"))
    started = source.start_workflow({"workflow": "research", "confirmed_state": state, "host": kit.host()})
    advanced = kit.pass_setup(source, started, state)
    engines.clock.tick()
    opencode = kit.with_host(harness="opencode", adapter_id="opencode").host()
    request = {
        "target_release": "research-decision@1.3.0",
        "confirmed_state": kit.confirm({**example_state("1.2.0"), "risk_tolerance": "medium"}),
        "host": opencode,
        "confirm": True,
    }
    moved = source.migrate_workflow(
        engines.module("1.3.0"), {"checkpoint": advanced["checkpoint"], "confirmed_state": state, "migration": request}
    )
    assert moved["status"] == "active", moved["failures"]
    history = audit_run(read_log("\n".join(r["checkpoint"] for r in (started, advanced, moved))), engines.keyring)
    hosts = [c["host"] for c in history.to_json()["checkpoints"]]
    assert [h["harness"] for h in hosts] == ["claude-code", "claude-code", "opencode"]
    assert hosts[-1] == {
        "harness": "opencode",
        "adapter_version": "1.0.0",
        "capabilities": sorted(opencode["capabilities"]),
        "validator_capabilities": sorted(opencode["validator_capabilities"]),
    }
    text = "\n".join(describe(history))
    assert "host claude-code adapter 1.0.0 -> opencode adapter 1.0.0" in text, text
