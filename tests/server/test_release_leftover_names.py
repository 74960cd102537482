"""A release signed before the build refused editor backups and file-browser files (``Thumbs.db``,
``desktop.ini``) and listing one still loads: that rule is the build's hygiene, not a load's safety.

The packager refuses such a file in a source (``path_unsafe``, tests/packager/test_pack_authoring_slips.py),
so no release it builds now lists one; a release built before that rule did, and its signed, verifying bytes
harm nothing (never delivered into a project unless a workflow names them). The load keeps refusing what is
unsafe whenever it was signed: a hidden name (the names this project's own temporary files take), a ``..``
segment, a control character. Real releases built by the real packager, the file written in and re-signed
with the real key through the real signing code, each loaded by the installed ``rimthan-mcp`` (``check``, and
``serve`` with a real MCP client for one).
"""

from __future__ import annotations

import base64
import shutil
import subprocess
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from rimthan_workflow_registry.release import MANIFEST_NAME
from support.refusals import refusal
from support.releases import resign_release
from support.servers import RIMTHAN_MCP, ServerWorld, serve_args, server_env, stdio_client_for

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


def _check(world: ServerWorld, release: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [RIMTHAN_MCP, "check", "--release", str(release), "--trust", str(world.trust)],
        capture_output=True, text=True, timeout=WAIT, env=server_env(),
    )  # fmt: skip


@pytest.mark.parametrize("name", LEFTOVERS)
def test_check_loads_a_signed_release_listing_a_leftover(mcp_world: ServerWorld, tmp_path: Path, name: str) -> None:
    release = _signed_with(mcp_world, tmp_path, name)
    done = _check(mcp_world, release)
    assert done.returncode == 0, done.stdout + done.stderr


def test_serve_serves_a_release_listing_thumbs_db(mcp_world: ServerWorld, tmp_path: Path) -> None:
    name = "assets/instructions/Thumbs.db"
    release = _signed_with(mcp_world, tmp_path, name)
    args = serve_args(mcp_world, release, state_dir=tmp_path / "state")

    async def served() -> None:
        async with stdio_client_for(args, (tmp_path / "stderr.log").open("w")) as client:
            uris = [str(r.uri) for r in (await client.list_resources()).resources]
            (uri,) = [u for u in uris if u.endswith(f"/{name}")]
            (part,) = (await client.read_resource(uri)).contents  # signed bytes, served as they are
            assert isinstance(part, types.BlobResourceContents) and base64.b64decode(part.blob) == b"an older copy\n"

    anyio.run(served)


@pytest.mark.parametrize(
    ("name", "said"),
    [
        (".DS_Store", "hidden files, hidden directories and __pycache__ are never part of a release"),
        ("assets/.pull-1", "hidden files, hidden directories and __pycache__ are never part of a release"),
    ],
)
def test_a_hidden_name_is_still_refused_at_load(mcp_world: ServerWorld, tmp_path: Path, name: str, said: str) -> None:
    release = _signed_with(mcp_world, tmp_path, name)
    done = _check(mcp_world, release)
    assert done.returncode == 1, done.stdout + done.stderr
    assert refusal(done.stderr).error == f"error: path_unsafe: {release / MANIFEST_NAME}: lists path {name!r}: {said}"
