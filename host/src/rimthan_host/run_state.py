"""What a run's resume state (``.rimthan/runs/<run>.json``) holds: its bounds, its shape, what a save keeps.

Each saved state is keyed by the SHA-256 of the checkpoint token it belongs
to (:func:`token_key`); :mod:`.runlog` writes and reads the file. The bounds
here are derived from what the verifier takes, so the largest state a run can
legitimately hold is kept, and a file past :data:`MAX_STATE_BYTES` is refused
by its size (as damaged) before a byte of it is read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rimthan_workflow_registry.canonical import sha256_hex
from rimthan_workflow_registry.limits import (
    JSON_BYTES_PER_STRING_BYTE,
    MAX_ARGUMENT_DEPTH,
    MAX_CATALOGUE_FILE_BYTES,
    MAX_CONFIRMED_STATE_BYTES,
    REQUEST_REST_BYTES,
)
from rimthan_workflow_registry.run import peek_claims

from . import positions
from .file_digests import evidence_from_json
from .positions import CHECKPOINT_KEY as CHECKPOINT_KEY  # ("as": re-exported, imported from here as before)

# A state file wraps a confirmed state the verifier took in an argument (nested at most MAX_ARGUMENT_DEPTH)
# two levels deeper: {"states": [{"confirmed_state": ...}]} where the argument had {"confirmed_state": ...}.
STATE_DEPTH = MAX_ARGUMENT_DEPTH + 2
# A ``<run>.json`` holds at most two saved states (a few KiB each for real runs), written as compact JSON
# (ASCII). One saved state is the confirmed values - at most MAX_CONFIRMED_STATE_BYTES as canonical JSON, the
# verifier refuses more, and no byte of that costs more than JSON_BYTES_PER_STRING_BYTE here (a character as
# \uXXXX escapes; compact, so structure costs what it does canonically) - plus what else a tool call carries
# beside them (their confirmations, the workflow, release and step, the step's output paths): within
# REQUEST_REST_BYTES. So the largest state a run can legitimately hold is kept, and a file past this bound is
# refused by its size (as damaged), before a byte of it is read, whenever the bridge lists or resumes runs.
_STATES_KEPT = 2  # the new checkpoint's and the log's last line's
# It also keeps the result of an ungated step as the verifier returned it (less its checkpoint), for a resume to
# show that step again without a move (see kept_position): a real one is a few KiB, one past this is not kept.
MAX_POSITION_BYTES = 1024 * 1024
# And the evidence: the artifact id, path and SHA-256 of each file the run attested ({"id": {"path": ..,
# "sha256": <64 hex>}}, about 100 bytes plus the id and path each; a real run's: a few hundred bytes), so a
# resumed bridge still refuses evidence edited since (file_digests). A workflow declares its outputs in its one
# catalogue file (at most MAX_CATALOGUE_FILE_BYTES), each spelling its id and path and more (media type, bound),
# so a run on one workflow keeps less than that file, escaped: JSON_BYTES_PER_STRING_BYTE per byte. A run that
# migrated keeps its earlier versions' ids too; past the bound its move is StateTooLarge (not recorded).
_EVIDENCE_BYTES = JSON_BYTES_PER_STRING_BYTE * MAX_CATALOGUE_FILE_BYTES
# And the last migration offer the run saw (a verifier's preview, a few KiB; see kept_offer), so a resumed run
# knows it without asking the verifier again: one past this is not kept, and the resumed run asks.
MAX_OFFER_BYTES = 64 * 1024
OFFER_KEY = "migration_offer"
# And the validation round prepared at the checkpoint, once a verdict is recorded (its bundle, about 2 KiB, and the
# verdicts, whose reports the verifier takes up to 256 KiB: see kept_round): one past this is not kept.
MAX_ROUND_BYTES = 1024 * 1024
_SAVED_STATE_BYTES = (
    JSON_BYTES_PER_STRING_BYTE * MAX_CONFIRMED_STATE_BYTES
    + REQUEST_REST_BYTES
    + MAX_POSITION_BYTES
    + _EVIDENCE_BYTES
    + MAX_OFFER_BYTES
    + MAX_ROUND_BYTES
)
_ENVELOPE_BYTES = 1024  # {"run": <a run id, at most 64 characters>, "states": [...]}
MAX_STATE_BYTES = _STATES_KEPT * _SAVED_STATE_BYTES + _ENVELOPE_BYTES


def token_key(token: str) -> str:
    """A checkpoint token's own bytes, hashed: what a saved state is keyed by (the host holds no key)."""
    return sha256_hex(token.encode("ascii"))


