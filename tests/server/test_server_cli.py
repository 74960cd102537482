"""The operator CLI: ``rimthan-mcp serve`` defaults and refusals, ``check``, ``keys``.

``serve`` runs as a real process (stdin at EOF: it loads, serves, sees the
client go away and exits); ``check`` and ``keys`` run through click's runner.
Every refusal must be one line on stderr, with no traceback.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from mcp import types
from rimthan_host.harness import client_caller
from rimthan_workflow_mcp.cli import main
from rimthan_workflow_mcp.provider import ReleaseProvider
from rimthan_workflow_mcp.server import create_mcp_application
from rimthan_workflow_registry.below_floor import read_below_floor
from rimthan_workflow_registry.release.trust import load_trust
from rimthan_workflow_registry.run.tokens import CheckpointKeyring
from support.checked_client import CheckedClient
from support.refusals import refusal
from support.servers import ServerWorld, build_world, flip_byte, harness, server_env, structured_error


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("cli-world"))


def _serve(args: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rimthan_workflow_mcp", "serve", *args],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        env={**server_env(), **(env or {})},
    )


def _serve_release(world: ServerWorld, release: Path, state: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """``serve --release RELEASE`` with the world's trust and ``state`` as state directory, from ``state``'s parent."""
    args = ["--release", str(release), "--trust", str(world.trust), "--state-dir", str(state), *extra]
    return _serve(args, cwd=state.parent)


def _one_line_error(stderr: str) -> str:
    """The refusal's error line (the ``next:`` line is checked by ``refusal``)."""
    return refusal(stderr).error


def test_serve_with_no_flags_serves_the_newest_packaged_release(world: ServerWorld, tmp_path: Path) -> None:
    project = tmp_path / "checkout"
    world.publish("1.2.0", project / "releases")
    world.publish("1.3.0", project / "releases")
    shutil.copytree(world.trust, project / "keys" / "local")
    state = tmp_path / "state"

    served = _serve([], cwd=project, env={"RIMTHAN_STATE_DIR": str(state)})
    assert served.returncode == 0, served.stderr
    assert served.stdout == ""  # stdout is the MCP wire: nothing else may be written there
    assert "rimthan-mcp: release research-decision@1.3.0 sha256:" in served.stderr
    assert f"checkpoint keys {state / 'checkpoint-keys.json'} (created)" in served.stderr
    assert "transport stdio" in served.stderr and "migration target: none" in served.stderr
    assert stat.S_IMODE(os.stat(state / "checkpoint-keys.json").st_mode) == 0o600
    again = _serve([], cwd=project, env={"RIMTHAN_STATE_DIR": str(state)})
    assert f"checkpoint keys {state / 'checkpoint-keys.json'} (loaded)" in again.stderr


def test_serve_refuses_an_unverifiable_release_in_one_line(world: ServerWorld, tmp_path: Path) -> None:
    release = world.publish("1.2.0", tmp_path / "releases")
    flip_byte(release)
    served = _serve_release(world, release, tmp_path / "s")
    assert served.returncode == 1
    refused = refusal(served.stderr)
    assert refused.code == "file_digest_mismatch" and "interview.md" in refused.error
    assert refused.next.startswith("the file was changed after signing: restore the release")


def test_serve_refuses_a_rollback_below_the_floor_in_one_line(world: ServerWorld, tmp_path: Path) -> None:
    state = tmp_path / "state"
    world.provider("1.3.0", state_dir=state)
    served = _serve_release(world, world.built["1.2.0"], state)
    record, *refused = served.stderr.splitlines()  # the log record a program reads, then the words
    assert served.returncode == 1 and read_below_floor(record) is not None, served.stderr
    assert "rollback_refused" in _one_line_error("\n".join(refused))
    lowered = _serve_release(world, world.built["1.2.0"], state, "--lower-floor")
    assert lowered.returncode == 0 and "research-decision >= 1.2.0" in lowered.stderr
    said = [json.loads(line) for line in lowered.stderr.splitlines() if '"activation floor lowered"' in line]
    assert len(said) == 1 and said[0]["level"] == "warning", lowered.stderr  # a rollback leaves a trace
    assert said[0]["from"].startswith("1.3.0 (sha256:") and said[0]["to"].startswith("1.2.0 (sha256:"), said
    assert said[0]["catalogue"] == "research-decision" and said[0]["path"] == str(state / "activation-floor.json")


