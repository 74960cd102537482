"""A release that breaks several catalogue rules is refused with each broken rule said, not the first alone.

The loader ran the catalogue rules in order and stopped at the first that failed, so an author or operator
fixed one, rebuilt or re-checked, and met the next. Now every rule runs (one that presupposes another, such
as the routes needing every step reference resolved, only once that one passed) and each broken one is a
failure of its own, in the order the rules run. A real release built by the real packager, its workflow
edited and re-signed with the real key through the real signing code, checked by the installed
``rimthan-mcp check`` and ``rimthan-pack verify``, and served by ``rimthan-mcp serve`` (each in
``details.also`` of the ``release not activated`` log line). Likewise each text file that is not UTF-8 and
each JSON Schema that is not valid Draft 2020-12.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from rimthan_workflow_registry.release import CATALOGUE_DIR
from support.processes import http_server_process
from support.refusals import Refusal, refusals
from support.releases import resign_release
from support.servers import RIMTHAN_MCP, RIMTHAN_PACK, ServerWorld, server_env

WORKFLOW = "workflows/research-decision.toml"
EDITS = [  # (what the source says, what the edited release says), one broken rule each
    (
        'instruction = "assets/instructions/interview.md"',
        'instruction = "assets/instructions/interviews.md"',
    ),
    (
        'validators = ["decision-critic@1.1.0"]',
        'validators = ["decision-critic@1.0.9"]',
    ),
    (
        'instruction = "assets/instructions/confirm-contract.md"',
        'instruction = "assets/instructions/confirm-contract.md"\nmax_total_bytes = 1024',
    ),
]
SAID = [  # in the order the rules run: files exist, references resolve, step shapes
    ("reference_unresolved", "references missing file 'assets/instructions/interviews.md'"),
    ("reference_unresolved", "step decision-record names unknown validator 'decision-critic@1.0.9'"),
    ("catalogue_invalid", "step confirm-contract caps total bytes but declares no outputs"),
]
WAIT = 120.0


def _broken(world: ServerWorld, releases: Path) -> Path:
    release = world.publish("1.3.0", releases)

    def edit(catalogue: Path) -> None:
        text = (catalogue / WORKFLOW).read_text("utf-8")
        for before, after in EDITS:
            assert text.count(before) == 1, before
            text = text.replace(before, after)
        (catalogue / WORKFLOW).write_text(text, "utf-8")

    resign_release(release, [world.key], edit=edit)
    return release


@pytest.mark.parametrize("cli", ["rimthan-mcp check", "rimthan-pack verify"])
def test_every_broken_rule_is_said(mcp_world: ServerWorld, tmp_path: Path, cli: str) -> None:
    release = _broken(mcp_world, tmp_path / "releases")
    trust = str(mcp_world.trust)
    command = (
        [RIMTHAN_MCP, "check", "--release", str(release), "--trust", trust]
        if cli == "rimthan-mcp check"
        else [RIMTHAN_PACK, "verify", str(release), "--trust", trust]
    )
    done = subprocess.run(command, capture_output=True, text=True, timeout=WAIT, env=server_env())
    assert done.returncode == 1, done.stdout + done.stderr
    said = refusals(done.stderr)
    where = f"{release / CATALOGUE_DIR / WORKFLOW}: "
    assert [r.code for r in said] == [code for code, _ in SAID], done.stderr
    for refusal, (code, message) in zip(said, SAID, strict=True):
        assert refusal.error.startswith(f"error: {code}: {where}") and message in refusal.error, done.stderr


def test_serve_logs_every_broken_rule_of_a_skipped_release(mcp_world: ServerWorld, tmp_path: Path) -> None:
    releases = tmp_path / "releases"
    mcp_world.publish("1.2.0", releases)
    bad = _broken(mcp_world, releases)
    args = [RIMTHAN_MCP, "serve", "--releases-dir", str(releases), "--trust", str(mcp_world.trust),
            "--state-dir", str(tmp_path / "state"), "--port", "0", "--transport", "http"]  # fmt: skip
    with http_server_process(args, env=server_env()) as server:
        said = "".join(server.lines)
    (warned,) = [
        w
        for w in (json.loads(line) for line in said.splitlines() if line.startswith("{"))
        if w["event"] == "release not activated"
    ]
    error = warned["error"]
    everyone = [(error["code"], error["message"]), *((e["code"], e["message"]) for e in error["details"]["also"])]
    assert [code for code, _ in everyone] == [code for code, _ in SAID]
    assert all(message in m for (_, m), (_, message) in zip(everyone, SAID, strict=True)), everyone
    assert {e["path"] for e in error["details"]["also"]} == {str(bad / CATALOGUE_DIR / WORKFLOW)}


def _resigned(world: ServerWorld, releases: Path, edit: Callable[[Path], None]) -> Path:
    release = world.publish("1.3.0", releases)
    resign_release(release, [world.key], edit=edit)
    return release


NOT_UTF8 = ["assets/instructions/confirm-contract.md", "assets/instructions/interview.md"]  # in the order checked
BAD_SCHEMAS = ["schemas/evidence-log.schema.json", "schemas/workspace-manifest.schema.json"]


def _check(world: ServerWorld, release: Path) -> list[Refusal]:
    done = subprocess.run(
        [RIMTHAN_MCP, "check", "--release", str(release), "--trust", str(world.trust)],
        capture_output=True, text=True, timeout=WAIT, env=server_env(),
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    return refusals(done.stderr)


def test_every_file_that_is_not_utf8_is_said(mcp_world: ServerWorld, tmp_path: Path) -> None:
    def latin1(catalogue: Path) -> None:
        for name in NOT_UTF8:
            (catalogue / name).write_bytes((catalogue / name).read_bytes() + "caf\xe9\n".encode("latin-1"))

    release = _resigned(mcp_world, tmp_path / "releases", latin1)
    said = _check(mcp_world, release)
    assert [r.error.split(": ", 3)[:3] for r in said] == [
        ["error", "catalogue_invalid", str(release / CATALOGUE_DIR / name)] for name in NOT_UTF8
    ]
    # each keeps the rule's own next step through the release load (was the code's generic one)
    assert [r.next.split(" as UTF-8 ")[0] for r in said] == [f"save {name}" for name in NOT_UTF8], said
    assert all(" is not UTF-8" in r.next and ", column " in r.next for r in said), said


def test_every_invalid_schema_is_said(mcp_world: ServerWorld, tmp_path: Path) -> None:
    def invalid(catalogue: Path) -> None:
        for name in BAD_SCHEMAS:
            schema = json.loads((catalogue / name).read_text("utf-8"))
            schema["type"] = "objekt"  # not a JSON Schema type: the metaschema refuses it
            (catalogue / name).write_text(json.dumps(schema), "utf-8")

    release = _resigned(mcp_world, tmp_path / "releases", invalid)
    said = _check(mcp_world, release)
    assert [r.error.split(": ", 3)[:3] for r in said] == [
        ["error", "schema_invalid", str(release / CATALOGUE_DIR / name)] for name in BAD_SCHEMAS
    ]
