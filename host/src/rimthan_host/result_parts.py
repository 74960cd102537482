"""The parts of a :class:`~rimthan_host.results.RunResult`, typed: the step, its outputs, the question, each
failure and finding, the migration and the facts its target needs; and of a
:class:`~rimthan_host.results.ValidationRound`: each validator to run.

Each is a frozen dataclass of the members a harness reads, read from the
verifier's result once its shape is checked (:mod:`~rimthan_host.result_shape`);
a member the verifier left out reads as empty (``""``, ``()``, ``False``,
``None``). Each keeps the part exactly as the verifier sent it in ``wire``,
for a member the kit does not type (a failure's ``details``, a step's
``host_assets``) or a harness that forwards the JSON.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

Choice = str | int | bool


def part(wire: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """``wire[key]`` if it is an object, else an empty one."""
    value = wire.get(key)
    return value if isinstance(value, Mapping) else {}


def texts(value: Any) -> tuple[str, ...]:
    """Each item of ``value`` as text; none if it is no array."""
    return tuple(str(item) for item in value) if isinstance(value, list) else ()


def listed(wire: Mapping[str, Any], key: str) -> tuple[Mapping[str, Any], ...]:
    """The objects of the array ``wire[key]``; none if it is no array."""
    value = wire.get(key)
    return tuple(item for item in value if isinstance(item, Mapping)) if isinstance(value, list) else ()


def _text(wire: Mapping[str, Any], key: str) -> str:
    value = wire.get(key)
    return "" if value is None else str(value)


def _optional(wire: Mapping[str, Any], key: str) -> str | None:
    return _text(wire, key) or None


def validator_key(summary: Mapping[str, Any]) -> str:
    """A validator of a round as ``verdict`` takes it: ``validator_id@version``."""
    return f"{summary['validator_id']}@{summary['version']}"


class Part(Protocol):
    @property
    def wire(self) -> Mapping[str, Any]: ...


def wires(parts: Iterable[Part]) -> list[Mapping[str, Any]]:
    """Each of ``parts`` as the verifier sent it."""
    return [p.wire for p in parts]


@dataclass(frozen=True)
class StepOutput:
    """A file a gated step produces (what :meth:`~rimthan_host.session.HostSession.write_output` takes)."""

    id: str  # its artifact id
    path: str  # where it is written, relative to the project
    media_type: str  # application/json or text/markdown
    wire: Mapping[str, Any]

    @classmethod
    def of(cls, wire: Mapping[str, Any]) -> StepOutput:
        return cls(_text(wire, "id"), _text(wire, "path"), _text(wire, "media_type"), wire)


@dataclass(frozen=True)
class Step:
    """The step a run is at: ``id``, ``title``, whether it is ``gated`` (files checked and validated), its
    ``instruction`` text and the ``outputs`` it produces (none for an ungated step)."""

    id: str
    title: str
    gated: bool
    instruction: str
    outputs: tuple[StepOutput, ...]
    wire: Mapping[str, Any]

    @classmethod
    def of(cls, wire: Mapping[str, Any]) -> Step:
        outputs = tuple(StepOutput.of(o) for o in listed(wire, "outputs"))
        instruction = _text(part(wire, "instruction"), "text")
        return cls(_text(wire, "id"), _text(wire, "title"), wire.get("gated") is True, instruction, outputs, wire)


@dataclass(frozen=True)
class Question:
    """What the run asks the person (``input_required``)."""

    field: str  # the confirmed-state field the answer fills
    prompt: str  # the question, as the person reads it
    choices: tuple[Choice, ...]  # strings, integers or booleans; none: a free answer
    wire: Mapping[str, Any]

    @classmethod
    def of(cls, wire: Mapping[str, Any]) -> Question:
        raw = wire.get("choices")
        choices = tuple(c for c in raw if isinstance(c, (str, int, bool))) if isinstance(raw, list) else ()
        return cls(_text(wire, "field"), _text(wire, "prompt"), choices, wire)


@dataclass(frozen=True)
class Failure:
    """Why the verifier refused a move: its ``code`` (docs/failure-codes.md), ``message``, and where, when it says:
    ``artifact_id``, ``path``, ``pointer``; anything more (``details``) is in ``wire``."""

    code: str
    message: str
    artifact_id: str | None
    path: str | None
    pointer: str | None
    wire: Mapping[str, Any]

    @classmethod
    def of(cls, wire: Mapping[str, Any]) -> Failure:
        where = (_optional(wire, "artifact_id"), _optional(wire, "path"), _optional(wire, "pointer"))
        return cls(_text(wire, "code"), _text(wire, "message"), *where, wire)


@dataclass(frozen=True)
class Finding:
    """A failed validator's finding: the ``validator`` (``validator_id@version``), ``severity`` (``error`` or
    ``warning``), ``message``, and the ``artifact_id`` it is about, when it names one."""

    validator: str
    severity: str
    message: str
    artifact_id: str | None
    wire: Mapping[str, Any]

    @classmethod
    def of(cls, wire: Mapping[str, Any]) -> Finding:
        said = (_text(wire, "severity"), _text(wire, "message"), _optional(wire, "artifact_id"))
        return cls(_text(wire, "validator"), *said, wire)


@dataclass(frozen=True)
class Validator:
    """A validator a prepared round asks to run: ``validator_id``, ``version``, and the ``subagent`` that runs it;
    ``key`` (``validator_id@version``) is what :meth:`~rimthan_host.session.HostSession.verdict` takes."""

    validator_id: str
    version: str
    subagent: str
    wire: Mapping[str, Any]

    @property
    def key(self) -> str:
        return validator_key(self.wire)

    @classmethod
    def of(cls, wire: Mapping[str, Any]) -> Validator:
        return cls(_text(wire, "validator_id"), _text(wire, "version"), _text(wire, "subagent"), wire)


@dataclass(frozen=True)
class WalkedStep:
    """A step a migration walks again (``walked_again``): its id and the outputs it produces again."""

    step: str
    outputs: tuple[str, ...]

    @classmethod
    def of(cls, wire: Mapping[str, Any]) -> WalkedStep:
        return cls(_text(wire, "step"), texts(wire.get("outputs")))


@dataclass(frozen=True)
class NeededFact:
    """A confirmed-state field a migration's target declares (a required one not present must be confirmed before
    the migration is taken)."""

    field: str
    required: bool  # the target's schema requires it
    present: bool  # the run's values hold it now
    wire: Mapping[str, Any]

    @classmethod
    def of(cls, wire: Mapping[str, Any]) -> NeededFact:
        return cls(_text(wire, "field"), wire.get("required") is True, wire.get("present") is True, wire)


@dataclass(frozen=True)
class Migration:
    """A migration the verifier offers, previews or took."""

    source_release: str  # the release id the run moves from
    target_release: str  # and the one it moves to
    confirmed: bool  # taken (else offered or previewed)
    restart_step: str  # where the run restarts on the target
    walked_again: tuple[WalkedStep, ...]  # the steps it walks again, in order
    target_needs: tuple[NeededFact, ...]  # the facts the target declares (none when the verifier names none)
    wire: Mapping[str, Any]

    @classmethod
    def of(cls, wire: Mapping[str, Any]) -> Migration:
        ends = (_text(part(wire, "from"), "release"), _text(part(wire, "to"), "release"))
        walked = tuple(WalkedStep.of(w) for w in listed(wire, "walked_again"))
        needs = tuple(NeededFact.of(n) for n in listed(part(wire, "target_needs"), "confirmed_state"))
        return cls(*ends, wire.get("confirmed") is True, _text(wire, "restart_step"), walked, needs, wire)

    @property
    def missing(self) -> tuple[str, ...]:
        """The fields the target requires that the run's values lack: what to confirm before taking it."""
        return tuple(n.field for n in self.target_needs if n.required and not n.present)


__all__ = ["Failure", "Finding", "Migration", "NeededFact", "Question", "Step", "StepOutput", "Validator", "WalkedStep"]
