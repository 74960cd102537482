"""What a session's or a harness's move returns: typed results, the verifier's answer kept whole beside them.

Two kinds of operation, one type each. :class:`RunResult` answers every move
of the run (``start``, ``advance``, ``submit``, ``migrate``, ``resume``; the
harness's ``start``, ``run`` and ``migrate``): where the run is now.
:class:`ValidationRound` answers ``prepare``: the validators to run, or why
the files were refused. The bridge reads only their typed fields: one reply
per kind (:meth:`~rimthan_host.step_replies.StepReplies.describe` for a move,
the refused files or the validators for a round). Both keep the verifier's
result exactly as it sent it in ``wire``; the opaque values a host carries
(checkpoint, validation bundle) are only there, and the session carries them itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .result_parts import (
    Failure,
    Finding,
    Migration,
    Question,
    Step,
    Validator,
    WalkedStep,
    listed,
    part,
)


@dataclass(frozen=True)
class RunResult:
    """Where a run is after a move.

    ``status``: the verifier's (``active``, ``advanced``, ``input_required``,
    ``validation_failed``, ``blocked``, ``completed``...). ``release``: the id of
    the release the run is on (``research-decision@1.3.0``). ``workflow`` and
    ``workflow_version``: the run's workflow. ``step``: the step the run is at
    (a :class:`~rimthan_host.result_parts.Step`: ``id``, ``title``, ``gated``,
    ``instruction``, ``outputs``; ``None`` when there is none, a completed run)
    and ``step_id`` its id. ``question``: the question waiting for
    ``input_required`` (a :class:`~rimthan_host.result_parts.Question`).
    ``findings``: the validators' findings of a refused round
    (``validation_failed``; each a :class:`~rimthan_host.result_parts.Finding`).
    ``failures``: why the verifier refused the move (``blocked``; each a
    :class:`~rimthan_host.result_parts.Failure`). ``migration``: the migration
    the verifier previews or offers, if any (a
    :class:`~rimthan_host.result_parts.Migration`), and ``walked_again`` the
    steps it walks again (none without a migration); ``offered_release``: the
    release id an unconfirmed offer names, what ``HostSession.migrate`` takes.
    ``message``: what happened, in the verifier's words. ``wire``: the result as
    the verifier sent it; each typed part keeps its own JSON in its ``wire``.
    """

    status: str
    release: str
    workflow: str
    workflow_version: str
    step: Step | None
    step_id: str | None
    question: Question | None
    findings: tuple[Finding, ...]
    failures: tuple[Failure, ...]
    migration: Migration | None
    message: str
    wire: Mapping[str, Any]

    @property
    def walked_again(self) -> tuple[WalkedStep, ...]:
        """The steps the migration walks again, in order (none without a migration)."""
        return self.migration.walked_again if self.migration is not None else ()

    @property
    def offered_release(self) -> str | None:
        """The release id a migration offered to the run names (its ``to.release``), until it is confirmed."""
        if self.migration is None or self.migration.confirmed:
            return None
        return self.migration.target_release or None

    @property
    def step_wire(self) -> Mapping[str, Any]:
        """The step as the verifier sent it (``{}`` when there is none)."""
        return self.step.wire if self.step is not None else {}

    @property
    def manifest_digest(self) -> str:
        """The manifest digest of the run's release, as the verifier names it (``""`` if it names none)."""
        return str(part(self.wire, "release").get("manifest_digest") or "")

    @classmethod
    def of(cls, wire: Mapping[str, Any]) -> RunResult:
        step, workflow, migration = part(wire, "step"), part(wire, "workflow"), part(wire, "migration")
        question = part(wire, "question")
        return cls(
            status=str(wire["status"]),
            release=str(part(wire, "release").get("id") or ""),
            workflow=str(workflow.get("id") or ""),
            workflow_version=str(workflow.get("version") or ""),
            step=Step.of(step) if step else None,
            step_id=str(step["id"]) if step.get("id") else None,
            question=Question.of(question) if question else None,
            findings=tuple(Finding.of(f) for f in listed(wire, "findings")),
            failures=tuple(Failure.of(f) for f in listed(wire, "failures")),
            migration=Migration.of(migration) if migration else None,
            message=str(wire.get("message") or ""),
            wire=wire,
        )


@dataclass(frozen=True)
class ValidationRound:
    """The verifier's answer to ``prepare``: the step's files checked, and the validators to run.

    ``status``: ``ready_for_semantic_validation`` (run each of ``validators``, a
    :class:`~rimthan_host.result_parts.Validator`: ``validator_id``, ``version``,
    ``subagent``, ``key``; then record a verdict for each and submit) or
    ``deterministic_validation_failed`` (``failures``: each file refused, a
    :class:`~rimthan_host.result_parts.Failure`: its ``code``, ``message`` and
    ``artifact_id``). ``ready``: whether the validators wait for verdicts;
    ``keys``: each validator's ``validator_id@version``, as ``verdict`` takes it.
    ``message``: what happened, in the verifier's words. ``wire``: the result as
    the verifier sent it; each validator keeps its own JSON in its ``wire``.
    """

    status: str
    validators: tuple[Validator, ...]
    failures: tuple[Failure, ...]
    message: str
    wire: Mapping[str, Any]

    @property
    def ready(self) -> bool:
        return self.status == "ready_for_semantic_validation"

    @property
    def keys(self) -> tuple[str, ...]:
        """Each validator to run as ``validator_id@version``: the key :meth:`HostSession.verdict` takes."""
        return tuple(v.key for v in self.validators)

    @classmethod
    def of(cls, wire: Mapping[str, Any]) -> ValidationRound:
        message = str(wire.get("message") or "")
        failures = tuple(Failure.of(f) for f in listed(wire, "failures"))
        validators = tuple(Validator.of(v) for v in listed(wire, "validators"))
        return cls(str(wire["status"]), validators, failures, message, wire)


__all__ = ["RunResult", "ValidationRound", "WalkedStep"]
