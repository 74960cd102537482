"""``rimthan-mcp check --migration-target`` tells a release engineer which workflows' runs could not migrate.

A new catalogue version whose workflow keeps its old ``version`` builds, signs, verifies and serves; only
when a user asks to migrate a run is it refused (``migration_not_newer``), and a workflow the target drops
(``workflow_not_found``). ``check`` says both before the release ships: one warning per workflow on stderr,
exit 0 (serve would load both releases). Installed console scripts, releases built from ``rimthan-pack init``.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from support.pack_cli import pack
from support.releases import KeyPair, make_keypair, trust_dir
from support.servers import RIMTHAN_MCP, server_env


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, KeyPair, Path]:
    """``my-flow`` 0.1.0 built from the scaffold; a trust dir; the source folder it came from."""
    root = tmp_path_factory.mktemp("gaps")
    signer = make_keypair(root, "author")
    source = root / "cat" / "my-flow" / "0.1.0"
    assert pack("init", source).returncode == 0
    assert pack("build", source, "--key", signer.private_path, "--out", root / "rel").returncode == 0
    return root, signer, trust_dir(root / "trust", signer)


def _version(world: tuple[Path, KeyPair, Path], version: str, workflow_version: str | None) -> Path:
    """A new catalogue version built from 0.1.0's source, its workflow at ``workflow_version`` (None: no workflow)."""
    root, signer, _ = world
    source = root / "cat" / "my-flow" / version
    shutil.copytree(root / "cat" / "my-flow" / "0.1.0", source)
    toml = source / "catalogue.toml"
    toml.write_text(toml.read_text("utf-8").replace('version = "0.1.0"', f'version = "{version}"'), "utf-8")
    if workflow_version is None:  # the only workflow renamed: the target no longer has my-flow
        flow = source / "workflows" / "my-flow.toml"
        flow.write_text(flow.read_text("utf-8").replace('id = "my-flow"', 'id = "other-flow"', 1), "utf-8")
        toml.write_text(toml.read_text("utf-8").replace("workflows/my-flow.toml", "workflows/other-flow.toml"))
        flow.rename(flow.with_name("other-flow.toml"))
    else:
        flow = source / "workflows" / "my-flow.toml"
        flow.write_text(flow.read_text("utf-8").replace('version = "0.1.0"', f'version = "{workflow_version}"', 1))
    built = pack("build", source, "--key", signer.private_path, "--out", root / "rel")
    assert built.returncode == 0, built.stderr
    return root / "rel" / f"my-flow-{version}"


def _check(world: tuple[Path, KeyPair, Path], target: Path) -> subprocess.CompletedProcess[str]:
    root, _, trust = world
    args = ["check", "--release", str(root / "rel" / "my-flow-0.1.0"), "--migration-target", str(target)]
    return subprocess.run(
        [RIMTHAN_MCP, *args, "--trust", str(trust)], capture_output=True, text=True, timeout=120, env=server_env()
    )


def test_a_target_whose_workflow_kept_its_version_is_named_with_the_file_to_bump(
    world: tuple[Path, KeyPair, Path],
) -> None:
    target = _version(world, "0.2.0", "0.1.0")  # the catalogue bumped, the workflow not

    checked = _check(world, target)

    assert checked.returncode == 0 and len(checked.stdout.splitlines()) == 2, checked
    assert checked.stderr.splitlines() == [
        f"warning: migration_not_newer: {target / 'manifest.json'}: runs of workflow my-flow@0.1.0 cannot "
        "migrate: release my-flow@0.2.0 has workflow my-flow@0.1.0, not a newer version",
        "next: in the target's source, give my-flow a newer version than 0.1.0 (version in "
        "workflows/my-flow.toml) and build it as a new release",
    ]
    # the step taken: the workflow's version bumped too, the check is quiet
    quiet = _check(world, _version(world, "0.2.1", "0.2.0"))
    assert quiet.returncode == 0 and quiet.stderr == "", quiet
    assert [line.split()[1] for line in quiet.stdout.splitlines()] == ["my-flow@0.1.0", "my-flow@0.2.1"]


def test_a_target_that_drops_a_workflow_is_named(world: tuple[Path, KeyPair, Path]) -> None:
    target = _version(world, "0.3.0", None)

    checked = _check(world, target)

    assert checked.returncode == 0, checked
    assert checked.stderr.splitlines()[0] == (
        f"warning: workflow_not_found: {target / 'manifest.json'}: runs of workflow my-flow@0.1.0 cannot "
        "migrate: release my-flow@0.3.0 has no workflow my-flow"
    )


def test_serve_says_the_same_in_its_start_lines(world: tuple[Path, KeyPair, Path]) -> None:
    """An operator starting the explicit two-release mode reads it before the first user asks to migrate."""
    root, _, trust = world
    target = root / "rel" / "my-flow-0.2.0"
    if not target.exists():
        _version(world, "0.2.0", "0.1.0")
    args = ["serve", "--release", str(root / "rel" / "my-flow-0.1.0"), "--migration-target", str(target)]
    served = subprocess.run(
        [RIMTHAN_MCP, *args, "--trust", str(trust), "--state-dir", str(root / "serve-state")],
        capture_output=True,
        text=True,
        timeout=120,
        env=server_env(),
        stdin=subprocess.DEVNULL,  # no client: the server starts, reads end of input, stops
    )

    assert (
        "rimthan-mcp: warning: migration_not_newer: runs of workflow my-flow@0.1.0 cannot migrate: release "
        "my-flow@0.2.0 has workflow my-flow@0.1.0, not a newer version; in the target's source, give my-flow a "
        "newer version than 0.1.0 (version in workflows/my-flow.toml) and build it as a new release"
    ) in served.stderr.splitlines(), served.stderr
