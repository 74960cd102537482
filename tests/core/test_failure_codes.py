"""The failure-code list is closed and documented: docs/failure-codes.md and the enum agree."""

from __future__ import annotations

import re
from pathlib import Path

from rimthan_workflow_registry.errors import FailureCode

DOC = Path(__file__).resolve().parents[2] / "docs" / "failure-codes.md"


def test_every_code_is_documented_and_every_documented_code_exists() -> None:
    documented = re.findall(r"^\| `([a-z_]+)` \|", DOC.read_text("utf-8"), flags=re.MULTILINE)
    assert len(documented) == len(set(documented)), "a code is documented twice"
    assert sorted(documented) == sorted(code.value for code in FailureCode)
