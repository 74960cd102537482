"""Metaschema passes remembered by schema digest and validator version, in the server's state directory.

A serving process records the SHA-256 of every catalogue schema that passed
the Draft 2020-12 metaschema check; a restart on the same state directory
reads them back. Bytes never seen (or seen under another jsonschema) are
checked again, failures are never remembered, and a malformed file is
ignored rather than trusted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from rimthan_packager.source import read_source
from rimthan_workflow_mcp.contract_checks import check_contract_schema
from rimthan_workflow_mcp.provider import ReleaseProvider
from rimthan_workflow_mcp.server import runtime_state
from rimthan_workflow_mcp.tool_contracts import contract_documents
from rimthan_workflow_registry.canonical import canonical_bytes
from rimthan_workflow_registry.errors import CatalogueError, FailureCode, RegistryError
from rimthan_workflow_registry.release import manifest_parse
from rimthan_workflow_registry.release import verify as verify_module
from rimthan_workflow_registry.release.loader import ReleaseLoader
from rimthan_workflow_registry.release.schema_checks import (
    SCHEMA_CHECKS,
    SCHEMA_CHECKS_FILE,
    SchemaCheckCache,
    canonical_form_version,
    check_key,
    validator_version,
)
from rimthan_workflow_registry.release.trust import load_trust
from rimthan_workflow_registry.run.tokens import CheckpointKeyring
from support.releases import make_keypair, trust_dir


@pytest.fixture(autouse=True)
def _process_memory_not_persisted() -> Iterator[None]:
    yield
    SCHEMA_CHECKS.persist_to(None)  # later tests must not write into this test's tmp_path


def _schemas(release: Path) -> dict[str, bytes]:
    root = release / "catalogue"
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*.schema.json"))}


def test_serving_records_every_schema_that_passed(signed_release: Path, trust: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    ReleaseProvider.open(signed_release, trust=load_trust(trust), keyring=CheckpointKeyring.generate(), state_dir=state)
    document = json.loads((state / SCHEMA_CHECKS_FILE).read_text("utf-8"))
    schemas = _schemas(signed_release)
    assert schemas
    assert {check_key(data) for data in schemas.values()} <= set(document["passed"])

    restarted = SchemaCheckCache()
    restarted.persist_to(state / SCHEMA_CHECKS_FILE)
    assert all(restarted.passed(data) for data in schemas.values())
    assert not restarted.passed(next(iter(schemas.values())) + b" ")  # one byte more: never seen


def test_key_binds_the_digest_and_the_validator_version() -> None:
    key = check_key(b"{}")
    assert key.startswith("44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a:")
    assert key.endswith(validator_version())
    assert "jsonschema-" in validator_version() and "2020-12" in validator_version()


def test_an_invalid_schema_is_refused_and_never_remembered(scaffold: Path) -> None:
    schema = next(scaffold.rglob("*.schema.json"))
    schema.write_text(json.dumps({"type": "not-a-type"}), encoding="utf-8")
    for _ in range(2):
        with pytest.raises(CatalogueError) as info:
            ReleaseLoader.load(read_source(scaffold))
        assert info.value.code is FailureCode.SCHEMA_INVALID
    assert not SCHEMA_CHECKS.passed(schema.read_bytes())


@pytest.mark.parametrize(
    "content",
    [
        "not json",
        json.dumps({"format": "other", "passed": []}),
        json.dumps({"format": 1}),
        "[]",
        "[" * 100_000 + "]" * 100_000,  # deeper than the stack: a RecursionError once stopped serve at start
    ],
    ids=["not-json", "other-format", "format-not-text", "array", "nested-past-the-stack"],
)
def test_a_malformed_file_is_ignored_then_rewritten(tmp_path: Path, content: str) -> None:
    path = tmp_path / SCHEMA_CHECKS_FILE
    path.write_text(content, encoding="utf-8")
    cache = SchemaCheckCache()
    cache.persist_to(path)
    assert not cache.passed(b"{}")
    cache.remember([b"{}"])
    assert json.loads(path.read_text("utf-8"))["passed"] == [check_key(b"{}")]


def test_serving_records_the_manifest_form_and_the_server_contracts(
    signed_release: Path, trust: Path, tmp_path: Path
) -> None:
    """A restart on the same state directory skips re-serialising the manifest and the contract metaschema checks."""
    state = tmp_path / "state"
    provider = ReleaseProvider.open(
        signed_release, trust=load_trust(trust), keyring=CheckpointKeyring.generate(), state_dir=state
    )
    runtime_state(provider)
    restarted = SchemaCheckCache()
    restarted.persist_to(state / SCHEMA_CHECKS_FILE)
    manifest = (signed_release / "manifest.json").read_bytes()
    assert restarted.passed(manifest, canonical_form_version())
    assert not restarted.passed(manifest)  # a canonical-form pass is not a metaschema pass
    assert all(restarted.passed(canonical_bytes(document)) for document in contract_documents().values())


def test_an_unsigned_manifest_is_never_remembered(
    signed_release: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fresh = SchemaCheckCache()  # this process may have seen the same manifest bytes, signed, in another test
    monkeypatch.setattr(verify_module, "SCHEMA_CHECKS", fresh)
    monkeypatch.setattr(manifest_parse, "SCHEMA_CHECKS", fresh)
    other = make_keypair(tmp_path / "keys", "stranger")
    with pytest.raises(RegistryError):
        ReleaseProvider.open(
            signed_release,
            trust=load_trust(trust_dir(tmp_path / "trust", other)),
            keyring=CheckpointKeyring.generate(),
            state_dir=tmp_path / "state",
        )
    assert not fresh.passed((signed_release / "manifest.json").read_bytes(), canonical_form_version())


def test_a_contract_that_is_not_a_schema_is_refused_and_never_remembered() -> None:
    bad = {"type": "object", "additionalProperties": False, "properties": {"a": {"type": 5}}}
    for _ in range(2):
        with pytest.raises(RegistryError) as info:
            check_contract_schema(bad, "contract bad")
        assert info.value.code is FailureCode.SCHEMA_INVALID
    assert not SCHEMA_CHECKS.passed(canonical_bytes(bad))
