"""A gated step's validation round, as a :class:`~rimthan_host.session.HostSession` moves it (mixed into it).

``prepare`` sends the step's attested files (``prepare_step_validation``)
and keeps the round the verifier opens (:class:`~rimthan_host.session_record.Prepared`);
``verdict`` records each validator's verdict once the verifier would take it
(its findings checked alone and with the round's other reports), and
``submit`` sends them all (``submit_step_validation``). Split from the
session so it holds the run's calls and its moves of the run, this the round.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from .confirmations import ConfirmedStateBook
from .project_files import WrittenFile
from .protocol import PREPARE, SUBMIT, HarnessError, HostProfile
from .reports import findings_problem, validator_key, validator_payload, validator_report
from .results import RunResult, ValidationRound
from .session_record import Prepared, RunRecord


class _RoundSession(Protocol):
    """What of the session a round reads and sets (:class:`~rimthan_host.session.HostSession` has it all)."""

    host: HostProfile
    state: ConfirmedStateBook
    record: RunRecord
    prepared: Prepared | None

    @property
    def checkpoint(self) -> str: ...

    @property
    def step_wire(self) -> Mapping[str, Any]: ...

    def _at_step(self) -> Mapping[str, Any]: ...

    def save(self, token: str | None = None) -> None: ...

    def verdict_problem(self, key: str, outcome: str, findings: Sequence[Mapping[str, Any]]) -> str | None: ...

    def _reports(self, verdicts: Mapping[str, tuple[str, Sequence[Mapping[str, Any]]]]) -> list[dict[str, Any]]: ...

    async def call(  # (the session's call, with the one keyword a round gives it)
        self, tool: str, arguments: dict[str, Any], *, accepted: Sequence[WrittenFile] = ()
    ) -> dict[str, Any]: ...


class RoundMoves:
    """The validation round's moves (mixed into :class:`~rimthan_host.session.HostSession`)."""

    prepared: Prepared | None  # the round open at the step (its validators and verdicts so far), or None

    async def prepare(self: _RoundSession, artifacts: Sequence[WrittenFile]) -> ValidationRound:
        """``prepare_step_validation`` for the attested files; on success the validators to run are pending."""
        step = self._at_step()
        self.record.validation_rounds[step["id"]] = self.record.validation_rounds.get(step["id"], 0) + 1
        prepared = await self.call(
            PREPARE,
            {
                "checkpoint": self.checkpoint,
                "confirmed_state": self.state.projection(),
                "host": self.host.to_json(),
                "artifacts": [a.to_artifact() for a in artifacts],
                "inputs": list(step.get("inputs") or []),
            },
        )
        if prepared["status"] == "ready_for_semantic_validation":
            self.prepared = Prepared(list(artifacts), prepared["validation_bundle"], list(prepared["validators"]))
        else:
            self.prepared = None
        return ValidationRound.of(prepared)

    def verdict(self: _RoundSession, key: str, outcome: str, findings: Sequence[Mapping[str, Any]] = ()) -> None:
        """Record one validator's verdict (``validator-id@version``) for the prepared bundle."""
        if self.prepared is None:
            raise HarnessError("no validation is waiting for verdicts; submit the step first")
        if key not in {validator_key(s) for s in self.prepared.validators}:
            raise HarnessError(f"validator {key} is not one this step's validation asked for")
        if outcome not in ("pass", "fail"):
            raise HarnessError(f"a verdict is pass or fail, not {outcome!r}")
        problem = self.verdict_problem(key, outcome, findings)
        if problem is not None:
            raise HarnessError(f"the verifier would refuse the verdict of {key}: {problem}")
        self.prepared.verdicts[key] = (outcome, tuple(dict(f) for f in findings))
        self.record.validators_run.append((str(self.step_wire.get("id")), key, outcome))
        self.save()  # (kept with the checkpoint's state: a resumed bridge takes it back if nothing it judged changed)

    def validator_instruction(self: _RoundSession, key: str) -> str:
        """The instruction of the round's validator ``key`` (``validator_id@version``), for the subagent that runs
        it: the text whose SHA-256 the bundle names (:class:`HarnessError` if it is not, or no round waits)."""
        validators = self.prepared.validators if self.prepared is not None else []
        summary = next((s for s in validators if validator_key(s) == key), None)
        if summary is None:
            raise HarnessError(f"no validation waiting here asked for validator {key}")
        return str(validator_payload(self.step_wire, summary)["instruction"]["text"])

    def verdict_problem(
        self: _RoundSession, key: str, outcome: str, findings: Sequence[Mapping[str, Any]]
    ) -> str | None:
        """Why the verifier would refuse this verdict's findings, alone or with the round's other verdicts."""
        assert self.prepared is not None
        verdicts = {**self.prepared.verdicts, key: (outcome, tuple(findings))}
        alone = findings_problem(outcome, findings, ())  # (each finding checked before any report is built of it)
        return alone if alone is not None else findings_problem(outcome, findings, self._reports(verdicts))

    def _reports(
        self: _RoundSession, verdicts: Mapping[str, tuple[str, Sequence[Mapping[str, Any]]]]
    ) -> list[dict[str, Any]]:
        """The reports of the validators with a verdict in ``verdicts``, in the bundle's order."""
        assert self.prepared is not None
        prepared = self.prepared
        return [
            validator_report(s, *verdicts[validator_key(s)], prepared.artifacts, self.host)
            for s in prepared.validators
            if validator_key(s) in verdicts
        ]

    async def submit(self: _RoundSession) -> RunResult:
        """``submit_step_validation`` with every recorded verdict."""
        prepared = self.prepared
        if prepared is None or prepared.pending:
            raise HarnessError("every validator needs a verdict before the step can be submitted")
        reports = self._reports(prepared.verdicts)
        result = await self.call(
            SUBMIT,
            {
                "checkpoint": self.checkpoint,
                "confirmed_state": self.state.projection(),
                "validation_bundle": prepared.bundle,
                "reports": reports,
            },
            accepted=prepared.artifacts,
        )
        self.prepared = None
        return RunResult.of(result)
