"""A release engineer's edges with ``rimthan-pack``: a release without ``signatures/``, init's bounds,
Ctrl-C, a source that is not there, a private key others can read."""

from __future__ import annotations

import shutil
import stat
from pathlib import Path

from click.testing import CliRunner, Result
from rimthan_packager.cli import cli
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
