"""What a :class:`~rimthan_host.session.HostSession` records of its run: the events, the record, a prepared round."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .confirmations import ConfirmedStateBook
from .delivered import FileMark
from .file_digests import Evidence
from .project_files import WrittenFile
from .reports import validator_key
from .run_state import kept_offer, kept_position

EventSink = Callable[["HarnessEvent"], None]


@dataclass(frozen=True)
class HarnessEvent:
    """One thing the host did, for printing (demo) or asserting (tests)."""

    kind: str  # call | probe | deliver | write | review | answer | confirm | migrate | repair
    summary: str
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class RunRecord:
    """How a run went: each call's status, every checkpoint, steps, validators, files, the final result."""

    statuses: list[tuple[str, str, str | None]] = field(default_factory=list)  # (tool, status, step id)
    probes: list[tuple[str, str]] = field(default_factory=list)  # (release, status): offers the host asked to learn
    checkpoints: list[str] = field(default_factory=list)  # every distinct checkpoint, in issue order
    steps_visited: list[str] = field(default_factory=list)
    validation_rounds: dict[str, int] = field(default_factory=dict)
    validators_run: list[tuple[str, str, str]] = field(default_factory=list)  # (step, validator key, outcome)
    written: dict[str, WrittenFile] = field(default_factory=dict)
    final: dict[str, Any] = field(default_factory=dict)


@dataclass
class Prepared:
    """A step's files attested and deterministically checked: the validators still to run."""

    artifacts: list[WrittenFile]
    bundle: str
    validators: list[dict[str, Any]]  # the bundle's validator summaries
    verdicts: dict[str, tuple[str, tuple[Mapping[str, Any], ...]]] = field(default_factory=dict)
    marks: dict[str, tuple[str, FileMark | None]] = field(default_factory=dict)  # subagent: its file, as named

    @property
    def pending(self) -> list[dict[str, Any]]:
        return [s for s in self.validators if validator_key(s) not in self.verdicts]


__all__ = ["EventSink", "HarnessEvent", "Prepared", "RunRecord"]


@dataclass(frozen=True)
class SavedMove:
    """What a resume state is made of: the confirmed state, the run's position (a result), which outputs existed,
    the evidence, the last migration offer the run saw (so a resumed run need not ask the verifier again), and
    the validation round with its verdicts so far (``kept_round.round_json``: empty for none, so a move drops it)."""

    state: ConfirmedStateBook
    position: dict[str, Any]
    existed: dict[str, bool]
    evidence: dict[str, Evidence]
    offer: dict[str, Any] | None
    round: dict[str, Any] = field(default_factory=dict)


def offered(result: Mapping[str, Any]) -> dict[str, Any] | None:
    """The migration a verifier's result offers (its unconfirmed preview), or None: none, or one already taken."""
    preview = result.get("migration")
    return dict(preview) if isinstance(preview, Mapping) and not preview.get("confirmed") else None


def resume_state(run_id: str, saved: SavedMove) -> dict[str, Any]:
    """The run's resume state for one checkpoint (``<run>.json``): what a resume restores the session from."""
    position = saved.position
    step = position.get("step") or {}
    return {
        "run": run_id,
        "confirmed_state": saved.state.projection(),
        "workflow": position.get("workflow"),
        "release": position.get("release"),
        "step": step.get("id"),
        "gated": bool(step.get("gated")),
        "existed_before": saved.existed,
        "validated": {k: e.to_json() for k, e in saved.evidence.items()},
        "completed": position.get("status") == "completed",
        "position": kept_position(position),
        **kept_offer(saved.offer),
        **saved.round,
    }
