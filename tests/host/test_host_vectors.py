"""The host kit's library checked against the published host test vectors (docs/test-vectors/).

The same file another implementation checks itself against: value digests
and confirmations, the workspace setup and its manifest, output attestations
read back from disk, validator report bindings, and a short run's checkpoint log.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rimthan_host.confirmations import BY_SCRIPT, ConfirmedStateBook
from rimthan_host.project_files import ProjectFiles
from rimthan_host.protocol import HostProfile
from rimthan_host.reports import validator_report
from rimthan_host.runlog import RunLog
from rimthan_host.workspace import set_up_workspace, workspace_manifest
from rimthan_workflow_registry.canonical import canonical_text

REPO = Path(__file__).resolve().parents[2]
VECTORS: dict[str, Any] = json.loads((REPO / "docs" / "test-vectors" / "host-protocol.json").read_text("utf-8"))


def _host() -> HostProfile:
    return HostProfile.from_json(VECTORS["fixed"]["host"])


def test_the_host_profile_is_the_vectors_host_argument() -> None:
    assert _host().to_json() == VECTORS["fixed"]["host"]


@pytest.mark.parametrize("vector", VECTORS["value_digests"], ids=lambda v: v["name"])
def test_a_confirmation_carries_the_vectors_value_digest(vector: dict[str, Any]) -> None:
    book = ConfirmedStateBook()
    book.confirm("field", vector["value"])
    assert book.confirmations["field"]["value_digest"] == vector["value_digest"]


def test_the_confirmed_state_fields_have_the_vectors_digests() -> None:
    vector = VECTORS["confirmed_state"]
    book = ConfirmedStateBook()
    for name, value in vector["projection"]["state"].items():
        book.confirm(name, value)
    assert {k: c["value_digest"] for k, c in book.confirmations.items()} == vector["field_digests"]


def test_a_scripted_confirmation_book_projects_as_the_vectors() -> None:
    expected = VECTORS["confirmed_state"]["projection"]
    book = ConfirmedStateBook(clock=lambda: float(VECTORS["fixed"]["clock_start"]))
    for name, value in expected["state"].items():
        book.confirm(name, value, by=BY_SCRIPT)
    assert book.projection() == expected


def test_the_workspace_manifest_is_byte_for_byte_the_vectors(tmp_path: Path) -> None:
    vector = VECTORS["workspace_manifest"]
    delivered = [{k: d[k] for k in ("asset", "kind", "path", "sha256")} for d in vector["expected_deliveries"]]
    manifest = workspace_manifest(_host(), delivered)
    assert manifest == vector["manifest"]
    artifact = vector["artifact"]
    written = ProjectFiles(tmp_path).write(
        artifact["artifact_id"], artifact["path"], artifact["media_type"], canonical_text(manifest) + "\n"
    )
    assert written.sha256 == vector["artifact_sha256"]
    assert written.sha256 == artifact["attestation"]["sha256"]
    assert written.to_artifact() == artifact


def test_workspace_setup_writes_the_vector_manifest_bytes(tmp_path: Path) -> None:
    workspace = VECTORS["workspace_manifest"]
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
            {k: workspace["artifact"][k] for k in ("path", "media_type")} | {"id": workspace["artifact"]["artifact_id"]}
        ],
    }
    artifact = set_up_workspace(ProjectFiles(tmp_path), step, _host()).to_artifact()
    assert artifact["content"] == workspace["artifact"]["content"]
    assert artifact["attestation"]["sha256"] == workspace["artifact_sha256"]


def _release_text(uri: str) -> str:
    """A release file's text from the packaged catalogue (the URI's path after the manifest hex)."""
    path = uri.split("/", 4)[4]
    return (REPO / "catalogues" / "research-decision" / "1.2.0" / path).read_text("utf-8")


def test_output_attestations_read_back_from_disk_are_the_vectors(tmp_path: Path) -> None:
    files = ProjectFiles(tmp_path)
    for artifact in VECTORS["output_attestations"]["artifacts"]:
        (tmp_path / artifact["path"]).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / artifact["path"]).write_bytes(artifact["content"].encode("utf-8"))  # the model wrote it
        size = artifact["attestation"]["size"]
        attested = files.attest(
            artifact["artifact_id"], artifact["path"], artifact["media_type"], existed_before=False, max_bytes=size
        )
        assert attested.to_artifact() == artifact


def test_validator_reports_bind_as_the_vectors_do(tmp_path: Path) -> None:
    vector = VECTORS["report_bindings"]
    by_id = {a["artifact_id"]: a for a in VECTORS["output_attestations"]["artifacts"]}
    files = ProjectFiles(tmp_path)
    written = [files.write(k, by_id[k]["path"], by_id[k]["media_type"], by_id[k]["content"]) for k in sorted(by_id)]
    assert {w.artifact_id: w.sha256 for w in written} == {
        k: r["sha256"] for k, r in vector["artifact_receipts"].items()
    }
    for summary, expected in zip(vector["validators"], vector["reports"], strict=True):
        assert validator_report(summary, expected["outcome"], expected["findings"], written, _host()) == expected


def test_the_run_log_holds_the_vectors_checkpoint_log_exactly(tmp_path: Path) -> None:
    vector = VECTORS["checkpoint_log"]
    log = RunLog(tmp_path, "run-vectors")
    for token in vector["tokens"]:
        log.append(token)
        log.append(token)  # a repeated issue is logged once
    assert log.log_path.read_text("ascii") == vector["log_text"]
