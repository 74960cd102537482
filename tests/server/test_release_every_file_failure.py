"""A release whose files fail their digests is refused with every such file said, not the first alone.

The file check stopped at the first file whose SHA-256 is not the manifest's, so an operator whose copy had
three changed files fixed one, ran ``check`` again and found the next. Now each is said (one failure each, in
manifest order, at most 20), the check going on past a digest mismatch, and ending at any other failure (a
missing file), which is said last. Real releases built by the real packager and signed with the real key,
the files then changed on disk, checked by the installed ``rimthan-mcp check`` and ``rimthan-pack verify``.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from rimthan_workflow_registry.release import CATALOGUE_DIR
from support.refusals import refusals
from support.servers import RIMTHAN_MCP, RIMTHAN_PACK, ServerWorld, server_env

CHANGED = [  # in manifest (path) order
    "assets/instructions/desk-research.md",
    "assets/instructions/interview.md",
    "schemas/evidence-log.schema.json",
]
WAIT = 120.0


def _flip_last_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01  # same size: only the digest tells
    path.write_bytes(bytes(data))


def _changed(world: ServerWorld, tmp_path: Path) -> Path:
    release = world.publish("1.3.0", tmp_path / "releases")
    for name in CHANGED:
        _flip_last_byte(release / CATALOGUE_DIR / name)
    return release


def _said(command: list[str]) -> list[tuple[str, str]]:
    done = subprocess.run(command, capture_output=True, text=True, timeout=WAIT, env=server_env())
    assert done.returncode == 1, done.stdout + done.stderr
    return [(r.code, r.error.split(": ", 3)[2]) for r in refusals(done.stderr)]


@pytest.mark.parametrize("cli", ["rimthan-mcp check", "rimthan-pack verify"])
def test_every_file_whose_digest_differs_is_said(mcp_world: ServerWorld, tmp_path: Path, cli: str) -> None:
    release = _changed(mcp_world, tmp_path)
    command = (
        [RIMTHAN_MCP, "check", "--release", str(release), "--trust", str(mcp_world.trust)]
        if cli == "rimthan-mcp check"
        else [RIMTHAN_PACK, "verify", str(release), "--trust", str(mcp_world.trust)]
    )
    assert _said(command) == [("file_digest_mismatch", str(release / CATALOGUE_DIR / n)) for n in CHANGED]


def test_a_missing_file_after_changed_ones_ends_the_list(mcp_world: ServerWorld, tmp_path: Path) -> None:
    release = _changed(mcp_world, tmp_path)
    (release / CATALOGUE_DIR / "workflows" / "research-decision.toml").unlink()  # listed after every changed file
    said = _said([RIMTHAN_MCP, "check", "--release", str(release), "--trust", str(mcp_world.trust)])
    assert said == [
        *[("file_digest_mismatch", str(release / CATALOGUE_DIR / n)) for n in CHANGED],
        ("file_missing", str(release / CATALOGUE_DIR / "workflows" / "research-decision.toml")),
    ]


def test_at_most_twenty_are_said(mcp_world: ServerWorld, tmp_path: Path) -> None:
    release = mcp_world.publish("1.3.0", tmp_path / "releases")
    files = sorted(p for p in (release / CATALOGUE_DIR).rglob("*") if p.is_file())
    assert len(files) > 20
    for path in files:
        _flip_last_byte(path)
    said = _said([RIMTHAN_MCP, "check", "--release", str(release), "--trust", str(mcp_world.trust)])
    assert len(said) == 20 and {code for code, _ in said} == {"file_digest_mismatch"}
