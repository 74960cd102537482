"""A signed release listing an editor's backup, swap file, patch leftover or file-browser file (``Thumbs.db``,
``desktop.ini``) is refused at load, as at build.

The packager refuses such a file in a source (``path_unsafe``), so no release
it builds lists one; a release signed by other means (an insider's script, a
tree copied with an editor open) loaded once such a file was listed. Real
releases built by the real packager and re-signed with the real key, each
loaded by the installed ``rimthan-mcp`` (``check``, and ``serve`` for one).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from rimthan_workflow_registry.release import MANIFEST_NAME
from support.refusals import refusal
from support.releases import resign_release
from support.servers import RIMTHAN_MCP, ServerWorld, server_env

LEFTOVERS = [  # what tests/packager/test_pack_authoring_slips.py shows the packager refuses at build
    "assets/instructions/interview.md~",
    "assets/instructions/interview.swp",
    "assets/instructions/interview.md.swo",
    "catalogue.toml.orig",
    "workflows/research-decision.toml.rej",
    "assets/instructions/INTERVIEW.MD.ORIG",
    "assets/instructions/#interview.md#",
    "assets/instructions/Thumbs.db",
    "examples/desktop.ini",
]
WAIT = 120.0


def _signed_with(world: ServerWorld, tmp_path: Path, name: str) -> Path:
    release = tmp_path / world.built["1.2.0"].name
    shutil.copytree(world.built["1.2.0"], release)
    resign_release(release, [world.key], edit=lambda catalogue: (catalogue / name).write_bytes(b"an older copy\n"))
    assert f'"{name}"' in (release / MANIFEST_NAME).read_text("utf-8")  # listed and signed
    return release


def _assert_refused(stderr: str, release: Path, name: str, *, allow_before: bool = False) -> None:
    said = refusal(stderr, allow_before=allow_before)
    assert said.error == (
        f"error: path_unsafe: {release / MANIFEST_NAME}: lists path {name!r}: editor backups, swap files, patch "
        "leftovers and file-browser files (a name ending in ~, .swp, .swo, .orig or .rej, #name#, Thumbs.db or "
        "desktop.ini) are never part of a release"
    ), stderr


@pytest.mark.parametrize("name", LEFTOVERS)
def test_check_refuses_a_signed_release_listing_a_leftover(mcp_world: ServerWorld, tmp_path: Path, name: str) -> None:
    release = _signed_with(mcp_world, tmp_path, name)
    done = subprocess.run(
        [RIMTHAN_MCP, "check", "--release", str(release), "--trust", str(mcp_world.trust)],
        capture_output=True, text=True, timeout=WAIT, env=server_env(),
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    _assert_refused(done.stderr, release, name)


def test_serve_refuses_it_before_serving(mcp_world: ServerWorld, tmp_path: Path) -> None:
    name = LEFTOVERS[0]
    release = _signed_with(mcp_world, tmp_path, name)
    command = [RIMTHAN_MCP, "serve", "--release", str(release), "--trust", str(mcp_world.trust)]
    done = subprocess.run(
        [*command, "--state-dir", str(tmp_path / "state")],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=WAIT, env=server_env(),
    )  # fmt: skip
    assert done.returncode == 1 and done.stdout == "", done.stdout + done.stderr
    _assert_refused(done.stderr, release, name, allow_before=True)
    shutil.rmtree(release)
    release = _signed_with(mcp_world, tmp_path, "assets/instructions/tilde~name.md")  # only looks like one
    done = subprocess.run(
        [RIMTHAN_MCP, "check", "--release", str(release), "--trust", str(mcp_world.trust)],
        capture_output=True, text=True, timeout=WAIT, env=server_env(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
