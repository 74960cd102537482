"""A fleet rotates its checkpoint key in two phases (`keys add`, then `keys promote`) and no run is refused.

Real key files written by the installed ``rimthan-mcp keys``, real HTTP
replicas (``rimthan-mcp serve``), one run driven to completion by the host
harness with every tool call sent to the other replica than the one before:
during a rolling restart a run meets replicas holding the file before and
after each phase.
"""

from __future__ import annotations

import base64
import json
import shutil
import signal
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import anyio
from rimthan_host.harness import RunResult, WorkflowHarness
from rimthan_host.protocol import ToolCaller, client_caller
from support.processes import HttpServer, http_server_process
from support.refusals import refusal
from support.servers import RIMTHAN_MCP, harness, http_client_for, server_env


def _keys(*args: str | Path) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([RIMTHAN_MCP, "keys", *map(str, args)], capture_output=True, text=True, check=False)
    return proc


def _signing(path: Path) -> str:
    return str(json.loads(path.read_text("utf-8"))["signing_key_id"])


@contextmanager
def _replicas(tmp_path: Path, releases: dict[str, Path], trust: Path, *key_files: Path) -> Iterator[list[str]]:
    """One HTTP replica per key file, all serving 1.2.0; their URLs."""
    with ExitStack() as stack:
        urls = []
        for n, keys in enumerate(key_files):
            args = ["serve", "--release", str(releases["1.2.0"]), "--trust", str(trust), "--checkpoint-keys", str(keys)]
            args += ["--state-dir", str(tmp_path / f"state-{keys.stem}-{n}"), "--transport", "http", "--port", "0"]
            server: HttpServer = stack.enter_context(http_server_process([RIMTHAN_MCP, *args], env=server_env()))
            urls.append(server.url)
        yield urls


def _kid(token: str) -> str:
    header = token.split(".")[0]
    return str(json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))["kid"])


