"""An instruction or asset a step payload carries holds at most a catalogue file's size (1 MiB).

The host kit takes no asset past ``MAX_CATALOGUE_FILE_BYTES`` from a verifier (it refuses the setup, saying to
check that the verifier is rimthan-mcp: tests/host/test_bridge_hostile_verifier.py). Before, ``rimthan-pack``
built and signed a catalogue with a 3 MB prompt and rimthan-mcp served it, so every run of an honest release
failed at setup with that hint. The build now refuses such a file, naming it. A release signed already keeps
loading (a build-only rule, as the schema keywords are): the server quotes a large file from disk, and other
harnesses may take it (tests/server/test_call_placement.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from rimthan_workflow_registry.limits import MAX_CATALOGUE_FILE_BYTES
from support.pack_cli import init_scaffold, pack
from support.refusals import refusal
from support.releases import KeyPair, make_keypair, resign_release, trust_dir

PROMPT = "assets/prompts/brief.md"
SAID = (
    "is {size} bytes; an instruction or asset delivered to harnesses holds at most 1048576 (a catalogue file's bound)"
)


@pytest.fixture(scope="module")
def signer(tmp_path_factory: pytest.TempPathFactory) -> KeyPair:
    return make_keypair(tmp_path_factory.mktemp("keys"), "author")


def _grow(path: Path, size: int) -> None:
    path.write_bytes(b"# Brief\n" + b"a" * (size - 9) + b"\n")


def test_a_prompt_past_the_bound_is_refused_at_build_and_nothing_is_written(signer: KeyPair, tmp_path: Path) -> None:
    source = init_scaffold(tmp_path / "src")
    _grow(source / PROMPT, MAX_CATALOGUE_FILE_BYTES + 1)
    out = tmp_path / "out"
    built = pack("build", source, "--key", signer.private_path, "--out", out)
    assert built.returncode == 1, built.stdout
    said = refusal(built.stderr)
    where = f"error: catalogue_invalid: {source / PROMPT}: "
    assert said.error == where + SAID.format(size=MAX_CATALOGUE_FILE_BYTES + 1)
    assert said.next == "shorten the file, or split it into assets or steps of at most 1048576 bytes each"
    assert not out.exists() or not any(out.iterdir())


def test_a_prompt_at_the_bound_builds(signer: KeyPair, tmp_path: Path) -> None:
    source = init_scaffold(tmp_path / "src")
    _grow(source / PROMPT, MAX_CATALOGUE_FILE_BYTES)
    built = pack("build", source, "--key", signer.private_path, "--out", tmp_path / "out")
    assert built.returncode == 0, built.stderr


def test_a_signed_release_with_such_a_prompt_still_verifies(signer: KeyPair, tmp_path: Path) -> None:
    """A release signed with a prompt past the bound (re-signed here, as before the rule) keeps verifying: the rule
    is the build's, so what loaded before still loads."""
    source = init_scaffold(tmp_path / "src")
    assert pack("build", source, "--key", signer.private_path, "--out", tmp_path / "out").returncode == 0
    release = tmp_path / "out" / "my-flow-0.1.0"
    resign_release(release, [signer], edit=lambda catalogue: _grow(catalogue / PROMPT, 3_000_000))
    checked = pack("verify", release, "--trust", trust_dir(tmp_path / "trust", signer))
    assert checked.returncode == 0, checked.stderr
