"""Migration of a run between two verified releases: the source departs, the target accepts or offers.

Kept apart from the four tools of ``workflow_engine`` because it is the one
path that involves two engine modules. Every function here takes the modules
and calls only their methods made for it (``resume``, ``bound_host``,
``confirmed_state``, ``_host_blockers`` (the protocol's name), ``state_schema``, ``open_run``), so the
source never reaches into the target's internals nor the other way round.
``WorkflowEngineQueryModule.migrate_workflow`` (the name the protocol gives)
and ``migration_offer`` are thin calls into this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from rimthan_workflow_registry.errors import FailureCode, WorkflowProtocolError
from rimthan_workflow_registry.failures import Failure
from rimthan_workflow_registry.protocol_names import SETUP_STEP_ID
from rimthan_workflow_registry.release import VerifiedRelease, WorkflowDefinition, semver_key
from rimthan_workflow_registry.run import (
    ConfirmedState,
    IssuedCheckpoint,
    harness_adapter,
    missing_fields,
    unconfirmed_fields,
    workflow_needs,
)
from rimthan_workflow_registry.workflow_engine import newest_version, walked_steps

from .results import MigrationEnd, MigrationPreview, ReleaseRef, ToolResult, WalkedStep

if TYPE_CHECKING:
    from .workflow_engine import WorkflowEngineQueryModule

__all__ = ["Departure", "MigrationGap", "accept", "depart", "migration_gaps", "offer"]


@dataclass(frozen=True)
class Departure:
    """A verified run leaving its release: everything a migration target takes from the source module."""

    release: VerifiedRelease
    issued: IssuedCheckpoint
    workflow: WorkflowDefinition
    bound_host: Mapping[str, Any]  # the checkpoint's host binding, as a ``host`` argument
    values: Mapping[str, Any]  # the run's confirmed state on the source (what routed it to its step)


def depart(source: WorkflowEngineQueryModule, arguments: Mapping[str, Any]) -> tuple[Departure, ConfirmedState]:
    """The source side: verify the checkpoint, its pinned workflow and state (the prior state comes back too)."""
    issued, workflow, prior = source.resume(arguments)
    bound = source.bound_host(workflow, issued.checkpoint)
    return Departure(source.release, issued, workflow, bound, prior.values), prior


def accept(target: WorkflowEngineQueryModule, departure: Departure, request: Mapping[str, Any]) -> ToolResult:
    """The target side of ``migrate_workflow``: fail-closed checks, the preview, the restart.

    A preview (``confirm`` false) accepts a state that still lacks the
    target's new required fields and lists each as a failure, with the
    preview saying everything the target needs; a confirmed request with
    an incomplete state is refused outright.
    """
    issued, workflow = departure.issued, departure.workflow
    target_wf = _check_target(departure.release, target.release, workflow, request)
    state = target.confirmed_state(
        target_wf, request["confirmed_state"], "migration.confirmed_state", allow_missing=not request["confirm"]
    )
    host = request.get("host") or departure.bound_host
    preview = _preview(target, departure, target_wf, state.values, host["harness"])
    adapter, failures = target._host_blockers(target_wf, host)
    missing = missing_fields(state.values, target.state_schema(target_wf))
    unconfirmed = unconfirmed_fields(
        state, sorted(state.values), now=target.now(), newer_than=issued.checkpoint.issued_at
    )
    failures = missing + unconfirmed + failures
    source_ref = ReleaseRef.of(departure.release)
    if failures:
        return ToolResult.failed(
            "blocked",
            source_ref,
            workflow,
            issued,
            failures,
            migration=preview,
            message="the target release cannot take this run until every failure is resolved",
        )
    if not request["confirm"]:
        failure = Failure(
            FailureCode.MIGRATION_CONFIRMATION_REQUIRED,
            "show the user this preview; every artifact and validator receipt is invalidated and "
            "the run restarts at setup-workspace. Call again with confirm=true once they agree",
        )
        return ToolResult.failed("blocked", source_ref, workflow, issued, [failure], migration=preview)
    assert adapter is not None
    return target.open_run(
        target_wf,
        adapter,
        state,
        host,
        parent=issued,
        migration=replace(preview, confirmed=True),
        message="migrated: the run restarts at setup-workspace on the target release",
    )


def offer(
    target: WorkflowEngineQueryModule, departure: Departure, values: Mapping[str, Any]
) -> MigrationPreview | None:
    """The target side of ``migration_offer``: what a request naming no workflow version would migrate to.

    Only a newer version of the run's workflow, same scope; chosen as
    :func:`accept` chooses it, so a pre-release is offered only when no
    release of the workflow is in the target (ask for one by version).
    """
    src, dst = departure.release, target.release
    same_scope = (dst.catalogue.scope, dst.catalogue.name) == (src.catalogue.scope, src.catalogue.name)
    if dst.manifest_digest == src.manifest_digest or not same_scope:
        return None
    target_wf = _target_workflow(dst, departure.workflow, None)
    if target_wf is None or semver_key(target_wf.version) <= semver_key(departure.workflow.version):
        return None
    return _preview(target, departure, target_wf, values, departure.bound_host["harness"])


def _preview(
    target: WorkflowEngineQueryModule,
    departure: Departure,
    target_wf: WorkflowDefinition,
    values: Mapping[str, Any],
    harness: str,
) -> MigrationPreview:
    """What migrating would do (from, to, everything invalidated) and what the target needs of the migrating
    host: the capabilities of the adapter the target pins for its ``harness`` come on top of the workflow's."""
    cp = departure.issued.checkpoint
    adapter = harness_adapter(target.release.catalogue, target_wf, harness)
    return MigrationPreview(
        source=MigrationEnd.of(departure.release, departure.workflow),
        target=MigrationEnd.of(target.release, target_wf),
        invalidated_artifacts=tuple(sorted(cp.artifacts)),
        invalidated_validators=tuple(sorted(cp.validators)),
        restart_step=SETUP_STEP_ID,
        walked_again=_walked_again(departure),
        target_needs=workflow_needs(target_wf, target.state_schema(target_wf), values, adapter),
    )


