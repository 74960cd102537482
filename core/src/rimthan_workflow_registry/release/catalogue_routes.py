"""Routes through a workflow's step graph, and the rule that a step's inputs are produced on every route to it.

A run follows one route: from the first step along ``next`` or the branch its
confirmed state takes, looping back where a workflow allows it. A step that
reads an artifact can only pass prepare if a step producing that artifact was
validated on the way there (``input_binding_mismatch``, "no receipt", on every
call otherwise), so the producing step must come before it on *every* route
from the start: it must dominate the reading step in the step graph. Loops
keep this exact: entering the producing step again drops its receipts, and
leaving a gated step takes a submit that earns them again.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping

from rimthan_workflow_registry.errors import CatalogueError, FailureCode, collected
from rimthan_workflow_registry.release.catalogue import WorkflowDefinition


def reached_from(
    starts: Iterable[str], edges: Mapping[str, Iterable[str]], avoid: str | None = None
) -> dict[str, str | None]:
    """Every node a walk from ``starts`` reaches without entering ``avoid``, with the node it was first reached from.

    Breadth first, so following the recorded predecessors back from a node
    gives a shortest route to it; a start maps to ``None``.
    """
    found: dict[str, str | None] = {start: None for start in starts if start != avoid}
    queue = deque(found)
    while queue:
        node = queue.popleft()
        for nxt in edges.get(node, ()):
            if nxt != avoid and nxt not in found:
                found[nxt] = node
                queue.append(nxt)
    return found


def route_avoiding(edges: Mapping[str, Iterable[str]], start: str, target: str, avoid: str) -> tuple[str, ...] | None:
    """A shortest route from ``start`` to ``target`` that never enters ``avoid``, or ``None`` if every route does.

    ``None`` is exactly "``avoid`` dominates ``target``": every route from the
    start to ``target`` passes through ``avoid`` (or ``target`` is ``avoid``).
    """
    return _route_to(reached_from([start], edges, avoid), target)


def _route_to(found: Mapping[str, str | None], target: str) -> tuple[str, ...] | None:
    if target not in found:
        return None
    route = [target]
    while (before := found[route[-1]]) is not None:
        route.append(before)
    return tuple(reversed(route))


def check_input_routes(workflow: WorkflowDefinition) -> None:
    """Every route from the first step to a step that reads an artifact passes the step that produces it.

    Each input a route reaches without its producer is a failure of its own, in step order, then the order the
    step lists its inputs (each with the shortest such route).
    """
    edges = {s.id: s.targets for s in workflow.steps}
    start = workflow.steps[0].id
    without: dict[str, dict[str, str | None]] = {}  # per producing step: what the start reaches without it
    failures: list[CatalogueError] = []
    for step in workflow.steps:
        for artifact_id in step.inputs:
            producer = workflow.producing_step(artifact_id)
            assert producer is not None  # check_workflow_references resolved every input
            found = without.setdefault(producer.id, reached_from([start], edges, producer.id))
            route = _route_to(found, step.id)
            if route is not None:
                failures.append(_input_skipped(workflow, step.id, artifact_id, producer.id, route))
    if failures:
        raise collected(failures)


def _input_skipped(
    workflow: WorkflowDefinition, step_id: str, artifact_id: str, producer_id: str, route: tuple[str, ...]
) -> CatalogueError:
    return CatalogueError(
        FailureCode.TERMINAL_UNREACHABLE,
        f"workflow {workflow.key}: step {step_id} reads artifact {artifact_id!r}, but the route "
        f"{' -> '.join(route)} reaches it without passing {producer_id}, the step that produces it; "
        f"a run on that route could never pass {step_id}",
        path=workflow.source,
        next_step=(
            f"make {producer_id} come before {step_id} on every route (or produce {artifact_id!r} on a step "
            f"every route passes), or drop {artifact_id!r} from {step_id}'s inputs"
        ),
    )
