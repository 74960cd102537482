"""Catalogue rules that find several problems say each, not the first alone.

The name rule (aliases), the host adapter rule and the reference rule raised at their first problem, as did
the first-step, step-shape (with a step's declared counts and sizes), reachability, input-route, branch,
write-path, bound and confirmable-value rules (each break of
``support.catalogue_breaks``); each problem is now a failure of its own (its code, file and message), in the
order the catalogue lists what it is about, through the loader the packager and the server share. And a load
keeps every failure a rule collected even when another rule fails too. Each test edits a copy of the packaged
research-decision@1.2.0 source (the helpers and fixture of ``test_catalogue_rules``);
``tests/packager/test_pack_each_problem_of_a_rule.py`` drives the same through the installed ``rimthan-pack``
(build, check, and verify of a signed release).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from rimthan_workflow_registry.errors import CatalogueError, FailureCode
from support.catalogue_breaks import BREAKS, Break, said_as_expected
from test_catalogue_rules import WORKFLOW, edit_toml, load_error, step
from test_catalogue_rules import source as source  # the fixture: a copy of the packaged source


def said(error: CatalogueError) -> list[tuple[FailureCode, str | None, str]]:
    """Each failure a load raised (the first, then those collected with it): code, file, message."""
    return [(f.code, f.path, f.message) for f in error.failures]


def _add_workflow_with_aliases(root: Path, workflow_id: str, aliases: list[str]) -> None:
    shutil.copy(root / WORKFLOW, root / f"workflows/{workflow_id}.toml")
    edit_toml(root, f"workflows/{workflow_id}.toml", lambda d: d.update(id=workflow_id, entry_aliases=aliases))
    edit_toml(root, "catalogue.toml", lambda d: d["workflows"].append(f"workflows/{workflow_id}.toml"))


def test_each_alias_collision_is_said_in_catalogue_order(source: Path) -> None:
    """Two workflows each taking both aliases of the first: four collisions, each in its own workflow's file (the
    rule stopped at the first)."""
    _add_workflow_with_aliases(source, "other-a", ["research", "decide"])
    _add_workflow_with_aliases(source, "other-b", ["decide", "research"])
    taken = [("other-a", "research"), ("other-a", "decide"), ("other-b", "decide"), ("other-b", "research")]
    assert said(load_error(source)) == [
        (FailureCode.ALIAS_COLLISION, f"workflows/{wid}.toml", f"name {name!r} of workflow {wid} already names "
         "workflow research-decision for owner rimthan.research")
        for wid, name in taken
    ]  # fmt: skip


def test_each_adapter_problem_is_said(source: Path) -> None:
    """Two install paths outside the project, two pins of no adapter: four failures (the rule stopped at the
    first install path)."""
    adapter = "adapters/claude-code.toml"
    edit_toml(source, adapter, lambda d: d["paths"].update(skill="/etc/{id}.md", subagent="../{id}.md"))
    edit_toml(source, WORKFLOW, lambda d: d["host_adapters"].extend(["ghost@9.9.9", "claude-code@1.0.1"]))
    problems = said(load_error(source))
    assert [(code, path) for code, path, _ in problems] == [
        (FailureCode.CATALOGUE_INVALID, adapter),
        (FailureCode.CATALOGUE_INVALID, adapter),
        (FailureCode.REFERENCE_UNRESOLVED, WORKFLOW),
        (FailureCode.REFERENCE_UNRESOLVED, WORKFLOW),
    ], problems
    assert [message.split(" must ")[0].split(" (did")[0] for _, _, message in problems] == [
        "paths.skill = '/etc/{id}.md'",
        "paths.subagent = '../{id}.md'",
        "workflow research-decision@1.2.0 pins unknown host adapter 'ghost@9.9.9'",
        "workflow research-decision@1.2.0 pins unknown host adapter 'claude-code@1.0.1'",
    ]


def test_each_reference_problem_is_said_in_step_order(source: Path) -> None:
    """Two references to no step or asset and two outputs outside the project, across three steps: four
    failures, in the workflow's step order (the rule stopped at the first)."""

    def change(d: dict[str, Any]) -> None:
        step(d, "setup-workspace")["host_assets"].append("ghost")
        step(d, "interview").update(next="nowhere")
        step(d, "desk-research")["outputs"][0].update(path="../outside.json")
        step(d, "desk-research")["outputs"][1].update(path="/findings.md")

    edit_toml(source, WORKFLOW, change)
    assert said(load_error(source)) == [
        (FailureCode.REFERENCE_UNRESOLVED, WORKFLOW, "step setup-workspace delivers unknown asset 'ghost'"),
        (FailureCode.REFERENCE_UNRESOLVED, WORKFLOW, "step interview leads to unknown step 'nowhere'"),
        (FailureCode.CATALOGUE_INVALID, WORKFLOW,
         "output evidence-log path '../outside.json' is not a project-local path: '..' path segment"),
        (FailureCode.CATALOGUE_INVALID, WORKFLOW, "output findings path '/findings.md' is not a project-local path: "
         "absolute path"),
    ]  # fmt: skip


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


@pytest.mark.parametrize("broken", BREAKS, ids=[b.name for b in BREAKS])
def test_each_problem_of_a_rule_is_said_in_order(source: Path, broken: Break) -> None:
    """Two problems (or more) one rule finds: each its own failure, with its code, file and message, in the
    order the catalogue lists them (the rule stopped at the first)."""
    broken.edit(source)
    problems = [(code.value, path or "", message) for code, path, message in said(load_error(source))]
    assert said_as_expected(problems, broken.said), problems
