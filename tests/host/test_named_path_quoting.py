"""A path a JSON output names (a decision record's ``basis``) is quoted in every refusal, so the refusal stays one line.

A model writes the record, so a ``basis`` path may hold a newline (or any C0
control). Each refusal quoting it printed it raw: the bridge's one-line
refusal broke across lines, and the part after the newline could pass for a
line of its own. Real files in a real project directory; the check the
bridge runs before anything is sent.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from rimthan_host.file_digests import Evidence, check_named_files
from rimthan_host.project_files import ProjectFiles

OUTPUT = {"id": "record", "path": "record.json", "media_type": "application/json", "max_bytes": 65536}
ODD = "notes/a\nb.md"  # a newline in the name: one the model wrote
SHOWN = "notes/a\\nb.md"  # as every refusal quotes it


def _check(root: Path, binding: dict[str, str], validated: dict[str, Evidence] | None = None) -> list[str]:
    (root / "record.json").write_text(json.dumps({"basis": [binding]}), "utf-8")
    found = check_named_files(ProjectFiles(root), [OUTPUT], validated or {})
    said = [why for _, why in found.problems] + found.filled
    assert said, "nothing said"
    for line in said:
        assert "\n" not in line and SHOWN in line, line
    return said


def test_a_named_file_that_is_missing_is_quoted_in_the_file_missing_refusal(tmp_path: Path) -> None:
    [why] = _check(tmp_path, {"artifact_id": "notes", "path": ODD})
    assert "cannot be read" in why, why


def test_a_named_directory_or_link_is_quoted(tmp_path: Path) -> None:
    (tmp_path / ODD).mkdir(parents=True)
    [why] = _check(tmp_path, {"artifact_id": "notes", "path": ODD})
    assert "is not a regular file" in why, why
    (tmp_path / ODD).rmdir()
    os.symlink(tmp_path / "record.json", tmp_path / ODD)
    [why] = _check(tmp_path, {"artifact_id": "notes", "path": ODD})
    assert "symbolic link" in why, why


def test_a_digest_filled_in_or_wrong_is_said_with_the_path_quoted(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / ODD).write_text("notes\n", "utf-8")
    [filled] = _check(tmp_path, {"artifact_id": "notes", "path": ODD})
    assert filled == f"record.json at /basis/0 ({SHOWN})", filled
    [why] = _check(tmp_path, {"artifact_id": "notes", "path": ODD, "sha256": "0" * 64})
    assert "its sha256 is not the SHA-256 of" in why, why


def test_evidence_changed_or_named_at_another_path_is_said_with_the_paths_quoted(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / ODD).write_text("changed\n", "utf-8")
    validated = {"notes": Evidence("notes", ODD, "0" * 64)}
    [why] = _check(tmp_path, {"artifact_id": "notes", "path": ODD}, validated)
    assert "changed after this run validated it" in why, why
    (tmp_path / "notes" / "c.md").write_text("other\n", "utf-8")
    [why] = _check(tmp_path, {"artifact_id": "notes", "path": "notes/c.md"}, validated)
    assert f"this run validated notes at {SHOWN}: name it at {SHOWN}" in why, why


def test_the_project_files_refusals_quote_the_path(tmp_path: Path) -> None:
    files = ProjectFiles(tmp_path)
    for call in (
        lambda: files.safe_path("../a\nb"),
        lambda: files.attest("x", "a\nb", "text/plain", existed_before=False, max_bytes=10),
    ):
        try:
            call()
        except Exception as exc:  # HarnessError
            assert "\n" not in str(exc) and "a\\nb" in str(exc), str(exc)
        else:
            raise AssertionError("not refused")


def test_an_empty_path_or_the_project_itself_is_said_so(tmp_path: Path) -> None:
    """An empty path was quoted as nothing: "path  is not a project path ...; write it as ." (the directory)."""
    for path, shown in (("", "(empty)"), (".", "."), ("./", "./")):
        (tmp_path / "record.json").write_text(json.dumps({"basis": [{"artifact_id": "n", "path": path}]}), "utf-8")
        [(code, why)] = check_named_files(ProjectFiles(tmp_path), [OUTPUT], {}).problems
        assert code.value == "path_unsafe", why
        assert f"path {shown} names the project directory, not a file in it; name a file inside" in why, why
