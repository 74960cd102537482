"""What a release engineer meets in a catalogue source beside its definitions: the version a rebuild should
become, worked examples that no longer match their schemas, and schema files no workflow references.

Every test drives the installed ``rimthan-pack`` console script in a subprocess, on a source
``rimthan-pack init`` made (or a copy of a packaged catalogue) and real keys.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.pack_cli import init_scaffold, pack
from support.refusals import Refusal, refusal
from support.releases import KeyPair


@pytest.fixture(scope="module")
def scaffold(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return init_scaffold(tmp_path_factory.mktemp("scaffold"))


def _at_version(scaffold: Path, tmp_path: Path, version: str) -> Path:
    """A copy of the scaffold in the version folder ``my-flow/<version>``, its catalogue.toml saying so."""
    source = tmp_path / "my-flow" / version
    shutil.copytree(scaffold, source)
    toml = source / "catalogue.toml"
    toml.write_text(toml.read_text("utf-8").replace('version = "0.1.0"', f'version = "{version}"', 1), "utf-8")
    return source


def _builds(source: Path, keypair: KeyPair, out: Path) -> str:
    built = pack("build", source, "--key", keypair.private_path, "--out", out)
    assert built.returncode == 0, built.stderr
    return built.stderr


def _refused(source: Path, keypair: KeyPair, out: Path) -> Refusal:
    built = pack("build", source, "--key", keypair.private_path, "--out", out)
    assert built.returncode == 1, built.stderr
    return refusal(built.stderr)


# --------------------------------------------------------------------------- the version a rebuild should become


# (the version built twice, the one the next step says to copy it to): by the one semantic-version rule
NEXT_VERSIONS = [
    ("2.0.0-rc.1", "2.0.0-rc.2"),
    ("1.0.0-beta", "1.0.0-beta.1"),
    ("1.0.0-rc.9.x", "1.0.0-rc.10"),
    ("0.3.0+build.7", "0.3.1"),
    ("1.0.0-alpha.1+nightly", "1.0.0-alpha.2"),
]


@pytest.mark.parametrize(("version", "bumped"), NEXT_VERSIONS)
def test_rebuilding_a_pre_release_says_to_copy_it_to_the_next_version_which_builds(
    scaffold: Path, keypair: KeyPair, tmp_path: Path, version: str, bumped: str
) -> None:
    """A pre-release's next step named NEW_VERSION (its own regex took only MAJOR.MINOR.PATCH); now the next one."""
    source, out = _at_version(scaffold, tmp_path, version), tmp_path / "rel"
    _builds(source, keypair, out)

    said = _refused(source, keypair, out)

    new = tmp_path / "my-flow" / bumped
    assert said.code == "release_exists"
    assert said.next == (
        f"releases are immutable: copy the source to a new version folder (cp -r {source} {new}), "
        f'set version = "{bumped}" under [catalogue] in its catalogue.toml, and build that'
    )
    copied = _at_version(scaffold, tmp_path, bumped)  # the step as written: a copy, its version set
    assert copied == new
    _builds(copied, keypair, out)
    assert sorted(p.name for p in out.iterdir()) == [f"my-flow-{v}" for v in sorted((version, bumped))]
