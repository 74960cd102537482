"""Offline run audit: a run's checkpoint tokens, as a harness logged them, checked and told as a history.

Every checkpoint names its parent (the SHA-256 of the parent token's exact
characters) and carries a sequence number, and the server signs it with its
checkpoint keys. Given the log of one run (one token per line) and those keys,
:func:`audit_run` verifies every token's signature and claims, then the chain:
the first checkpoint starts a run (sequence 1, no parent), and each next one
has sequence + 1 and names the line before it as parent. The first line that
breaks the chain is named exactly: a gap (checkpoints missing), a reorder (a
checkpoint logged before the one it follows), a fork (two checkpoints issued
from the same parent: a branch of the run), or a foreign token (another run's
checkpoint, or one signed with keys other than these). No server storage is
involved: the tokens are the record.

A release change between consecutive checkpoints is a migration; the audit
reports it with its parent link. Pure: no I/O beyond what the caller passes.
The log is taken as an iterable of lines and read once, in order, so a caller
can stream a file of any length; a line the caller could not read as a token
(not text, too long) comes with its refusal, raised when the audit reaches it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from rimthan_workflow_registry.errors import FailureCode, RegistryError
from rimthan_workflow_registry.run.checkpoints import Checkpoint, verify_checkpoint
from rimthan_workflow_registry.run.token_wire import TOKEN_FORMAT, token_digest, token_key_id
from rimthan_workflow_registry.run.tokens import (
    BUNDLE_TYPE,
    CHECKPOINT_TYPE,
    CheckpointKeyring,
    issued_by_newer_version,
)


class RunAuditError(RegistryError):
    """The log is not one unbroken, verified run; ``details["line"]`` is where it breaks."""


_FOREIGN_NEXT = (
    "audit with the --checkpoint-keys (or --state-dir) of the server that issued the run (`rimthan-mcp keys list` "
    "there shows its ids; retired ones stay archived in that file), or check the line belongs to this run's log"
)
_CHECKPOINTS_ONLY = "a run's log holds its checkpoint tokens only, one per line"
_INVALID_NEXT = (
    "the line is not a checkpoint token as the server issued it (edited, cut, or another server version's): "
    "audit the log as the harness wrote it, one token per line"
)


@dataclass(frozen=True)
class LoggedToken:
    """One non-blank line of the log: its 1-based line number and the token on it.

    ``refusal`` marks a line that holds no token the reader could pass on (not UTF-8, longer than any token):
    the audit raises it at that line, after every line before it, and never takes it for a later parent.
    """

    line: int
    token: str
    refusal: RunAuditError | None = None


@dataclass(frozen=True)
class AuditedCheckpoint:
    line: int
    digest: str
    key_id: str
    checkpoint: Checkpoint

    def to_json(self) -> dict[str, Any]:
        cp = self.checkpoint
        return {
            "line": self.line,
            "sequence": cp.sequence,
            "checkpoint_digest": self.digest,
            "key_id": self.key_id,
            "parent": cp.parent_digest,
            "step": cp.step_id,
            "release": {"id": cp.release_id, "manifest_digest": cp.manifest_digest},
            "workflow": {"id": cp.workflow_id, "version": cp.workflow_version},
            "host": cp.host.to_json(),
            "state_digest": cp.state_digest,
            "issued_at": cp.issued_at,
            "artifacts": {k: {"sha256": r.sha256, "size": r.size} for k, r in sorted(cp.artifacts.items())},
            "validators": {
                k: {"outcome": r.outcome, "input_digest": r.input_digest} for k, r in sorted(cp.validators.items())
            },
        }


@dataclass(frozen=True)
class Migration:
    """A checkpoint on another release than its parent: the run moved, by an explicit migration."""

    line: int
    parent_line: int
    parent_digest: str
    from_release: str
    from_manifest_digest: str
    from_workflow: str
    to_release: str
    to_manifest_digest: str
    to_workflow: str

    def to_json(self) -> dict[str, Any]:
        return {
            "line": self.line,
            "parent_line": self.parent_line,
            "parent": self.parent_digest,
            "from": {
                "release": self.from_release,
                "manifest_digest": self.from_manifest_digest,
                "workflow": self.from_workflow,
            },
            "to": {
                "release": self.to_release,
                "manifest_digest": self.to_manifest_digest,
                "workflow": self.to_workflow,
            },
        }


@dataclass(frozen=True)
class RunHistory:
    """An unbroken, verified run, oldest checkpoint first."""

    checkpoints: tuple[AuditedCheckpoint, ...]
    migrations: tuple[Migration, ...]
    repeated_lines: tuple[int, ...]

    @property
    def first(self) -> Checkpoint:
        return self.checkpoints[0].checkpoint

    @property
    def last(self) -> Checkpoint:
        return self.checkpoints[-1].checkpoint

    @property
    def steps(self) -> tuple[str, ...]:
        """Each step as the run reached it (a step entered again, e.g. after migration, appears again)."""
        out: list[str] = []
        for audited in self.checkpoints:
            if not out or out[-1] != audited.checkpoint.step_id:
                out.append(audited.checkpoint.step_id)
        return tuple(out)

    @property
    def failed_rounds(self) -> tuple[AuditedCheckpoint, ...]:
        """Checkpoints a failed validation round issued: those carrying the round's findings count.

        Only ``submit_step_validation`` with a failing report sets the signed
        ``findings`` claim, and every token that verifies today carries it when
        its round failed (the claim came before the current token format; older
        tokens are refused). A checkpoint on the same step, state and artifacts
        without it is no failed round: a passing submit at a gated step that
        still waits for its answer issues one too.
        """
        return tuple(c for c in self.checkpoints[1:] if c.checkpoint.failed_findings is not None)

    def ending(self) -> str:
        """How the log ends, as far as the signed tokens tell: last step, release, migrations, failed rounds."""
        last = self.last
        parts = [f"ended at step {last.step_id} (sequence {last.sequence}) on {last.release_id}"]
        if self.migrations:
            m = self.migrations[-1]
            parts.append(
                f"migrated {len(self.migrations)} time(s), last at line {m.line}: {m.from_release} -> {m.to_release}"
            )
        rounds = self.failed_rounds
        if rounds:
            where = ", ".join(f"{r.checkpoint.step_id} (line {r.line}, {_findings(r.checkpoint)})" for r in rounds)
            parts.append(f"{len(rounds)} failed validation round(s): {where}")
        else:
            parts.append("no failed validation round")
        return "; ".join(parts)

    @property
    def releases(self) -> tuple[tuple[str, str, str], ...]:
        """(release id, manifest digest, workflow id@version) in the order the run used them."""
        out: list[tuple[str, str, str]] = []
        for audited in self.checkpoints:
            cp = audited.checkpoint
            entry = (cp.release_id, cp.manifest_digest, f"{cp.workflow_id}@{cp.workflow_version}")
            if not out or out[-1] != entry:
                out.append(entry)
        return tuple(out)

    def to_json(self) -> dict[str, Any]:
        last = self.last
        return {
            "ok": True,
            "releases": [{"id": r, "manifest_digest": d, "workflow": w} for r, d, w in self.releases],
            "steps": list(self.steps),
            "checkpoints": [c.to_json() for c in self.checkpoints],
            "migrations": [m.to_json() for m in self.migrations],
            "repeated_lines": list(self.repeated_lines),
            "final": {
                "sequence": last.sequence,
                "step": last.step_id,
                "checkpoint_digest": self.checkpoints[-1].digest,
                "artifacts": len(last.artifacts),
                "validator_passes": len(last.validators),
                "release": last.release_id,
                "migrated": bool(self.migrations),
                "failed_validation_rounds": [
                    {"line": r.line, "step": r.checkpoint.step_id, "findings": r.checkpoint.failed_findings}
                    for r in self.failed_rounds
                ],
                "ending": self.ending(),
            },
        }


def _findings(cp: Checkpoint) -> str:
    return f"{cp.failed_findings} finding(s)"


def read_log(text: str) -> list[LoggedToken]:
    """Tokens of a log, one per line; blank lines are skipped, nothing else is."""
    return [LoggedToken(number, line.strip()) for number, line in enumerate(text.splitlines(), start=1) if line.strip()]


def audit_run(logged: Iterable[LoggedToken], keyring: CheckpointKeyring, *, source: str = "log") -> RunHistory:
    """Verify every token and the chain; the history of the run, or ``RunAuditError`` at the breaking line.

    ``logged`` is read once, in line order (what follows a break is read only to name a reorder).
    """
    audited: list[AuditedCheckpoint] = []
    repeated: list[int] = []
    by_digest: dict[str, AuditedCheckpoint] = {}
    entries = iter(logged)
    for entry in entries:
        current = _verify(entry, keyring, source)
        if audited and current.digest == audited[-1].digest:
            repeated.append(entry.line)  # a harness logging the same checkpoint twice: no new link
            continue
        if current.digest in by_digest:
            _break(source, entry.line, "reorder", f"repeats the checkpoint of line {by_digest[current.digest].line}")
        _link(audited[-1] if audited else None, current, by_digest, entries, keyring, source)
        audited.append(current)
        by_digest[current.digest] = current
    if not audited:
        raise RunAuditError(
            FailureCode.RUN_CHAIN_BROKEN,
            "holds no checkpoint token",
            path=source,
            details={"line": None, "break": "empty"},
        )
    return RunHistory(tuple(audited), tuple(_migrations(audited)), tuple(repeated))


def _verify(entry: LoggedToken, keyring: CheckpointKeyring, source: str) -> AuditedCheckpoint:
    if entry.refusal is not None:
        raise entry.refusal
    try:
        issued = verify_checkpoint(keyring, entry.token)
    except RegistryError as exc:
        # the next steps are not the live call's: no run is continued here
        message, kind, next_step = _unverified(entry.token, exc)
        raise RunAuditError(
            exc.code,
            f"line {entry.line}: {message}",
            path=f"{source}:{entry.line}",
            details={"line": entry.line, "break": kind},
            next_step=next_step,
        ) from None
    key_id = token_key_id(entry.token) or ""
    return AuditedCheckpoint(entry.line, token_digest(entry.token), key_id, issued.checkpoint)


def _unverified(token: str, exc: RegistryError) -> tuple[str, str, str]:
    """Why a logged line did not verify, for an operator auditing it: (message, break kind, next step)."""
    if exc.code is FailureCode.CHECKPOINT_KEY_UNKNOWN:
        message = (
            f"foreign token: it was signed with key {token_key_id(token) or '?'!r}, which these checkpoint "
            "keys do not hold (another server's key file, or a key retired before retired keys were archived "
            "for audit); audit with the key file of the server that issued the run"
        )
        return message, "foreign", _FOREIGN_NEXT
    if newer := issued_by_newer_version(token, CHECKPOINT_TYPE):
        return exc.message, "newer_format", _newer_next(newer)
    if newer := issued_by_newer_version(token, BUNDLE_TYPE):
        message = (
            f"a validation bundle token, not a checkpoint token; it was issued by a newer Rimthan version "
            f"(format {newer}; this one reads format {TOKEN_FORMAT})"
        )
        return message, "newer_format", f"{_CHECKPOINTS_ONLY}; {_newer_next(newer)}"
    return exc.message, "invalid", _INVALID_NEXT


def _newer_next(newer: int) -> str:
    return (
        f"audit this log with `rimthan-mcp audit` of the Rimthan version that issued it, or a later one: upgrade the "
        f"verifier to read token format {newer} (this version reads format {TOKEN_FORMAT} only)"
    )


def _link(
    previous: AuditedCheckpoint | None,
    current: AuditedCheckpoint,
    seen: dict[str, AuditedCheckpoint],
    rest: Iterator[LoggedToken],
    keyring: CheckpointKeyring,
    source: str,
) -> None:
    """Raise at ``current``'s line unless it is the run's next checkpoint (``rest``: the lines after it)."""
    cp, line = current.checkpoint, current.line
    if previous is None:
        if cp.sequence != 1 or cp.parent_digest is not None:
            _break(
                source,
                line,
                "gap",
                f"the log starts at sequence {cp.sequence}, not at the run's first "
                f"checkpoint (sequence 1): checkpoints 1-{cp.sequence - 1} are missing",
            )
        return
    prev = previous.checkpoint
    if cp.parent_digest == previous.digest:
        if cp.sequence != prev.sequence + 1:
            _break(
                source,
                line,
                "sequence",
                f"sequence {cp.sequence} follows sequence {prev.sequence} of line "
                f"{previous.line}; expected {prev.sequence + 1}",
            )
        return
    if cp.parent_digest is None:
        _break(source, line, "foreign", "foreign token: this checkpoint starts another run (sequence 1)")
    if cp.parent_digest in seen:
        parent = seen[cp.parent_digest]
        _break(
            source,
            line,
            "fork",
            f"fork: this checkpoint continues line {parent.line} (sequence "
            f"{parent.checkpoint.sequence}), which line {_child_of(parent, seen)} "
            "already continued; the run branched there",
        )
    later = _later_parent(cp.parent_digest, rest, keyring)
    if later is not None:
        _break(source, line, "reorder", f"sequence {cp.sequence} is logged before line {later} that it follows")
    if cp.sequence > prev.sequence + 1:
        _break(
            source,
            line,
            "gap",
            f"sequence {cp.sequence} after sequence {prev.sequence} of line "
            f"{previous.line}: checkpoints {prev.sequence + 1}-{cp.sequence - 1} are missing",
        )
    if cp.sequence <= prev.sequence:
        _break(
            source, line, "reorder", f"sequence {cp.sequence} after sequence {prev.sequence} of line {previous.line}"
        )
    _break(
        source,
        line,
        "foreign",
        f"foreign token: its parent is not line {previous.line} nor any line of this log; it belongs to another run",
    )


def _child_of(parent: AuditedCheckpoint, seen: dict[str, AuditedCheckpoint]) -> int:
    return next(c.line for c in seen.values() if c.checkpoint.parent_digest == parent.digest)


def _later_parent(parent_digest: str | None, rest: Iterator[LoggedToken], keyring: CheckpointKeyring) -> int | None:
    """The later line whose token is ``parent_digest``, if the log holds it (verified tokens only).

    Called only on the way to a refusal, so it may read the rest of the log; a line refused as unreadable is
    no parent.
    """
    for entry in rest:
        if entry.refusal is None and token_digest(entry.token) == parent_digest:
            try:
                verify_checkpoint(keyring, entry.token)
            except RegistryError:
                return None
            return entry.line
    return None


def _migrations(audited: Sequence[AuditedCheckpoint]) -> list[Migration]:
    out = []
    for parent, child in zip(audited, audited[1:], strict=False):
        p, c = parent.checkpoint, child.checkpoint
        if p.manifest_digest != c.manifest_digest:
            out.append(
                Migration(
                    child.line,
                    parent.line,
                    c.parent_digest or "",
                    p.release_id,
                    p.manifest_digest,
                    f"{p.workflow_id}@{p.workflow_version}",
                    c.release_id,
                    c.manifest_digest,
                    f"{c.workflow_id}@{c.workflow_version}",
                )
            )
    return out


def _host_change(before: Checkpoint | None, after: Checkpoint) -> str:
    """What changed when a migration rebound the run to another host (or capabilities), else ``""``."""
    if before is None or before.host == after.host:
        return ""
    old, new = before.host, after.host
    if (old.harness, old.adapter_version) == (new.harness, new.adapter_version):
        return f", host {new.harness} with other capabilities"
    return f", host {old.harness} adapter {old.adapter_version} -> {new.harness} adapter {new.adapter_version}"


def _break(source: str, line: int, kind: str, message: str) -> NoReturn:
    raise RunAuditError(
        FailureCode.RUN_CHAIN_BROKEN,
        f"line {line}: {message}",
        path=f"{source}:{line}",
        details={"line": line, "break": kind},
    )


def describe(history: RunHistory) -> list[str]:
    """The history as text lines, for people (the CLI prints them)."""
    first = history.checkpoints[0].checkpoint
    out = [
        f"run of {first.workflow_id}: {len(history.checkpoints)} checkpoint(s), chain unbroken, every token "
        f"verified (keys {', '.join(sorted({c.key_id for c in history.checkpoints}))})"
    ]
    for release, digest, workflow in history.releases:
        out.append(f"release {release} {digest} workflow {workflow}")
    out.append(f"host {first.host.harness} adapter {first.host.adapter_version}; steps: {' -> '.join(history.steps)}")
    migrations = {m.line: m for m in history.migrations}
    previous: Checkpoint | None = None
    for audited in history.checkpoints:
        cp = audited.checkpoint
        if audited.line in migrations:
            m = migrations[audited.line]
            out.append(
                f"  migration at line {m.line}: {m.from_release} ({m.from_manifest_digest}) -> "
                f"{m.to_release} ({m.to_manifest_digest}), workflow {m.from_workflow} -> {m.to_workflow}, "
                f"parent {m.parent_digest} (line {m.parent_line})" + _host_change(previous, cp)
            )
        out.append(f"  line {audited.line:>3}  seq {cp.sequence:>3}  {cp.step_id:<20} {audited.digest}")
        old_artifacts = previous.artifacts if previous else {}
        old_validators = previous.validators if previous else {}
        for name, receipt in sorted(cp.artifacts.items()):
            if old_artifacts.get(name) != receipt:
                out.append(f"      artifact {name} sha256:{receipt.sha256} ({receipt.size} bytes)")
        for name, vreceipt in sorted(cp.validators.items()):
            if old_validators.get(name) != vreceipt:
                out.append(f"      validator {name} {vreceipt.outcome} on inputs {vreceipt.input_digest}")
        previous = cp
    last = history.last
    out.append(
        f"final: sequence {last.sequence} at step {last.step_id}, {len(last.artifacts)} artifact receipt(s), "
        f"{len(last.validators)} validator pass(es)"
        + (
            f"; {len(history.repeated_lines)} repeated line(s) skipped: {', '.join(map(str, history.repeated_lines))}"
            if history.repeated_lines
            else ""
        )
    )
    out.append(history.ending())
    return out
