"""The migration offer a tool result carries when the server holds a target that can take the run.

That is how a client discovers the target's release id and workflow version
(and what it needs) before it sends a migration request. The target is the
one a migration request would go to: ``--migration-target``, or with
``--migrate-to-newest`` the newer active release of the run's catalogue.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from .call_routing import CHECKPOINT_ARGUMENT
from .provider import LoadedRelease, ReleaseProvider
from .tool_contracts import CONTINUE_WORKFLOW, START_WORKFLOW, SUBMIT_STEP_VALIDATION

if TYPE_CHECKING:
    from .results import ToolResult


def offer_arguments(name: str, arguments: dict[str, Any], result: ToolResult) -> dict[str, Any] | None:
    """The run a result leaves, as a checkpoint-bearing request: what its migration offer is worked out for.

    ``continue_workflow`` is asked about the run it was called with (its own
    arguments, so the resume is the call's); ``start_workflow`` and
    ``submit_step_validation`` about the checkpoint they issued, with the
    state the call bound (neither changes it). ``prepare_step_validation``
    moves no run and offers nothing (its schema says ``migration`` is always null).
    """
    if name == CONTINUE_WORKFLOW:
        return arguments
    if name not in (START_WORKFLOW, SUBMIT_STEP_VALIDATION) or result.checkpoint is None:
        return None
    return {CHECKPOINT_ARGUMENT: result.checkpoint.token, "confirmed_state": arguments["confirmed_state"]}


def with_migration_offer(
    provider: ReleaseProvider, source: LoadedRelease, arguments: dict[str, Any] | None, result: ToolResult
) -> ToolResult:
    """With a migration target that can take this run, the result carries its preview.

    Every result that starts, moves or shows a run (start, continue, submit)
    says it, so ``migration`` null there means no target can take the run now:
    a host drops any offer it kept.
    """
    target = provider.migration_target_for(source)
    if arguments is None or target is None or result.migration is not None or result.status == "completed":
        return result
    offer = source.module.migration_offer(target.module, arguments)
    return result if offer is None else dataclasses.replace(result, migration=offer)
