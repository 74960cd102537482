"""The host kit computes exactly the published host-protocol test vectors.

``docs/test-vectors/host-protocol.json`` is the reference another-language
implementation checks itself against; the kit is checked against the same
file (confirmations, the workspace manifest and its attestation, output
attestations read back from disk, validator reports), so both agree with the
core by construction of the vectors' own test.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rimthan_host.confirmations import BY_SCRIPT, ConfirmedStateBook
from rimthan_host.files import ProjectFiles
from rimthan_host.protocol import HostProfile
from rimthan_host.reports import validator_report
from rimthan_host.workspace import set_up_workspace, workspace_manifest

VECTORS = Path(__file__).resolve().parents[2] / "docs" / "test-vectors" / "host-protocol.json"


@pytest.fixture(scope="module")
def vectors() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(VECTORS.read_text("utf-8"))
    return document


def _profile(host: dict[str, Any]) -> HostProfile:
    return HostProfile(
        harness=host["harness"],
        adapter_id=host["adapter"]["id"],
        adapter_version=host["adapter"]["version"],
        capabilities=tuple(host["capabilities"]),
        validator_capabilities=tuple(host["validator_capabilities"]),
        writable_paths=tuple(host["repository_policy"]["writable_paths"]),
        protected_paths=tuple(host["repository_policy"]["protected_paths"]),
    )


def test_confirmations_match_the_vector_projection(vectors: dict[str, Any]) -> None:
    expected = vectors["confirmed_state"]["projection"]
    book = ConfirmedStateBook(clock=lambda: float(vectors["fixed"]["clock_start"]))
    for name, value in expected["state"].items():
        book.confirm(name, value, by=BY_SCRIPT)
    assert book.projection() == expected
    assert _profile(vectors["fixed"]["host"]).to_json() == vectors["fixed"]["host"]


def test_workspace_setup_writes_the_vector_manifest_bytes(vectors: dict[str, Any], tmp_path: Path) -> None:
    workspace = vectors["workspace_manifest"]
    profile = _profile(vectors["fixed"]["host"])
    assert workspace_manifest(profile, list(workspace["manifest"]["delivered"])) == workspace["manifest"]
    # the setup step as the verifier sends it: the assets' texts are the release files the vectors digest
    step = {
        "host_assets": [
            {
                **row,
                "id": row["asset"],
                "install_path": row["path"],
                "media_type": "text/markdown",
                "text": _release_text(row["uri"]),
            }
            for row in workspace["expected_deliveries"]
        ],
        "outputs": [
            {
                "id": workspace["artifact"]["artifact_id"],
                "path": workspace["artifact"]["path"],
                "media_type": workspace["artifact"]["media_type"],
            }
        ],
    }
    written = set_up_workspace(ProjectFiles(tmp_path), step, profile)
    artifact = written.to_artifact()
    assert artifact["content"] == workspace["artifact"]["content"]
    assert artifact["attestation"]["sha256"] == workspace["artifact_sha256"]


def _release_text(uri: str) -> str:
    """A release file's text from the packaged catalogue (the URI's path after the manifest hex)."""
    path = uri.split("/", 4)[4]
    return (Path(__file__).resolve().parents[2] / "catalogues" / "research-decision" / "1.2.0" / path).read_text(
        "utf-8"
    )


def test_outputs_read_back_from_disk_attest_as_the_vectors(vectors: dict[str, Any], tmp_path: Path) -> None:
    files = ProjectFiles(tmp_path)
    written = []
    for raw in vectors["output_attestations"]["artifacts"]:
        target = tmp_path / raw["path"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(raw["content"].encode("utf-8"))  # the model writes the file with its own tools
        attested = files.attest(raw["artifact_id"], raw["path"], raw["media_type"], existed_before=False)
        assert attested.to_artifact() == raw
        written.append(attested)
    bindings = vectors["report_bindings"]
    profile = _profile(vectors["fixed"]["host"])
    for validator, report in zip(bindings["validators"], bindings["reports"], strict=True):
        summary = {k: validator[k] for k in ("validator_id", "version", "instruction_digest")}
        assert validator_report(summary, "pass", [], written, profile) == report
