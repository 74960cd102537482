"""A catalogue declares the one profile rimthan-mcp serves, or it is refused before anything is signed.

Before, ``[scope].profile = "workflow-engin"`` (one letter short) built and signed a release that
``rimthan-pack verify`` and ``rimthan-mcp serve`` then refused (``scope_mismatch``) every time: a signed release
nothing would ever load. ``check`` and ``build`` now refuse it, naming catalogue.toml and the value to set.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.pack_cli import edit_text, init_scaffold, pack
from support.refusals import refusal
from support.releases import KeyPair, make_keypair

SERVED = 'profile = "workflow-engine"'


@pytest.fixture(scope="module")
def signer(tmp_path_factory: pytest.TempPathFactory) -> KeyPair:
    return make_keypair(tmp_path_factory.mktemp("keys"), "author")


@pytest.mark.parametrize("command", ["check", "build"])
def test_a_misspelt_profile_is_refused_and_nothing_is_written(signer: KeyPair, tmp_path: Path, command: str) -> None:
    source = init_scaffold(tmp_path / "src")
    edit_text(source / "catalogue.toml", SERVED, 'profile = "workflow-engin"')
    out = tmp_path / "out"
    keys: list[str | Path] = ["--key", signer.private_path, "--out", out] if command == "build" else []
    done = pack(command, source, *keys)
    assert done.returncode == 1, done.stdout
    said = refusal(done.stderr)
    assert said.error == (
        f"error: catalogue_invalid: {source / 'catalogue.toml'}: [scope].profile is 'workflow-engin', but "
        "rimthan-mcp serves only 'workflow-engine': the release would be signed, then refused by rimthan-pack "
        "verify and rimthan-mcp (scope_mismatch)"
    )
    assert said.next == 'set profile = "workflow-engine" under [scope] in catalogue.toml'
    assert not out.exists()