def _walked_again(departure: Departure) -> tuple[WalkedStep, ...]:
    """The steps the run walked from setup-workspace to the step it is on, each with the outputs it redoes."""
    cp, workflow = departure.issued.checkpoint, departure.workflow
    walked = walked_steps(workflow, SETUP_STEP_ID, cp.step_id, departure.values)
    return tuple(WalkedStep(s.id, tuple(o.id for o in s.outputs if o.id in cp.artifacts)) for s in walked)


def _check_target(
    src: VerifiedRelease, dst: VerifiedRelease, workflow: WorkflowDefinition, request: Mapping[str, Any]
) -> WorkflowDefinition:
    """Fail-closed rules: the loaded target, same scope, a different release, a newer workflow."""
    if request["target_release"] not in (dst.release_id, dst.manifest_digest):
        raise WorkflowProtocolError(
            FailureCode.MIGRATION_SCOPE_MISMATCH,
            f"the server's migration target is {dst.release_id}, not {request['target_release']!r}",
        )
    if (dst.catalogue.scope != src.catalogue.scope) or dst.catalogue.name != src.catalogue.name:
        raise WorkflowProtocolError(
            FailureCode.MIGRATION_SCOPE_MISMATCH, f"{dst.release_id} is not in the scope of {src.release_id}"
        )
    if dst.manifest_digest == src.manifest_digest or dst.release_id == src.release_id:
        raise WorkflowProtocolError(FailureCode.MIGRATION_SAME_RELEASE, "the run is already on the target release")
    version = request.get("workflow_version")
    target_wf = _target_workflow(dst, workflow, version)
    if target_wf is None:
        raise WorkflowProtocolError(
            FailureCode.WORKFLOW_NOT_FOUND,
            f"{dst.release_id} has no workflow {workflow.id}" + (f" version {version}" if version else ""),
        )
    if semver_key(target_wf.version) <= semver_key(workflow.version):
        raise WorkflowProtocolError(
            FailureCode.MIGRATION_NOT_NEWER, f"{target_wf.key} is not newer than {workflow.key}"
        )
    return target_wf


def _target_workflow(
    dst: VerifiedRelease, workflow: WorkflowDefinition, version: str | None
) -> WorkflowDefinition | None:
    """The target's version ``version`` of ``workflow``, or (``None``) its newest as ``newest_version`` picks it."""
    candidates = [w for w in dst.catalogue.workflows if w.id == workflow.id]
    return newest_version([w for w in candidates if w.version == version] if version else candidates)


@dataclass(frozen=True)
class MigrationGap:
    """A workflow of the source release whose runs no migration to the target can take, in the words of a refusal."""

    code: FailureCode  # what a migration of such a run is refused with
    message: str
    next_step: str


def migration_gaps(src: VerifiedRelease, dst: VerifiedRelease) -> tuple[MigrationGap, ...]:
    """Every workflow of ``src`` whose runs would be refused migrating to ``dst`` by ``_check_target``'s last two
    rules (``workflow_not_found``, ``migration_not_newer``): what ``rimthan-mcp check`` and ``serve`` tell an
    operator before a user meets it."""
    gaps = []
    for wf in src.catalogue.workflows:
        target = _target_workflow(dst, wf, None)
        cannot = f"runs of workflow {wf.key} cannot migrate: release {dst.release_id} has"
        if target is None:
            gaps.append(
                MigrationGap(
                    FailureCode.WORKFLOW_NOT_FOUND,
                    f"{cannot} no workflow {wf.id}",
                    f"nothing to do if {wf.id} was dropped on purpose; otherwise add it back to the target's source "
                    "at a newer version and build a new release",
                )
            )
        elif semver_key(target.version) <= semver_key(wf.version):
            gaps.append(
                MigrationGap(
                    FailureCode.MIGRATION_NOT_NEWER,
                    f"{cannot} workflow {target.key}, not a newer version",
                    f"in the target's source, give {wf.id} a newer version than {wf.version} (version in "
                    f"{target.source}) and build it as a new release",
                )
            )
    return tuple(gaps)