class Alternating:
    """A tool caller that sends each call to the next replica in turn (a balancer with no stickiness)."""

    def __init__(self) -> None:
        self.callers: list[ToolCaller] = []
        self.calls = 0
        self.signed_by: set[str] = set()

    async def __call__(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        caller = self.callers[self.calls % len(self.callers)]
        self.calls += 1
        result = await caller(tool, arguments)
        if isinstance(result.get("checkpoint"), str):
            self.signed_by.add(_kid(result["checkpoint"]))
        return result


async def _drive(urls_by_phase: list[list[str]], project: Path) -> tuple[RunResult, list[set[str]]]:
    """One run: started in the first phase, a few calls in each, completed in the last; keys that signed per phase.

    The checkpoints each phase's replicas issued: each replica resumes the run from the other's.
    """
    balancer = Alternating()
    run: WorkflowHarness = harness(balancer, project)
    result: RunResult | None = None
    signed: list[set[str]] = []
    for n, urls in enumerate(urls_by_phase):
        async with http_client_for(urls[0]) as first, http_client_for(urls[1]) as second:
            balancer.callers, balancer.signed_by = [client_caller(first), client_caller(second)], set()
            if n == 0:
                result = await run.start("research", initial_version="1.2.0")
            last = n == len(urls_by_phase) - 1
            assert result is not None
            result = await run.run(result, until_step=None if last else "interview")
            signed.append(balancer.signed_by)
    assert result is not None
    return result, signed


def test_a_fleet_rotates_in_two_phases_and_no_run_is_refused(
    tmp_path: Path, packaged_releases: dict[str, Path], trust: Path
) -> None:
    old = tmp_path / "old.json"
    assert _keys("rotate", "--checkpoint-keys", old).returncode == 0
    first = _signing(old)
    added = tmp_path / "added.json"
    shutil.copy2(old, added)
    said = _keys("add", "--checkpoint-keys", added)
    assert said.returncode == 0 and said.stdout.startswith("added ck-"), said.stderr
    new = said.stdout.split()[1]
    assert _signing(added) == first and f"keys promote {new}" in said.stderr
    listed = _keys("list", "--checkpoint-keys", added).stdout
    assert f"{first}\tsigning" in listed and f"{new}\tverify-only" in listed, listed
    promoted = tmp_path / "promoted.json"
    shutil.copy2(added, promoted)
    said = _keys("promote", new, "--checkpoint-keys", promoted)
    assert said.returncode == 0 and _signing(promoted) == new, said.stderr
    listed = _keys("list", "--checkpoint-keys", promoted).stdout
    assert f"{new}\tsigning" in listed and f"{first}\tverify-only" in listed, listed

    with (
        _replicas(tmp_path, packaged_releases, trust, old, added) as phase_1,
        _replicas(tmp_path, packaged_releases, trust, added, promoted) as phase_2,
    ):
        done, signed = anyio.run(_drive, [phase_1, phase_2], tmp_path / "project")
    assert done.status == "completed", done
    assert signed[0] == {first}, signed  # phase 1: the added key verifies, nobody signs with it
    assert signed[1] == {first, new}, signed  # phase 2: both sign, each replica verifies the other's checkpoints
    rotated = tmp_path / "rotated.json"  # the reason for two phases: `keys rotate` on one replica's file
    shutil.copy2(old, rotated)
    assert _keys("rotate", "--checkpoint-keys", rotated).returncode == 0
    retired = tmp_path / "retired.json"  # the old key retired too soon, under a run it signed
    shutil.copy2(rotated, retired)
    assert _keys("retire", first, "--checkpoint-keys", retired).returncode == 0
    with _replicas(tmp_path, packaged_releases, trust, old, rotated, retired) as at_once:
        unknown = anyio.run(_refused_across, at_once[1], at_once[0], tmp_path / "project-2")
        gone = anyio.run(_refused_across, at_once[0], at_once[2], tmp_path / "project-3")
    assert unknown["code"] == "checkpoint_key_unknown", unknown
    # the next step names the likely cause and the fix, not only "start a new run" (one line)
    assert "checkpoint keys differ from the one that issued it" in unknown["next"], unknown
    assert "STATE_DIR/checkpoint-keys.json" in unknown["next"] and "--checkpoint-keys FILE" in unknown["next"], unknown
    assert "\n" not in unknown["next"], unknown
    assert gone["code"] == "checkpoint_key_unknown" and "retired key" in gone["message"], gone
    assert gone["next"].startswith("start a new run: checkpoints of a key retired with"), gone


async def _refused_across(signer_url: str, other_url: str, project: Path) -> dict[str, Any]:
    """The error ``other_url`` answers a checkpoint ``signer_url`` issued."""
    async with http_client_for(signer_url) as signer, http_client_for(other_url) as other:
        run = harness(client_caller(signer), project)
        started = await run.start("research", initial_version="1.2.0")
        arguments = {"checkpoint": started.wire["checkpoint"], "confirmed_state": run.state.projection()}
        refused = await other.call_tool("rimthan.continue_workflow", arguments)
        return dict(refused.structured_content["error"])


def test_promoting_an_unknown_or_retired_key_is_refused_with_the_next_step(tmp_path: Path) -> None:
    keys = tmp_path / "keys.json"
    assert _keys("rotate", "--checkpoint-keys", keys).returncode == 0
    first = _signing(keys)
    unknown = refusal(_keys("promote", "ck-0000000000000000", "--checkpoint-keys", keys).stderr)
    assert unknown.code == "key_invalid" and "ck-0000000000000000" in unknown.error, unknown
    assert "keys list" in unknown.next, unknown
    assert _keys("rotate", "--checkpoint-keys", keys).returncode == 0
    assert _keys("retire", first, "--checkpoint-keys", keys).returncode == 0
    retired = refusal(_keys("promote", first, "--checkpoint-keys", keys).stderr)
    assert retired.code == "key_invalid" and "retired" in retired.error, retired
    assert "keys add" in retired.next, retired
    assert "retired (archived for audit)" in _keys("list", "--checkpoint-keys", keys).stdout
    again = _keys("promote", _signing(keys), "--checkpoint-keys", keys)
    assert again.returncode == 0 and "already signs" in again.stdout, again.stderr


def _hup(server: HttpServer) -> list[dict[str, Any]]:
    """SIGHUP, then every JSON log line up to its ``refresh done``."""
    seen = len(server.lines)
    server.process.send_signal(signal.SIGHUP)
    server.wait_for('"refresh done"', after=seen)
    return [json.loads(line) for line in server.lines[seen:] if line.startswith("{")]


def test_a_key_file_changed_under_a_running_replica_is_said_at_the_next_refresh_not_reloaded(
    tmp_path: Path, packaged_releases: dict[str, Path], trust: Path
) -> None:
    """An operator runs `keys add` and sends SIGHUP, as a trust store change is taken: the refresh said nothing of
    the key file, and the replica went on with the keys it started with while the operator went on to `promote`.
    Now the refresh says, once per change, that the file holds other keys and that a restart takes them."""
    keys = tmp_path / "checkpoint-keys.json"
    assert _keys("rotate", "--checkpoint-keys", keys).returncode == 0
    first = _signing(keys)
    changed = "checkpoint key file changed; not reloaded until restart"
    args = [
        "serve",
        "--release",
        str(packaged_releases["1.2.0"]),
        "--trust",
        str(trust),
        "--checkpoint-keys",
        str(keys),
    ]
    args += ["--state-dir", str(tmp_path / "state"), "--transport", "http", "--port", "0"]
    with http_server_process([RIMTHAN_MCP, *args], env=server_env()) as server:
        assert changed not in [r["event"] for r in _hup(server)]  # unchanged: nothing said
        added = _keys("add", "--checkpoint-keys", keys).stdout.split()[1]
        said = [r for r in _hup(server) if r["event"] == changed]
        again = [r for r in _hup(server) if r["event"] == changed]
    assert len(said) == 1 and said[0]["level"] == "warning", said
    assert said[0]["running"] == {"signing": first, "verify_only": [], "retired": []}, said
    assert said[0]["in_file"] == {"signing": first, "verify_only": [added], "retired": []}, said
    assert said[0]["next"].startswith("restart this server"), said
    assert again == [], again  # once per change, not at every refresh
