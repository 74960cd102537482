"""A released catalogue version's source is never edited: a change is a new version, an adapter's change a new
adapter version.

The OpenCode adapter's move to the plural folders (``.opencode/commands/``, ``skills/``, ``agents/``) was
made in place in the 1.2.0 and 1.3.0 sources, keeping ``opencode@1.0.0``: a rebuild of 1.2.0 then signed other
bytes under a released version (``make demo`` warned that the source changed since the release), and two
releases each named ``opencode@1.0.0`` with different install paths. Both sources are as released again, and
the change is 1.3.1, with ``opencode@1.1.0``. Each released source's files are pinned here (paths and SHA-256):
a change to one fails this test, saying to make a new version.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from rimthan_workflow_registry.release import VerifiedRelease, load_trust, verify_release
from support.pack_cli import pack
from support.releases import PACKAGED_CATALOGUE, KeyPair, make_keypair, trust_dir

RELEASED = {  # a catalogue version's source as released; never changed (a change is a new version folder)
    "1.2.0": "d2d3eca9b0b2fcc0941eb5b29b745295ef34c80679f5f54b50fcbe56b502d20c",
    "1.3.0": "c6a970ee401086278b94c8efe853ef1ec29214690222dc20bb6eaddb994fc0f4",
}
SOURCES = ("1.2.0", "1.3.0", "1.3.1")


def _files_digest(root: Path) -> str:
    """SHA-256 over each file's path and SHA-256, in path order: what a source would ship."""
    said = hashlib.sha256()
    for file in sorted(p for p in root.rglob("*") if p.is_file()):
        said.update(f"{file.relative_to(root).as_posix()}\0{hashlib.sha256(file.read_bytes()).hexdigest()}\n".encode())
    return said.hexdigest()


@pytest.mark.parametrize("version", sorted(RELEASED))
def test_a_released_source_is_as_released(version: str) -> None:
    assert _files_digest(PACKAGED_CATALOGUE / version) == RELEASED[version], (
        f"catalogues/research-decision/{version} changed since it was released: a release is never edited; "
        "copy the source to a new version folder and make the change there (a changed adapter: a new adapter version)"
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, VerifiedRelease]:
    root = tmp_path_factory.mktemp("released")
    key: KeyPair = make_keypair(root / "keys", "release-engineer")
    trust = load_trust(trust_dir(root / "trust", key))
    releases = {}
    for version in SOURCES:
        done = pack("build", PACKAGED_CATALOGUE / version, "--key", key.private_path, "--out", root / "out")
        assert done.returncode == 0, done.stderr
        releases[version] = verify_release(root / "out" / f"research-decision-{version}", trust)
    return releases


def test_one_adapter_version_is_one_set_of_bytes_in_every_release(built: dict[str, VerifiedRelease]) -> None:
    seen: dict[str, tuple[str, bytes, bytes]] = {}
    for version, release in built.items():
        for adapter in release.catalogue.host_adapters:
            root = PACKAGED_CATALOGUE / version
            said = (version, (root / adapter.source).read_bytes(), (root / adapter.instruction).read_bytes())
            first = seen.setdefault(adapter.key, said)
            assert first[1:] == said[1:], f"{adapter.key} differs between {first[0]} and {version}"


def test_the_plural_opencode_folders_are_opencode_1_1_0_in_1_3_1(built: dict[str, VerifiedRelease]) -> None:
    paths = {
        version: {a.key: dict(a.paths) for a in release.catalogue.host_adapters} for version, release in built.items()
    }
    singular = {"prompt": ".opencode/command/{id}.md", "skill": ".opencode/skill/{id}/SKILL.md",
                "subagent": ".opencode/agent/{id}.md", "adapter": ".opencode/rimthan/{id}.md"}  # fmt: skip
    assert paths["1.2.0"]["opencode@1.0.0"] == paths["1.3.0"]["opencode@1.0.0"] == singular
    assert paths["1.3.1"]["opencode@1.1.0"] == {
        "prompt": ".opencode/commands/{id}.md",
        "skill": ".opencode/skills/{id}/SKILL.md",
        "subagent": ".opencode/agents/{id}.md",
        "adapter": ".opencode/rimthan/{id}.md",
    }
    (workflow,) = built["1.3.1"].catalogue.workflows
    assert workflow.host_adapters == ("claude-code@1.0.0", "opencode@1.1.0")


def test_one_validator_version_is_one_instruction_in_every_release(built: dict[str, VerifiedRelease]) -> None:
    """Receipts are keyed by a validator's ``id@version``: a changed instruction is a new validator version
    (1.3.1's validators, whose integrity check compares a digest only when given one, are 1.1.1)."""
    seen: dict[str, tuple[str, bytes]] = {}
    for version, release in built.items():
        for workflow in release.catalogue.workflows:
            for validator in workflow.validators:
                said = (version, (PACKAGED_CATALOGUE / version / validator.instruction).read_bytes())
                first = seen.setdefault(validator.key, said)
                assert first[1] == said[1], f"{validator.key} differs between {first[0]} and {version}"
    assert {"evidence-auditor@1.1.1", "decision-critic@1.1.1"} <= set(seen)
