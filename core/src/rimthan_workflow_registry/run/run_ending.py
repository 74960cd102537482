"""How an audited run ended: completed, or waiting (and for what), read from its pinned release.

The checkpoint tokens say where a run stopped (step, receipts, release by
manifest digest) but not what that step means. The verified release the last
checkpoint is pinned to does: a terminal step whose outputs and validators all
hold current receipts is a completed run (``continue_workflow`` answers
``completed`` there); a gated step without them waits for its validation (the
setup step for its setup); a validated step with branch predicates waits for
its question (had the answer been confirmed, the engine would have issued the
next step's checkpoint in the same call); a validated step with a linear next
waits for ``continue_workflow``. Without that release the ending is not told:
the audit says so rather than guess. Pure: the caller verifies the releases.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from rimthan_workflow_registry.protocol_names import SETUP_STEP_ID
from rimthan_workflow_registry.release.catalogue import StepDefinition
from rimthan_workflow_registry.release.verified import VerifiedRelease
from rimthan_workflow_registry.run.audit import RunHistory
from rimthan_workflow_registry.run.checkpoints import Checkpoint
from rimthan_workflow_registry.run.validation_bundle import input_digest, step_validated

Outcome = Literal["completed", "waiting", "unknown"]
Waiting = Literal["question", "setup", "validation", "repair", "continue"]


@dataclass(frozen=True)
class RunEnding:
    """The run's end as its release tells it; ``waiting_for`` and its details only when waiting."""

    outcome: Outcome
    step: str
    release: str
    migrated_from: str | None = None
    migrated_to: str | None = None
    waiting_for: Waiting | None = None
    question_field: str | None = None
    question_choices: tuple[Any, ...] = ()
    outputs: tuple[str, ...] = ()
    validators: tuple[str, ...] = ()
    host_assets: tuple[str, ...] = ()
    next_step: str | None = None
    findings: int | None = None
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "step": self.step,
            "release": self.release,
            "migrated_from": self.migrated_from,
            "migrated_to": self.migrated_to,
            "waiting_for": self.waiting_for,
            "question": None
            if self.question_field is None
            else {"field": self.question_field, "choices": list(self.question_choices)},
            "outputs": list(self.outputs),
            "validators": list(self.validators),
            "host_assets": list(self.host_assets),
            "next_step": self.next_step,
            "findings": self.findings,
            "reason": self.reason,
            "summary": self.summary(),
        }

    def summary(self) -> str:
        """One line for people: ``outcome: ...``."""
        where = f"at step {self.step} on {self.release}"
        moved = f" (migrated from {self.migrated_from} to {self.migrated_to})" if self.migrated_to else ""
        if self.outcome == "completed":
            return f"outcome: completed {where}{moved}"
        if self.outcome == "unknown":
            return f"outcome: not told {where}{moved}: {self.reason}"
        return f"outcome: waiting {where}{moved} for {self._waiting_text()}"

    def _waiting_text(self) -> str:
        validators = ", ".join(self.validators) or "none"
        outputs = ", ".join(self.outputs) or "none"
        if self.waiting_for == "question":
            choices = f" (choices: {', '.join(map(str, self.question_choices))})" if self.question_choices else ""
            return f"an answer to its question, field {self.question_field}{choices}; confirm it and continue"
        if self.waiting_for == "setup":
            assets = ", ".join(self.host_assets) or "none"
            return f"the setup to deliver: assets {assets}; then outputs {outputs} with validators {validators}"
        if self.waiting_for == "repair":
            return (
                f"a repair: the last validation round failed with {_count(self.findings)} "
                f"(failed: {validators}); outputs {outputs} to submit again"
            )
        if self.waiting_for == "validation":
            return f"its outputs {outputs} to submit with validators {validators}"
        return f"continue_workflow to move on to {self.next_step}"


def _count(findings: int | None) -> str:
    return "an unrecorded number of findings" if findings is None else f"{findings} finding(s)"


def ending_of(history: RunHistory, releases: Mapping[str, VerifiedRelease], *, missing: str = "") -> RunEnding:
    """How ``history`` ended, read from the release its last checkpoint is pinned to (keyed by manifest digest).

    ``missing`` is appended to the reason when that release is not among ``releases``.
    """
    last = history.last
    moves = history.migrations
    base: dict[str, Any] = {
        "step": last.step_id,
        "release": last.release_id,
        "migrated_from": moves[0].from_release if moves else None,
        "migrated_to": moves[-1].to_release if moves else None,
    }
    release = releases.get(last.manifest_digest)
    if release is None:
        reason = f"its release {last.release_id} ({last.manifest_digest}) was not read" + (
            f"; {missing}" if missing else ""
        )
        return RunEnding("unknown", reason=reason, **base)
    workflow = release.catalogue.workflow(last.workflow_id, last.workflow_version)
    step = workflow.step(last.step_id) if workflow is not None else None
    if step is None:
        return RunEnding("unknown", reason=f"{last.release_id} has no step {last.step_id}", **base)
    return _at_step(step, last, history, base)


def _at_step(step: StepDefinition, last: Checkpoint, history: RunHistory, base: dict[str, Any]) -> RunEnding:
    if not step_validated(step, last):
        outputs = tuple(o.id for o in step.outputs)
        pending = _pending_validators(step, last)
        if step.id == SETUP_STEP_ID:
            return RunEnding(
                "waiting",
                waiting_for="setup",
                outputs=outputs,
                validators=pending,
                host_assets=step.host_assets,
                **base,
            )
        failed = bool(history.failed_rounds) and history.failed_rounds[-1].checkpoint is last
        if failed:  # the round's passes stay as receipts (reused on identical outputs); the rest failed
            return RunEnding(
                "waiting",
                waiting_for="repair",
                outputs=outputs,
                validators=tuple(k for k in step.validators if k not in last.validators),
                findings=last.failed_findings,
                **base,
            )
        return RunEnding("waiting", waiting_for="validation", outputs=outputs, validators=pending, **base)
    if step.terminal:
        return RunEnding("completed", **base)
    if step.branches:
        question = step.question
        return RunEnding(
            "waiting",
            waiting_for="question",
            question_field=question.field if question else None,
            question_choices=question.choices if question else (),
            **base,
        )
    return RunEnding("waiting", waiting_for="continue", next_step=step.next, **base)


def _pending_validators(step: StepDefinition, cp: Checkpoint) -> tuple[str, ...]:
    """Validators of ``step`` with no pass receipt on the current outputs (all of them if an output is missing)."""
    if any(o.id not in cp.artifacts for o in step.outputs):
        return step.validators
    digest = input_digest({o.id: cp.artifacts[o.id] for o in step.outputs})
    return tuple(k for k in step.validators if (r := cp.validators.get(k)) is None or r.input_digest != digest)