def test_serve_refuses_checkpoint_keys_git_would_track(world: ServerWorld, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    served = _serve_release(world, world.built["1.2.0"], tmp_path / "s", "--checkpoint-keys", str(repo / "keys.json"))
    assert served.returncode == 1
    assert "key_path_tracked" in _one_line_error(served.stderr)
    assert not (repo / "keys.json").exists()


def test_check_names_an_older_release_it_would_not_hold(world: ServerWorld, tmp_path: Path) -> None:
    """It printed a bare ``older release not held`` (Python's last-resort handler): no release, no reason."""
    releases = tmp_path / "releases"
    older = world.publish("1.2.0", releases)
    newer = world.publish("1.3.0", releases)
    flip_byte(older)
    checked = subprocess.run(
        [sys.executable, "-m", "rimthan_workflow_mcp", "check", "--release", str(newer), "--trust", str(world.trust)],
        capture_output=True, text=True, timeout=120, env=server_env(), check=False,
    )  # fmt: skip
    assert checked.returncode == 0 and checked.stdout.startswith("ok research-decision@1.3.0"), checked.stderr
    lines = checked.stderr.splitlines()
    assert "older release not held" not in lines, checked.stderr
    said = [json.loads(line) for line in lines if '"older release not held"' in line]
    assert len(said) == 1 and said[0]["path"] == str(older), checked.stderr
    assert said[0]["error"]["code"] == "file_digest_mismatch", said


def test_check_verifies_exactly_as_serve_would(world: ServerWorld, tmp_path: Path) -> None:
    runner = CliRunner()
    ok = runner.invoke(
        main,
        [
            "check",
            "--release",
            str(world.built["1.2.0"]),
            "--trust",
            str(world.trust),
            "--migration-target",
            str(world.built["1.3.0"]),
        ],
    )
    assert ok.exit_code == 0, ok.output
    assert ok.stdout.count("ok research-decision@") == 2
    bad_release = world.publish("1.2.0", tmp_path / "releases")
    flip_byte(bad_release)
    bad = runner.invoke(main, ["check", "--release", str(bad_release), "--trust", str(world.trust)])
    assert bad.exit_code == 1
    assert "file_digest_mismatch" in _one_line_error(bad.stderr)
    untrusted = runner.invoke(
        main, ["check", "--release", str(world.built["1.2.0"]), "--trust", str(tmp_path / "nowhere")]
    )
    assert untrusted.exit_code == 1 and "trust_store_invalid" in _one_line_error(untrusted.stderr)


def test_check_builds_each_release_engine_as_the_first_tool_call_would(world: ServerWorld) -> None:
    """serve builds the engine on the first tool call; check builds it before exiting, so a broken one refuses."""
    script = (
        "import sys\n"
        "from rimthan_workflow_mcp.cli import main\n"
        "try:\n"
        "    main(sys.argv[1:])\n"
        "finally:\n"
        "    print('engine built:', 'rimthan_workflow_mcp.workflow_engine' in sys.modules)\n"
    )
    args = ["check", "--release", str(world.built["1.2.0"]), "--trust", str(world.trust)]
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "ok research-decision@" in done.stdout
    assert done.stdout.rstrip().endswith("engine built: True")


def test_keys_rotate_then_retire_keeps_old_checkpoints_until_retired(world: ServerWorld, tmp_path: Path) -> None:
    runner = CliRunner()
    keys = tmp_path / "state" / "checkpoint-keys.json"
    first = runner.invoke(main, ["keys", "rotate", "--checkpoint-keys", str(keys)])
    assert first.exit_code == 0, first.output
    assert stat.S_IMODE(os.stat(keys).st_mode) == 0o600
    old_kid = CheckpointKeyring.load(keys).signing_key_id

    def provider() -> ReleaseProvider:
        return ReleaseProvider.open(
            world.built["1.2.0"], trust=load_trust(world.trust), keyring=CheckpointKeyring.load(keys)
        )

    async def start() -> tuple[str, dict[str, Any]]:
        async with CheckedClient(create_mcp_application(provider())) as client:
            run = harness(client_caller(client), tmp_path / "p")
            started = await run.start("research", initial_version="1.2.0")
            return started.wire["checkpoint"], run.state.projection()

    async def resume(checkpoint: str, state: dict[str, Any]) -> types.CallToolResult:
        async with CheckedClient(create_mcp_application(provider())) as client:
            return await client.call_tool(
                "rimthan.continue_workflow", {"checkpoint": checkpoint, "confirmed_state": state}
            )

    checkpoint, state = anyio.run(start)
    rotated = runner.invoke(main, ["keys", "rotate", "--checkpoint-keys", str(keys)])
    assert rotated.exit_code == 0
    listed = runner.invoke(main, ["keys", "list", "--checkpoint-keys", str(keys)])
    assert f"{old_kid}\tverify-only" in listed.stdout and listed.stdout.count("\tsigning") == 1
    assert 'key":' not in listed.stdout and CheckpointKeyring.load(keys).keys[old_kid].hex() not in listed.stdout
    assert not anyio.run(resume, checkpoint, state).is_error  # the old key still verifies

    refused = runner.invoke(
        main, ["keys", "retire", CheckpointKeyring.load(keys).signing_key_id, "--checkpoint-keys", str(keys)]
    )
    assert refused.exit_code == 1 and "rotate to a new signing key" in _one_line_error(refused.stderr)
    retired = runner.invoke(main, ["keys", "retire", old_kid, "--checkpoint-keys", str(keys)])
    assert retired.exit_code == 0
    assert f"{old_kid}\tretired" in runner.invoke(main, ["keys", "list", "--checkpoint-keys", str(keys)]).stdout
    assert structured_error(anyio.run(resume, checkpoint, state))["code"] == "checkpoint_key_unknown"
