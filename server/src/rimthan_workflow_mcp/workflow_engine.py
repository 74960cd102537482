"""``WorkflowEngineQueryModule``: the four workflow tools over one verified release.

Plain Python (no MCP imports): the server adapter calls these methods with
already schema-checked arguments and serialises what they return. The module
is stateless: everything about a run comes back in the signed checkpoint and
the confirmed state the client sends, so any replica holding the same releases
and checkpoint keys can serve any call.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from rimthan_workflow_registry.canonical import DIGEST_PREFIX
from rimthan_workflow_registry.errors import FailureCode, WorkflowProtocolError
from rimthan_workflow_registry.failures import Failure
from rimthan_workflow_registry.protocol_names import SETUP_STEP_ID
from rimthan_workflow_registry.release import (
    HostAdapter,
    StepDefinition,
    VerifiedRelease,
    WorkflowDefinition,
)
from rimthan_workflow_registry.run import (
    Checkpoint,
    CheckpointKeyring,
    ConfirmedState,
    IssuedCheckpoint,
    StepPayloads,
    ValidatorReceipt,
    artifact_checks,
    binding_for,
    bound_adapter,
    changed_fields,
    check_reports,
    check_reports_size,
    host_blockers,
    issue_bundle,
    issue_checkpoint,
    missing_fields,
    receipts_on_entry,
    state_failures,
    step_validated,
    unconfirmed_fields,
    validate_against_schema,
    validator_summaries,
    verify_bundle,
)
from rimthan_workflow_registry.workflow_engine import resolve_branches

from . import migration
from .call_scope import once
from .pinned_run import resume_pinned
from .prepare_checks import deterministic_failures, file_sha256
from .results import MigrationPreview, ReleaseRef, ToolResult, WorkflowRef
from .workflow_selection import select_workflow

_COMPLETED = "__completed__"


class WorkflowEngineQueryModule:
    """The four workflow tools for runs pinned to ``release``."""

    def __init__(
        self, release: VerifiedRelease, keyring: CheckpointKeyring, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.release = release
        self.keyring = keyring
        self._clock = clock
        self.step_payloads = StepPayloads(release)
        # A result's identities, built once per release: frozen records every result of this module shares.
        self.release_ref = ReleaseRef.of(release)
        self._workflow_refs = {(w.id, w.version): WorkflowRef.of(w) for w in release.catalogue.workflows}

    # ------------------------------------------------------------------ start

    def start_workflow(self, arguments: Mapping[str, Any]) -> ToolResult:
        workflow = select_workflow(self.release, arguments["workflow"], arguments.get("workflow_version"))
        state = self.confirmed_state(workflow, arguments["confirmed_state"], "confirmed_state", allow_missing=True)
        adapter, failures = self._host_blockers(workflow, arguments["host"])
        failures = (
            missing_fields(state.values, self.state_schema(workflow))
            + unconfirmed_fields(state, now=self.now())
            + failures
        )
        if failures:
            return ToolResult.failed(
                "blocked",
                self.release_ref,
                workflow,
                None,
                failures,
                message="the run cannot start until every failure is resolved",
            )
        assert adapter is not None
        return self.open_run(workflow, adapter, state, arguments["host"])

    def _host_blockers(
        self, workflow: WorkflowDefinition, host: Mapping[str, Any]
    ) -> tuple[HostAdapter | None, list[Failure]]:
        """The adapter the ``host`` argument binds to in ``workflow``, and every reason it cannot run there.

        The protocol's name: ``start_workflow`` and a migration's target (``migration.py``) call it.
        """
        return host_blockers(self.release.catalogue, workflow, host)

    # ------------------------------------------------------------------ continue

    def continue_workflow(self, arguments: Mapping[str, Any]) -> ToolResult:
        if arguments.get("migration") is not None:
            raise WorkflowProtocolError(
                FailureCode.MIGRATION_UNAVAILABLE,
                "this server has no migration target release loaded; an operator must start "
                "it with one before a run can migrate",
            )
        issued, workflow, prior = self.resume(arguments)
        cp = issued.checkpoint
        proposed = arguments.get("next_confirmed_state")
        # Never remembered: the proposed state is not the one the checkpoint binds (see ConfirmedState).
        state = self.confirmed_state(workflow, proposed, "next_confirmed_state") if proposed is not None else prior
        changed = changed_fields(prior, state)
        # The prior state alone has nothing changed, and resume found every field of it confirmed.
        failures = state_failures(prior, state, newer_than=cp.issued_at, now=self.now()) if state is not prior else []
        if failures:
            return ToolResult.failed(
                "blocked",
                self.release_ref,
                workflow,
                issued,
                failures,
                message="changed fields need a fresh confirmation; the checkpoint is unchanged",
            )
        changes = {"state_digest": state.digest} if changed else {}
        step = self._step(workflow, cp.step_id)
        adapter = self._adapter(workflow, cp)
        if step.gated and not step_validated(step, cp):
            current = self._reissue(issued, **changes) if changes else issued
            return self._showing(
                "active",
                workflow,
                current,
                step,
                adapter,
                message="this step is gated: prepare and submit validation to advance",
            )
        unmet = missing_fields(state.values, self.state_schema(workflow), step.requires_confirmed)
        if unmet:
            return ToolResult.failed(
                "blocked",
                self.release_ref,
                workflow,
                issued,
                unmet,
                message=f"step {step.id} moves on only with these fields confirmed; the checkpoint is unchanged",
            )
        return self._advance(workflow, issued, step, state, adapter, status_moved="active", changes=changes)

    def _advance(
        self,
        workflow: WorkflowDefinition,
        issued: IssuedCheckpoint,
        step: StepDefinition,
        state: ConfirmedState,
        adapter: HostAdapter,
        *,
        status_moved: str,
        changes: Mapping[str, Any],
    ) -> ToolResult:
        """Follow ``step``'s transition: next step, one question, or completion.

        ``changes`` (new receipts, a new state digest) go into the one
        checkpoint this call issues, so the client's chain has no gaps; with no
        changes and no move, the checkpoint stays the same.
        """
        target = self._next_target(step, state)
        if target is None or target == _COMPLETED:
            current = self._reissue(issued, **changes) if changes else issued
            if target == _COMPLETED:
                return ToolResult(
                    "completed",
                    self.release_ref,
                    workflow=self.workflow_ref(workflow),
                    checkpoint=current,
                    message="the workflow is complete",
                )
            return self._showing(
                "input_required",
                workflow,
                current,
                step,
                adapter,
                question=step.question,
                message="ask the user this question and confirm the answer",
            )
        cp = issued.checkpoint
        entered = self._step(workflow, target)
        fresh = receipts_on_entry(
            entered, changes.get("artifacts", cp.artifacts), changes.get("validators", cp.validators)
        )
        nxt = self._reissue(issued, **{**changes, **fresh, "step_id": target, "state_digest": state.digest})
        return self._showing(status_moved, workflow, nxt, entered, adapter)

    @staticmethod
    def _next_target(step: StepDefinition, state: ConfirmedState) -> str | None:
        """Linear next, the one matching branch, ``None`` if a field is missing, or completion."""
        if step.next is not None:
            return step.next
        if step.branches:
            return resolve_branches(step, state.values)
        return _COMPLETED

    # ------------------------------------------------------------------ migration

    def migrate_workflow(self, target: WorkflowEngineQueryModule, arguments: Mapping[str, Any]) -> ToolResult:
        """Move a run on this module's release to ``target``: preview, then (only when confirmed) restart there.

        Called as ``WorkflowEngineQueryModule.migrate_workflow(source, target, arguments)``.
        The source side runs in ``migration.depart``, the target side in
        ``migration.accept``; both use only public methods of the two modules.
        """
        if arguments.get("next_confirmed_state") is not None:
            raise WorkflowProtocolError(
                FailureCode.INVALID_ARGUMENTS,
                "a migration carries its state in migration.confirmed_state; send next_confirmed_state in a "
                "continue_workflow call without migration, or leave it out",
            )  # it would be dropped unread
        departure, _prior = migration.depart(self, arguments)
        return migration.accept(target, departure, arguments["migration"])

    def migration_offer(
        self, target: WorkflowEngineQueryModule, arguments: Mapping[str, Any]
    ) -> MigrationPreview | None:
        """The preview of migrating this run to ``target``, or ``None`` if it cannot take the run.

        What the server attaches to ``continue_workflow`` results when it holds
        a migration target, so a client learns the target's id and needs
        without guessing a request first.
        """
        departure, prior = migration.depart(self, arguments)
        return migration.offer(target, departure, prior.values)

    def bound_host(self, workflow: WorkflowDefinition, cp: Checkpoint) -> dict[str, Any]:
        """The checkpoint's host binding written back as a ``host`` argument (what a migration reuses)."""
        adapter = self._adapter(workflow, cp)
        return {
            "harness": cp.host.harness,
            "adapter": {"id": adapter.id, "version": adapter.version},
            "capabilities": list(cp.host.capabilities),
            "validator_capabilities": list(cp.host.validator_capabilities),
            "repository_policy": {"writable_paths": [], "protected_paths": []},
        }

    # ------------------------------------------------------------------ prepare

    def prepare_step_validation(self, arguments: Mapping[str, Any]) -> ToolResult:
        issued, workflow, _state = self.resume(arguments)
        cp = issued.checkpoint
        step = self._step(workflow, cp.step_id)
        if not step.gated:
            raise WorkflowProtocolError(
                FailureCode.STEP_NOT_GATED, f"step {step.id} has nothing to validate; call continue_workflow"
            )
        adapter = self._adapter(workflow, cp)
        artifacts = [artifact_checks.SubmittedArtifact.from_json(a) for a in arguments["artifacts"]]
        failures = deterministic_failures(self.release, workflow, step, cp, adapter, arguments, artifacts)
        if failures:
            return ToolResult.failed(
                "deterministic_validation_failed",
                self.release_ref,
                workflow,
                issued,
                failures,
                message="fix every failure and prepare again",
            )
        receipts = {a.artifact_id: a.receipt() for a in artifacts}
        summaries = validator_summaries(workflow, step, cp, receipts, self._file_digest)
        bundle = issue_bundle(self.keyring, issued, step, receipts, summaries, self.now())
        return ToolResult(
            "ready_for_semantic_validation",
            self.release_ref,
            workflow=self.workflow_ref(workflow),
            checkpoint=issued,
            validation_bundle=bundle,
            validators=tuple(s for s in summaries if s.report_required),
            message="run each listed validator as an isolated subagent and submit its report",
        )

    # ------------------------------------------------------------------ submit

    def submit_step_validation(self, arguments: Mapping[str, Any]) -> ToolResult:
        check_reports_size(arguments["reports"])  # before the state, bundle or reports are read: no schema bounds a sum
        issued, workflow, state = self.resume(arguments)
        cp = issued.checkpoint
        step = self._step(workflow, cp.step_id)
        bundle = verify_bundle(self.keyring, arguments["validation_bundle"], issued)
        passed, failed, findings = check_reports(bundle, cp, arguments["reports"])
        validators = cp.validators.without(failed).merged({k: ValidatorReceipt("pass", d) for k, d in passed.items()})
        adapter = self._adapter(workflow, cp)
        if failed:
            nxt = self._reissue(issued, validators=validators, failed_findings=len(findings))
            return ToolResult(
                "validation_failed",
                self.release_ref,
                workflow=self.workflow_ref(workflow),
                checkpoint=nxt,
                findings=tuple(findings),
                step=self._payload(workflow, step, adapter, nxt.checkpoint),
                message="repair the artifacts and prepare again; passed validators are reused "
                "while their inputs stay identical",
            )
        changes = {"validators": validators, "artifacts": cp.artifacts.merged(bundle.receipts)}
        return self._advance(workflow, issued, step, state, adapter, status_moved="advanced", changes=changes)

    # ------------------------------------------------------------------ shared plumbing

    def open_run(
        self,
        workflow: WorkflowDefinition,
        adapter: HostAdapter,
        state: ConfirmedState,
        host: Mapping[str, Any],
        *,
        parent: IssuedCheckpoint | None = None,
        migration: MigrationPreview | None = None,
        message: str = "",
    ) -> ToolResult:
        """Issue a checkpoint at the setup step: a fresh run (no parent) or one restarted by a migration."""
        checkpoint = Checkpoint(
            sequence=1 if parent is None else parent.checkpoint.sequence + 1,
            workflow_id=workflow.id,
            workflow_version=workflow.version,
            release_id=self.release.release_id,
            manifest_digest=self.release.manifest_digest,
            step_id=SETUP_STEP_ID,
            state_digest=state.digest,
            parent_digest=None if parent is None else parent.digest,
            host=binding_for(host),
            issued_at=self.now(),
        )
        return ToolResult(
            "active",
            self.release_ref,
            workflow=self.workflow_ref(workflow),
            checkpoint=issue_checkpoint(self.keyring, checkpoint),
            migration=migration,
            step=self._payload(workflow, workflow.steps[0], adapter, checkpoint),
            message=message,
        )

    def resume(self, arguments: Mapping[str, Any]) -> tuple[IssuedCheckpoint, WorkflowDefinition, ConfirmedState]:
        """Verify the checkpoint, reload its pinned workflow, check the prior state digest (once per call)."""
        return once("resume", (self, arguments), lambda: resume_pinned(self.release, self.keyring, arguments, self.now))

    def confirmed_state(
        self, workflow: WorkflowDefinition, projection: Mapping[str, Any], label: str, *, allow_missing: bool = False
    ) -> ConfirmedState:
        """``projection`` parsed and checked against the workflow's confirmed-state schema (``label`` names it)."""
        state = ConfirmedState.from_json(projection)
        validator = self.release.schemas.validator(workflow.confirmed_state_schema)
        validate_against_schema(state, validator, label=label, allow_missing=allow_missing)
        return state

    def state_schema(self, workflow: WorkflowDefinition) -> Mapping[str, Any]:
        """The workflow's confirmed-state schema document (what missing-field failures describe)."""
        schema = self.release.schemas.validator(workflow.confirmed_state_schema).schema
        return schema if isinstance(schema, Mapping) else {}

    def _showing(
        self,
        status: str,
        workflow: WorkflowDefinition,
        current: IssuedCheckpoint,
        step: StepDefinition,
        adapter: HostAdapter,
        **parts: Any,
    ) -> ToolResult:
        """A result that shows ``step`` to the client, its payload bound to ``current``."""
        return ToolResult(
            status,
            self.release_ref,
            workflow=self.workflow_ref(workflow),
            checkpoint=current,
            step=self._payload(workflow, step, adapter, current.checkpoint),
            **parts,
        )

    def _reissue(self, issued: IssuedCheckpoint, **changes: Any) -> IssuedCheckpoint:
        return issue_checkpoint(self.keyring, issued.checkpoint.successor(issued, issued_at=self.now(), **changes))

    def _step(self, workflow: WorkflowDefinition, step_id: str) -> StepDefinition:
        step = workflow.step(step_id)
        assert step is not None  # checked in resume / guaranteed by catalogue rules
        return step

    def _adapter(self, workflow: WorkflowDefinition, cp: Checkpoint) -> HostAdapter:
        adapter = bound_adapter(self.release.catalogue, workflow, cp.host)
        if adapter is None:
            raise WorkflowProtocolError(
                FailureCode.CHECKPOINT_INVALID,
                "the checkpoint's host binding matches no adapter pinned by its workflow",
            )
        return adapter

    def _payload(
        self, workflow: WorkflowDefinition, step: StepDefinition, adapter: HostAdapter, cp: Checkpoint
    ) -> dict[str, Any]:
        return self.step_payloads.payload(workflow, step, adapter, cp)

    def _file_digest(self, path: str) -> str:
        return DIGEST_PREFIX + file_sha256(self.release, path)

    def now(self) -> int:
        """This engine's clock in whole seconds: when it issues, and the latest a confirmation may be dated."""
        return int(self._clock())

    def workflow_ref(self, workflow: WorkflowDefinition) -> WorkflowRef:
        """The identity of ``workflow`` a result carries: this release's own, built once; any other's, built now."""
        return self._workflow_refs.get((workflow.id, workflow.version)) or WorkflowRef.of(workflow)