def state_problem(entry: Mapping[str, Any]) -> str | None:
    """Why a saved state is not one :class:`~rimthan_host.session.HostSession` saved, or None."""
    confirmed = entry.get("confirmed_state")
    if not isinstance(confirmed, dict) or not isinstance(confirmed.get("state"), dict):
        return "its confirmed_state.state is not an object"
    confirmations = confirmed.get("confirmations")
    if not isinstance(confirmations, dict) or not all(isinstance(c, dict) for c in confirmations.values()):
        return "its confirmed_state.confirmations is not an object of objects"
    existed = entry.get("existed_before")
    if not isinstance(existed, dict) or not all(isinstance(e, bool) for e in existed.values()):
        return "its existed_before is not an object of true and false"
    if not isinstance(entry.get("step"), str | None) or not isinstance(entry.get("completed"), bool):
        return "its step is not a string or its completed not true or false"
    position = entry.get("position")
    step = position.get("step") if isinstance(position, dict) else None
    if position is not None and not (isinstance(step, dict) and step.get("id") == entry.get("step")):
        return "its position is not the result of its step"
    if not isinstance(entry.get("gated", False), bool):
        return "its gated is not true or false"
    if not isinstance(entry.get(OFFER_KEY), dict | None):  # (absent in an older bridge's state: none kept)
        return f"its {OFFER_KEY} is not an object or null"
    if evidence_from_json(entry.get("validated", {})) is None:  # (absent in an older bridge's state: none kept)
        return "its validated is not an object of {path, sha256} objects"
    return None


def claims_problem(entry: Mapping[str, Any], token: str) -> str | None:
    """Why a saved state names another release, workflow or step than its checkpoint ``token`` does, or None.

    A resume shows an ungated step from its saved result without the verifier,
    so a state edited to claim another release (or step) would be shown as the
    run's; the token's own claims (read, not verified: the verifier does that
    on the next move) are what the run is at."""
    claims = peek_claims(token) or {}
    position = _object(entry.get("position"))
    for saved in (entry, position):
        for part, keys in (("release", ("id", "manifest_digest")), ("workflow", ("id", "version"))):
            named, pinned = saved.get(part), claims.get(part)
            if (
                isinstance(named, dict)
                and isinstance(pinned, dict)
                and any(named.get(k) != pinned.get(k) for k in keys)
            ):
                return f"its {part} is not the one its checkpoint names ({_named(pinned, keys)})"
    step = _object(position.get("step"))
    if step.get("id") is not None and claims.get("step") not in (None, step.get("id")):
        return f"its step is not the one its checkpoint names ({claims['step']})"
    return None


def _object(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _named(pinned: Mapping[str, Any], keys: tuple[str, ...]) -> str:
    return " ".join(str(pinned.get(k)) for k in keys if k != "manifest_digest")  # (a digest is opaque to a model)


def kept_position(result: Mapping[str, Any]) -> dict[str, Any] | None:
    """What a resume shows again for an ungated step: the result as returned, less its checkpoint (the log's line).

    ``continue_workflow`` on an ungated step (no files, no validators: an
    interview, a question) advances, so a resume must not call it to learn
    where the run is. A gated step is asked of the verifier again (it returns
    the same step), so none is kept for one. Kept inline in the state file up
    to :data:`MAX_POSITION_BYTES`, else in a side file (:mod:`.positions`).
    """
    step = result.get("step")
    if not isinstance(step, Mapping) or step.get("gated") or result.get("status") == "completed":
        return None
    return {k: v for k, v in result.items() if k != "checkpoint"}


def kept_offer(offer: Mapping[str, Any] | None) -> dict[str, Any]:
    """The saved state's entry for the last migration offer the run saw: ``{OFFER_KEY: offer}`` (null: none), or
    nothing for one past :data:`MAX_OFFER_BYTES` or nested deeper than is read back (a resume then asks)."""
    data = positions.encode(offer) if offer is not None else b"null"
    return {OFFER_KEY: offer} if data is not None and len(data) <= MAX_OFFER_BYTES else {}
