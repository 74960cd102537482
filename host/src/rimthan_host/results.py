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


def validator_key(summary: Mapping[str, Any]) -> str:
    """A validator of a round as ``verdict`` takes it: ``validator_id@version``."""
    return f"{summary['validator_id']}@{summary['version']}"


def _part(wire: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = wire.get(key)
    return value if isinstance(value, Mapping) else {}


def _texts(value: Any) -> tuple[str, ...]:
    return tuple(str(item) for item in value) if isinstance(value, list) else ()


def _listed(wire: Mapping[str, Any], key: str) -> tuple[Mapping[str, Any], ...]:
    value = wire.get(key)
    return tuple(item for item in value if isinstance(item, Mapping)) if isinstance(value, list) else ()


@dataclass(frozen=True)
class WalkedStep:
    """A step a migration walks again (``walked_again``): its id and the outputs it produces again."""

    step: str
    outputs: tuple[str, ...]

    @classmethod
    def of(cls, wire: Mapping[str, Any]) -> WalkedStep:
        return cls(str(wire.get("step") or ""), _texts(wire.get("outputs")))


@dataclass(frozen=True)
class RunResult:
    """Where a run is after a move.

    ``status``: the verifier's (``active``, ``advanced``, ``input_required``,
    ``validation_failed``, ``blocked``, ``completed``...). ``release``: the id of
    the release the run is on (``research-decision@1.3.0``). ``workflow`` and
    ``workflow_version``: the run's workflow. ``step``: the step the run is at as the verifier describes it (id,
    title, ``gated``, instruction, ``outputs``...; empty when there is none, a
    completed run) and ``step_id`` its id (``None`` then). ``question``: the
    question waiting (``field``, ``prompt``, ``choices``) for ``input_required``.
    ``findings``: the validators' findings of a refused round
    (``validation_failed``). ``failures``: why the verifier refused the move
    (``blocked``: each with its ``code`` and ``message``). ``migration``: the
    migration the verifier previews or offers, if any, and ``walked_again`` the
    steps it walks again (each a :class:`WalkedStep`, in order; none without a
    migration); ``offered_release``: the release id an unconfirmed offer names,
    what ``HostSession.migrate`` takes. ``message``: what happened, in the verifier's words. ``wire``:
    the result as the verifier sent it.
    """

    status: str
    release: str
    workflow: str
    workflow_version: str
    step: Mapping[str, Any]
    step_id: str | None
    question: Mapping[str, Any] | None
    findings: tuple[Mapping[str, Any], ...]
    failures: tuple[Mapping[str, Any], ...]
    migration: Mapping[str, Any] | None
    walked_again: tuple[WalkedStep, ...]
    message: str
    wire: Mapping[str, Any]

    @property
    def offered_release(self) -> str | None:
        """The release id a migration offered to the run names (its ``to.release``), until it is confirmed."""
        if self.migration is None or self.migration.get("confirmed"):
            return None
        return str(_part(self.migration, "to").get("release") or "") or None

    @property
    def manifest_digest(self) -> str:
        """The manifest digest of the run's release, as the verifier names it (``""`` if it names none)."""
        return str(_part(self.wire, "release").get("manifest_digest") or "")

    @classmethod
    def of(cls, wire: Mapping[str, Any]) -> RunResult:
        step, workflow, migration = _part(wire, "step"), _part(wire, "workflow"), _part(wire, "migration")
        return cls(
            status=str(wire["status"]),
            release=str(_part(wire, "release").get("id") or ""),
            workflow=str(workflow.get("id") or ""),
            workflow_version=str(workflow.get("version") or ""),
            step=step,
            step_id=str(step["id"]) if step.get("id") else None,
            question=_part(wire, "question") or None,
            findings=_listed(wire, "findings"),
            failures=_listed(wire, "failures"),
            migration=migration or None,
            walked_again=tuple(WalkedStep.of(w) for w in _listed(migration, "walked_again")),
            message=str(wire.get("message") or ""),
            wire=wire,
        )


@dataclass(frozen=True)
class ValidationRound:
    """The verifier's answer to ``prepare``: the step's files checked, and the validators to run.

    ``status``: ``ready_for_semantic_validation`` (run each of ``validators``:
    ``validator_id``, ``version``, ``subagent``..., then record a verdict for
    each and submit) or ``deterministic_validation_failed`` (``failures``: each
    file refused, with its ``code``, ``message`` and ``artifact_id``). ``ready``:
    whether the validators wait for verdicts; ``keys``: each validator's
    ``validator_id@version``, as ``verdict`` takes it. ``message``: what happened, in
    the verifier's words. ``wire``: the result as the verifier sent it.
    """

    status: str
    validators: tuple[Mapping[str, Any], ...]
    failures: tuple[Mapping[str, Any], ...]
    message: str
    wire: Mapping[str, Any]

    @property
    def ready(self) -> bool:
        return self.status == "ready_for_semantic_validation"

    @property
    def keys(self) -> tuple[str, ...]:
        """Each validator to run as ``validator_id@version``: the key :meth:`HostSession.verdict` takes."""
        return tuple(validator_key(v) for v in self.validators)

    @classmethod
    def of(cls, wire: Mapping[str, Any]) -> ValidationRound:
        message = str(wire.get("message") or "")
        return cls(str(wire["status"]), _listed(wire, "validators"), _listed(wire, "failures"), message, wire)


__all__ = ["RunResult", "ValidationRound", "WalkedStep"]
