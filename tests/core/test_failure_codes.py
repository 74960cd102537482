"""The failure-code list is closed and documented: docs/failure-codes.md and the enum agree."""

from __future__ import annotations

import re
from pathlib import Path

from rimthan_workflow_registry.errors import FailureCode, RegistryError
from rimthan_workflow_registry.remediation import FOR_A_HARNESS, REMEDIATION, harness_next_step, next_step

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


def test_a_harness_line_replaces_only_an_operator_step_and_the_doc_shows_it() -> None:
    """A few codes say something else to a harness (a tool refusal's ``next``): each says it once, and the doc too."""
    doc = " ".join(DOC.read_text("utf-8").split())
    assert set(FOR_A_HARNESS) <= set(REMEDIATION)
    for code, line in FOR_A_HARNESS.items():
        assert line != REMEDIATION[code] and line not in REMEDIATION.values() and not line.endswith(".")
        assert f"`{code.value}`: {line}" in doc, code
        assert harness_next_step(RegistryError(code, "x")) == line != next_step(RegistryError(code, "x"))
    plain = RegistryError(FailureCode.INVALID_ARGUMENTS, "x")
    assert harness_next_step(plain) == next_step(plain) == REMEDIATION[FailureCode.INVALID_ARGUMENTS]


def test_a_situation_specific_next_step_wins_over_the_table() -> None:
    plain = RegistryError(FailureCode.SIGNATURE_THRESHOLD_NOT_MET, "1 of 2")
    discarded = RegistryError(FailureCode.SIGNATURE_THRESHOLD_NOT_MET, "1 of 2", next_step="build again with more keys")
    assert next_step(plain) == REMEDIATION[FailureCode.SIGNATURE_THRESHOLD_NOT_MET]
    assert next_step(discarded) == "build again with more keys"


PACKAGES = ("core", "packager", "server", "host", "clikit")
WHERE_CODES_LIVE = frozenset({"errors.py", "remediation.py"})  # the list and its next steps, not a use


def _product_sources() -> dict[str, str]:
    root = DOC.parents[1]
    return {
        str(path.relative_to(root)): path.read_text("utf-8")
        for package in PACKAGES
        for path in sorted((root / package / "src").rglob("*.py"))
        if path.name not in WHERE_CODES_LIVE
    }


def test_every_documented_code_is_raised_by_some_module() -> None:
    """A code no module of any package names (``FailureCode.X``, an alias's ``.X``, or its value quoted) is dead."""
    sources = _product_sources()
    assert {path.split("/")[0] for path in sources} == set(PACKAGES)  # the scan reached every package
    unused = [
        code.value
        for code in FailureCode
        if not any(re.search(rf"\.{code.name}\b|[\"']{code.value}[\"']", text) for text in sources.values())
    ]
    assert unused == [], f"documented in docs/failure-codes.md but raised nowhere: {unused}"
