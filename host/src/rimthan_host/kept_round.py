"""A prepared round's verdicts, kept with the run's state and taken back on resume only for the very same round.

A verdict holds only for what its validator judged: the instruction (bound by
the bundle's digest), the step's files (by their SHA-256) and the subagent
file the validator ran from. The round is saved with the state of the
checkpoint it was prepared at (so a resume at another checkpoint never sees
it), and a resumed bridge takes it back only when every one of those is as
it was: the step and its validators' instructions, each file re-read from
disk through the project walk with the digest it was attested with, and
each subagent file as the bridge noted it when it named the validators
(inode, size, modification and change times). Anything else - or anything
that cannot be read - drops the round, as a resume did before. The verifier
still judges the submit: the bundle it signed binds the checkpoint, the
artifacts and the validators, and the reports are checked against it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .delivered import subagent_marks
from .outputs import read_step_files
from .positions import encode
from .project_files import ProjectFiles, WrittenFile
from .protocol import HarnessError
from .reports import findings_problem, validator_key, validator_payload
from .run_state import MAX_ROUND_BYTES
from .session_record import Prepared

Verdicts = dict[str, tuple[str, tuple[Mapping[str, Any], ...]]]  # validator key: (outcome, findings)
ROUND_KEY = "validation_round"  # in a saved state: the round prepared at its checkpoint, with its verdicts


def round_json(prepared: Prepared | None, step_id: str) -> dict[str, Any]:
    """The saved state's entry for a prepared round, verdicts or none yet (``{ROUND_KEY: ...}``); nothing for no
    round, or one past :data:`~rimthan_host.run_state.MAX_ROUND_BYTES` (a resume then drops it). A round with no
    verdict yet is kept too: a bridge started again between step_done and the first verdict (a client starting a
    server per call) would otherwise drop every round it is handed, and its run could never pass a gate."""
    if prepared is None:
        return {}
    entry = {
        "step": step_id,
        "bundle": prepared.bundle,
        "validators": prepared.validators,
        "artifacts": _digests(prepared.artifacts),
        "verdicts": {k: {"outcome": o, "findings": [dict(f) for f in fs]} for k, (o, fs) in prepared.verdicts.items()},
        "marks": _marks_json(prepared.marks),
    }
    data = encode(entry)
    return {ROUND_KEY: entry} if data is not None and len(data) <= MAX_ROUND_BYTES else {}


def restored_round(
    saved: Mapping[str, Any],
    files: ProjectFiles,
    release: str,
    step: Mapping[str, Any],
    attest: Callable[[Mapping[str, bytes]], list[WrittenFile]],
) -> Prepared | None:
    """The round saved in ``saved`` (the state of the checkpoint the run resumed at), if nothing it judged changed
    and a validator still waits for a verdict; else None. ``attest``: the session's attestation of bytes read."""
    entry = saved.get(ROUND_KEY)
    if not isinstance(entry, dict) or entry.get("step") != step.get("id"):
        return None
    try:
        judged = _judged(entry, step)
        found = read_step_files(files, step.get("outputs") or [])
        if judged is None or found.problems:
            return None
        validators, verdicts = judged
        artifacts = attest(found.read)
        marks = subagent_marks(files, release, [s["subagent"] for s in validators])
        if _digests(artifacts) != entry["artifacts"] or _marks_json(marks) != entry["marks"]:
            return None
    except (HarnessError, OSError, KeyError, TypeError, ValueError, AttributeError):
        return None  # (unreadable as the bridge saved it: dropped)
    prepared = Prepared(artifacts, entry["bundle"], validators, verdicts, marks)
    return prepared if prepared.pending else None


def _judged(entry: Mapping[str, Any], step: Mapping[str, Any]) -> tuple[list[dict[str, Any]], Verdicts] | None:
    """The saved validators, each instruction checked against its digest (HarnessError if one differs), and the
    verdicts, each one a validator of theirs gave as the verifier takes it; None if a verdict is not."""
    validators = [dict(s) for s in entry["validators"]]
    for summary in validators:
        validator_payload(step, summary)
    verdicts: Verdicts = {
        str(k): (str(v["outcome"]), tuple(dict(f) for f in v["findings"])) for k, v in entry["verdicts"].items()
    }
    taken = [o in ("pass", "fail") and findings_problem(o, f, []) is None for o, f in verdicts.values()]
    keys = {validator_key(s) for s in validators}
    return (validators, verdicts) if set(verdicts) <= keys and all(taken) else None


def _digests(artifacts: Sequence[WrittenFile]) -> dict[str, dict[str, str]]:
    return {a.artifact_id: {"path": a.path, "sha256": a.sha256} for a in artifacts}


def _marks_json(marks: Mapping[str, tuple[str, Sequence[int] | None]]) -> dict[str, Any]:
    return {name: [path, None if mark is None else list(mark)] for name, (path, mark) in marks.items()}
