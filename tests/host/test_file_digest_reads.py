"""A file a JSON output names many times is read once per check.

A model writes the JSON output, so it chooses how many bindings name a file:
a 64 KiB decision record can name one 2 MiB file about 1,700 times, and each
binding had the file read and hashed again before anything was sent (3.3 GiB
hashed per ``step_done``). Real files in a real project directory; the opens
of the named file counted with an audit hook (``os.open`` raises ``open``),
never timed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from rimthan_host.file_digests import check_named_files
from rimthan_host.project_files import ProjectFiles
from rimthan_workflow_registry.canonical import sha256_hex

OUTPUT = {"id": "record", "path": "record.json", "media_type": "application/json", "max_bytes": 65536}
OPENED: list[str] = []  # the names ``open`` events give while a test counts them
COUNTING: list[bool] = []


def _count(event: str, args: tuple[Any, ...]) -> None:
    if COUNTING and event == "open" and isinstance(args[0], str):
        OPENED.append(args[0])


sys.addaudithook(_count)


def test_a_file_named_by_many_bindings_is_read_once_and_each_gets_its_digest(tmp_path: Path) -> None:
    big = tmp_path / "big.md"
    big.write_bytes(b"a finding\n" * 1000)
    record = {"basis": [{"path": "big.md"} | ({"sha256": ""} if i % 2 else {"artifact_id": "x"}) for i in range(200)]}
    (tmp_path / "record.json").write_text(json.dumps(record), "utf-8")

    COUNTING.append(True)
    try:
        found = check_named_files(ProjectFiles(tmp_path), [OUTPUT], {})
    finally:
        COUNTING.clear()

    assert found.problems == [] and len(found.filled) == 200, found.problems
    assert OPENED.count("big.md") == 1, OPENED
    written = json.loads(found.rewritten["record.json"])
    assert {b["sha256"] for b in written["basis"]} == {sha256_hex(big.read_bytes())}
