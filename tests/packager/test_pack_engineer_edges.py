"""A release engineer's edges with ``rimthan-pack``: a release without ``signatures/``, init's bounds,
Ctrl-C, a source that is not there, a private key others can read."""

from __future__ import annotations

import shutil
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from rimthan_packager.cli import cli
from rimthan_workflow_registry.limits import MAX_VERSION_CHARS
from rimthan_workflow_registry.release.format import SIGNATURES_DIR, signature_name
from support.releases import KeyPair


def run(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_sign_makes_the_signatures_directory_a_release_lost(
    signed_release: Path, keypair: KeyPair, trust: Path
) -> None:
    shutil.rmtree(signed_release / SIGNATURES_DIR)
    assert "signature_missing" in run("verify", signed_release, "--trust", trust).stderr

    signed = run("sign", signed_release, "--key", keypair.private_path)

    assert signed.exit_code == 0, signed.output
    directory = signed_release / SIGNATURES_DIR
    assert stat.S_IMODE(directory.stat().st_mode) == 0o755
    assert [p.name for p in directory.iterdir()] == [signature_name(keypair.key_id)]
    assert run("verify", signed_release, "--trust", trust).exit_code == 0


def test_init_refuses_a_version_folder_past_the_version_bound(tmp_path: Path) -> None:
    version = "1.0.0-" + "a" * (MAX_VERSION_CHARS - 5)  # one past the bound, still semantic
    directory = tmp_path / "demo" / version

    result = run("init", directory)

    assert result.exit_code == 1, result.output
    error, next_line = result.stderr.splitlines()
    assert error.startswith(f"error: catalogue_invalid: {directory}: the version this folder names is "), error
    assert f"past the {MAX_VERSION_CHARS} a version may have in a tool call (MAX_VERSION_CHARS)" in error
    assert next_line == f"next: name the version folder with a shorter version: rimthan-pack init {tmp_path}/demo/0.1.0"
    assert not directory.exists()


def test_init_takes_a_version_folder_at_the_bound_and_it_builds(tmp_path: Path, keypair: KeyPair) -> None:
    directory = tmp_path / "demo" / ("1.0.0-" + "a" * (MAX_VERSION_CHARS - 6))
    assert run("init", directory).exit_code == 0
    built = run("build", directory, "--key", keypair.private_path, "--out", tmp_path / "out")
    assert built.exit_code == 0, built.output


@pytest.mark.parametrize("where", ["absent", "empty directory"])  # a file is click's usage mistake
def test_build_from_a_path_that_is_no_source_says_to_check_the_path(
    tmp_path: Path, keypair: KeyPair, where: str
) -> None:
    source = tmp_path / "src"
    if where == "empty directory":
        source.mkdir()

    result = run("build", source, "--key", keypair.private_path, "--out", tmp_path / "out")

    assert result.exit_code == 1, result.output
    error, next_line = result.stderr.splitlines()
    assert error.startswith("error: catalogue_invalid: "), error
    assert next_line.startswith("next: check the SOURCE path: it names the directory that holds catalogue.toml"), (
        next_line
    )


def test_build_from_a_release_says_it_is_a_release_not_to_check_for_catalogue_toml(
    tmp_path: Path, keypair: KeyPair, scaffold: Path
) -> None:
    """A release passed as SOURCE was "no catalogue.toml here": it has one, in catalogue/, so the path looked right."""
    assert run("build", scaffold, "--key", keypair.private_path, "--out", tmp_path / "rel").exit_code == 0
    release = next((tmp_path / "rel").iterdir())

    result = run("build", release, "--key", keypair.private_path, "--out", tmp_path / "again")

    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines() == [
        f"error: catalogue_invalid: {release}: this is a built release, not a catalogue source (it has "
        "manifest.json and no catalogue.toml)",
        "next: pass the catalogue source it was built from (catalogues/NAME/VERSION): a release is built once",
    ]
    assert not (tmp_path / "again").exists()
