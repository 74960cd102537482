"""Typed tool results: what ``WorkflowEngineQueryModule`` returns, serialised once by ``to_json``.

The engine speaks in these records; the server adapter turns a
:class:`ToolResult` into wire JSON with its one ``to_json`` and checks that
against the tool's declared output schema. Every key of the closed result
envelope is always present on the wire (``null`` / ``[]`` when unused), so
the records carry defaults for the parts an outcome does not use.

A :class:`ToolResult` is read through its typed fields; an in-process host
that wants what an MCP client reads in ``structuredContent`` asks for
``to_json()``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rimthan_workflow_registry.failures import Failure
from rimthan_workflow_registry.release import Question, VerifiedRelease, WorkflowDefinition
from rimthan_workflow_registry.run import IssuedCheckpoint, ValidatorSummary


@dataclass(frozen=True)
class WorkflowRef:
    """The workflow a result is about."""

    id: str
    version: str

    @classmethod
    def of(cls, workflow: WorkflowDefinition) -> WorkflowRef:
        return cls(workflow.id, workflow.version)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "version": self.version}


@dataclass(frozen=True)
class ReleaseRef:
    """The verified release that served the call."""

    id: str
    manifest_digest: str

    @classmethod
    def of(cls, release: VerifiedRelease) -> ReleaseRef:
        return cls(release.release_id, release.manifest_digest)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "manifest_digest": self.manifest_digest}


@dataclass(frozen=True)
class MigrationEnd:
    """One side of a migration: release identity and the workflow key on it."""

    release: str
    manifest_digest: str
    workflow: str

    @classmethod
    def of(cls, release: VerifiedRelease, workflow: WorkflowDefinition) -> MigrationEnd:
        return cls(release.release_id, release.manifest_digest, workflow.key)

    def to_json(self) -> dict[str, Any]:
        return {"release": self.release, "manifest_digest": self.manifest_digest, "workflow": self.workflow}


@dataclass(frozen=True)
class WalkedStep:
    """A step the run already walked that a migration walks again, with the files it produced and redoes."""

    step: str
    outputs: tuple[str, ...]  # artifact ids of this step the run holds receipts for (dropped, produced again)

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "outputs": list(self.outputs)}


@dataclass(frozen=True)
class MigrationPreview:
    """What an explicit migration does to the run: everything is invalidated, the run restarts."""

    source: MigrationEnd
    target: MigrationEnd
    invalidated_artifacts: tuple[str, ...]
    invalidated_validators: tuple[str, ...]
    restart_step: str
    walked_again: tuple[WalkedStep, ...] = ()
    confirmed: bool = False
    target_needs: Mapping[str, Any] | None = None  # run.requirements.workflow_needs: the target, for this host

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "from": self.source.to_json(),
            "to": self.target.to_json(),
            "invalidated_artifacts": list(self.invalidated_artifacts),
            "invalidated_validators": list(self.invalidated_validators),
            "restart_step": self.restart_step,
            "walked_again": [w.to_json() for w in self.walked_again],
            "confirmed": self.confirmed,
        }
        if self.target_needs is not None:
            out["target_needs"] = dict(self.target_needs)
        return out


@dataclass(frozen=True, init=False)
class ToolResult:
    """The one result envelope every tool returns (closed output schema).

    ``step``, ``findings`` and ``validation_bundle`` are already wire JSON,
    built by the core modules that own their shape (step payload, report
    checks, validation bundle); everything else is typed here.

    Every call builds one, so its ``__init__`` is written here rather than
    generated: the generated one of a frozen dataclass sets each of the 12
    fields through ``object.__setattr__``; this one fills the instance's
    dictionary at once (the same fields, values and defaults).
    """

    status: str
    release: ReleaseRef
    workflow: WorkflowRef | None
    checkpoint: IssuedCheckpoint | None
    step: Mapping[str, Any] | None
    question: Question | None
    failures: tuple[Failure, ...]
    findings: tuple[Mapping[str, Any], ...]
    validators: tuple[ValidatorSummary, ...]
    validation_bundle: Mapping[str, Any] | None
    migration: MigrationPreview | None
    message: str

    def __init__(
        self,
        status: str,
        release: ReleaseRef,
        workflow: WorkflowRef | None = None,
        checkpoint: IssuedCheckpoint | None = None,
        step: Mapping[str, Any] | None = None,
        question: Question | None = None,
        failures: tuple[Failure, ...] = (),
        findings: tuple[Mapping[str, Any], ...] = (),
        validators: tuple[ValidatorSummary, ...] = (),
        validation_bundle: Mapping[str, Any] | None = None,
        migration: MigrationPreview | None = None,
        message: str = "",
    ) -> None:
        self.__dict__.update(
            status=status,
            release=release,
            workflow=workflow,
            checkpoint=checkpoint,
            step=step,
            question=question,
            failures=failures,
            findings=findings,
            validators=validators,
            validation_bundle=validation_bundle,
            migration=migration,
            message=message,
        )

    @classmethod
    def failed(
        cls,
        status: str,
        release: ReleaseRef,
        workflow: WorkflowDefinition,
        issued: IssuedCheckpoint | None,
        failures: Sequence[Failure],
        *,
        message: str = "",
        migration: MigrationPreview | None = None,
    ) -> ToolResult:
        """A call that cannot move the run: every accumulated failure, the checkpoint unchanged."""
        return cls(
            status,
            release,
            workflow=WorkflowRef.of(workflow),
            checkpoint=issued,
            failures=tuple(failures),
            migration=migration,
            message=message,
        )

    def to_json(self) -> dict[str, Any]:
        issued = self.checkpoint
        return {
            "status": self.status,
            "workflow": self.workflow.to_json() if self.workflow else None,
            "release": self.release.to_json(),
            "checkpoint": issued.token if issued else None,
            "checkpoint_digest": issued.digest if issued else None,
            "sequence": issued.checkpoint.sequence if issued else None,
            "step": self.step,
            "question": self.question.to_json() if self.question else None,
            "failures": [f.to_json() for f in self.failures],
            "findings": list(self.findings),
            "validators": [v.to_json() for v in self.validators],
            "validation_bundle": self.validation_bundle,
            "migration": self.migration.to_json() if self.migration else None,
            "message": self.message or self.status,
        }
