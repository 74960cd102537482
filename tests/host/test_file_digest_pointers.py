"""The pointers a step's reply names in a JSON output follow RFC 6901: ``~`` is ``~0`` and ``/`` is ``~1`` in a key.

A record binding a file under a key ``a/b`` was named ``/a/b`` - a pointer to
member ``b`` of member ``a``, which is not where the binding is. Real files in
a real project directory; the check the bridge runs before anything is sent.
"""

from __future__ import annotations

import json
from pathlib import Path

from jsonpointer import resolve_pointer
from rimthan_host.file_digests import check_named_files
from rimthan_host.project_files import ProjectFiles

OUTPUT = {"id": "record", "path": "record.json", "media_type": "application/json", "max_bytes": 65536}


def test_a_key_with_a_slash_or_a_tilde_is_escaped_in_the_pointer_named(tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("notes\n", "utf-8")
    record = {
        "by/route": {"artifact_id": "notes", "path": "notes.md", "sha256": "0" * 64},
        "x~y": [{"artifact_id": "notes", "path": "notes.md"}],
    }
    (tmp_path / "record.json").write_text(json.dumps(record), "utf-8")

    found = check_named_files(ProjectFiles(tmp_path), [OUTPUT], {})

    [(code, why)] = found.problems
    assert code.value == "file_digest_mismatch"
    assert why.startswith("record.json at /by~1route:"), why
    pointer = why.split(" at ", 1)[1].split(":", 1)[0]
    assert resolve_pointer(record, pointer) is record["by/route"]  # the pointer names the binding itself

    del record["by/route"]["sha256"]
    (tmp_path / "record.json").write_text(json.dumps(record), "utf-8")
    filled = check_named_files(ProjectFiles(tmp_path), [OUTPUT], {}).filled
    assert filled == ["record.json at /by~1route (notes.md)", "record.json at /x~0y/0 (notes.md)"], filled
