"""The failure-code list is closed and documented: docs/failure-codes.md and the enum agree."""

from __future__ import annotations

import re
from pathlib import Path

from rimthan_workflow_registry.errors import FailureCode, RegistryError
from rimthan_workflow_registry.remediation import REMEDIATION, next_step

DOC = Path(__file__).resolve().parents[2] / "docs" / "failure-codes.md"


def test_every_code_is_documented_and_every_documented_code_exists() -> None:
    documented = re.findall(r"^\| `([a-z_]+)` \|", DOC.read_text("utf-8"), flags=re.MULTILINE)
    assert len(documented) == len(set(documented)), "a code is documented twice"
    assert sorted(documented) == sorted(code.value for code in FailureCode)


def test_every_code_has_its_own_remediation_and_the_doc_shows_it() -> None:
    """One table of next steps, beside the codes: complete, specific, and what the doc says."""
    rows = dict(re.findall(r"^\| `([a-z_]+)` \| .*? \| (.*?) \|$", DOC.read_text("utf-8"), flags=re.MULTILINE))
    assert set(REMEDIATION) == set(FailureCode)
    assert rows == {code.value: text for code, text in REMEDIATION.items()}
    texts = list(REMEDIATION.values())
    assert len(texts) == len(set(texts)), "two codes share one generic next step"
    assert all(text and not text.endswith(".") for text in texts)


def test_a_situation_specific_next_step_wins_over_the_table() -> None:
    plain = RegistryError(FailureCode.SIGNATURE_THRESHOLD_NOT_MET, "1 of 2")
    discarded = RegistryError(FailureCode.SIGNATURE_THRESHOLD_NOT_MET, "1 of 2", next_step="build again with more keys")
    assert next_step(plain) == REMEDIATION[FailureCode.SIGNATURE_THRESHOLD_NOT_MET]
    assert next_step(discarded) == "build again with more keys"
