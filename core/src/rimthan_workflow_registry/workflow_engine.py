"""Pure workflow rules shared by the engine: branch resolution and version order.

``resolve_branches`` is the only place a branch predicate is evaluated at run
time; authoring validation (``catalogue_rules.check_branches``) guarantees
that at most one can match, and this function re-checks it anyway.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rimthan_workflow_registry.errors import FailureCode, WorkflowProtocolError
from rimthan_workflow_registry.release.catalogue import StepDefinition, WorkflowDefinition, semver_key


def resolve_branches(step: StepDefinition, state: Mapping[str, Any]) -> str | None:
    """The single branch target ``state`` selects, or ``None`` if its field is missing.

    Raises ``WorkflowProtocolError`` when several branches match
    (``branch_ambiguous``) or the field holds a value no branch accepts
    (``branch_no_match``).
    """
    fields = {b.when.field for b in step.branches}
    if any(f not in state for f in fields):
        return None
    matches = [b.target for b in step.branches if b.when.matches(state[b.when.field])]
    if len(matches) > 1:
        raise WorkflowProtocolError(
            FailureCode.BRANCH_AMBIGUOUS, f"step {step.id}: confirmed state matches several branches {matches}"
        )
    if not matches:
        values = {f: state[f] for f in sorted(fields)}
        raise WorkflowProtocolError(
            FailureCode.BRANCH_NO_MATCH,
            f"step {step.id}: no branch accepts {values}; confirm one of the question's choices",
        )
    return matches[0]


def newest_version(workflows: Iterable[WorkflowDefinition]) -> WorkflowDefinition | None:
    """The candidate with the highest semantic version.

    A pre-release is never chosen implicitly while a release exists: an
    operator shipping ``1.11.0-rc.1`` next to ``1.10.0`` expects runs that name
    no version to keep getting ``1.10.0``. Ask for the pre-release by version.
    """
    candidates = list(workflows)
    stable = [w for w in candidates if "-" not in w.version.split("+", 1)[0]]
    return max(stable or candidates, key=lambda w: semver_key(w.version), default=None)


def walked_steps(
    workflow: WorkflowDefinition, start: str, current: str, state: Mapping[str, Any]
) -> tuple[StepDefinition, ...]:
    """The steps a run on ``current`` walked from ``start``, in order, as ``state`` routes it (``current`` excluded).

    Each step is followed by its linear next or the one branch ``state``
    selects, as the engine moved the run. Empty when ``state`` does not lead
    from ``start`` to ``current`` (a branch field missing or matching no
    branch, a step met twice, a dead end): then no path is claimed.
    """
    walked: list[StepDefinition] = []
    step = workflow.step(start)
    while step is not None and step.id != current and all(w.id != step.id for w in walked):
        walked.append(step)
        try:
            target = step.next if step.next is not None else resolve_branches(step, state)
        except WorkflowProtocolError:
            return ()
        step = workflow.step(target) if target is not None else None
    return tuple(walked) if step is not None and step.id == current else ()
