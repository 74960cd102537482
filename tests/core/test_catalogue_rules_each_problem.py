"""Catalogue rules that find several problems say each, not the first alone.

A load keeps every failure a rule collected even when another rule fails too, through the loader the packager
and the server share. Each test edits a copy of the packaged research-decision@1.2.0 source (the helpers and
fixture of ``test_catalogue_rules``).
"""

from __future__ import annotations

from pathlib import Path

from rimthan_workflow_registry.errors import CatalogueError, FailureCode
from test_catalogue_rules import WORKFLOW, edit_toml, load_error, step
from test_catalogue_rules import source as source  # the fixture: a copy of the packaged source


def said(error: CatalogueError) -> list[tuple[FailureCode, str | None, str]]:
    """Each failure a load raised (the first, then those collected with it): code, file, message."""
    return [(f.code, f.path, f.message) for f in error.failures]


def test_each_failure_a_rule_collected_is_kept_beside_another_rules(source: Path) -> None:
    """Two missing files (one rule, two failures) and a step shape broken (another rule): all three said. The
    load kept each rule's refusal but not the failures it carried, so only the first missing file was said."""
    for name in ("interview", "experiment"):
        (source / f"assets/instructions/{name}.md").unlink()
    edit_toml(source, WORKFLOW, lambda d: step(d, "confirm-contract").update(max_total_bytes=1024))
    problems = said(load_error(source))
    assert [(code, message.split(" (did")[0]) for code, _, message in problems] == [
        (FailureCode.REFERENCE_UNRESOLVED, f"workflow research-decision@1.2.0 references missing file '{name}'")
        for name in ("assets/instructions/interview.md", "assets/instructions/experiment.md")
    ] + [(FailureCode.CATALOGUE_INVALID, "step confirm-contract caps total bytes but declares no outputs")]
    assert all(not f.also for f in load_error(source).also), "each failure said once, none nested in another"
