"""A run picked up from its checkpoint: the token verified, its pinned workflow and confirmed state reloaded.

Plain Python over the core (no MCP imports). What every checkpoint-bearing
tool does first; the engine remembers the answer once per call
(``WorkflowEngineQueryModule.resume``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rimthan_workflow_registry.errors import FailureCode, WorkflowProtocolError
from rimthan_workflow_registry.release import VerifiedRelease, WorkflowDefinition
from rimthan_workflow_registry.run import (
    CheckpointKeyring,
    ConfirmedState,
    IssuedCheckpoint,
    require_confirmed,
    require_digest,
    verify_checkpoint,
)


def resume_pinned(
    release: VerifiedRelease, keyring: CheckpointKeyring, arguments: Mapping[str, Any], now: Callable[[], int]
) -> tuple[IssuedCheckpoint, WorkflowDefinition, ConfirmedState]:
    """Verify the checkpoint, reload its pinned workflow, check the prior state's digest and confirmations."""
    issued = verify_checkpoint(keyring, arguments["checkpoint"])
    cp = issued.checkpoint
    if cp.manifest_digest != release.manifest_digest or cp.release_id != release.release_id:
        raise WorkflowProtocolError(
            FailureCode.PINNED_RELEASE_UNAVAILABLE,
            f"this checkpoint is pinned to {cp.release_id} ({cp.manifest_digest}), not to {release.release_id}",
        )
    workflow = release.catalogue.workflow(cp.workflow_id, cp.workflow_version)
    if workflow is None or workflow.step(cp.step_id) is None:
        raise WorkflowProtocolError(
            FailureCode.CHECKPOINT_INVALID, "the checkpoint names a workflow or step its release does not have"
        )
    state = ConfirmedState.from_json(arguments["confirmed_state"], memo_scope=cp.state_digest)
    require_digest(state, cp.state_digest)
    require_confirmed(state, now=now())
    return issued, workflow, state
