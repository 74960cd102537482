"""Kept positions (the result an ungated step was shown with), and when a resume may ask the verifier.

``continue_workflow`` on an ungated step (an interview, a question: the
owner's) advances, so a resume must never ask the verifier where such a run
is. The run's state file (:mod:`.runlog`) keeps that result inline up to
``MAX_POSITION_BYTES``; a larger one (an instruction past a few hundred KiB,
long findings) goes to a side file next to the log,
``<run>.position-<sha256>.json``, named by the SHA-256 of its bytes and
holding the key of the checkpoint it belongs to: the state entry names the
file's digest and size, and a file whose bytes or checkpoint do not match is
refused as damaged, never used. It is written atomically before the state that
names it, and files no saved state names are removed after each save. Past
:data:`MAX_KEPT_POSITION_BYTES` nothing is kept, and a resume there is refused
(``run_position_unknown``), as for a state file from before positions were kept.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Mapping
from typing import Any

from rimthan_workflow_registry.canonical import sha256_hex
from rimthan_workflow_registry.errors import FailureCode, RegistryError
from rimthan_workflow_registry.limits import MAX_ARGUMENT_DEPTH, depth_exceeds
from rimthan_workflow_registry.strict_json import parse_strict_json

from .files import FileTooLarge, ProjectPath, folder, read_regular, replace_file
from .protocol import HarnessError

# A real ungated step's result is a few KiB (its instruction's text is the bulk). The largest instruction a
# release holds is a catalogue file (1 MiB), at most six JSON bytes a byte as \u escapes, plus the rest.
MAX_KEPT_POSITION_BYTES = 8 * 1024 * 1024
CHECKPOINT_KEY = "checkpoint_sha256"  # which checkpoint a saved state (and a side file) belongs to
POSITION_FILE_KEY = "position_file"  # a saved state's reference to its side file: {"sha256", "bytes"}
_SIDE_FILE = re.compile(r"(?P<run>[a-z0-9][a-z0-9-]{0,63})\.position-(?P<hex>[0-9a-f]{64})\.json")


def encode(position: Mapping[str, Any]) -> bytes | None:
    """``position`` as the compact ASCII JSON it is kept as; None if it is nested deeper than is read back."""
    if depth_exceeds(position, MAX_ARGUMENT_DEPTH):
        return None
    return json.dumps(position, sort_keys=True, separators=(",", ":")).encode("ascii")


def side_path(runs: ProjectPath, run_id: str, digest: str) -> ProjectPath:
    return runs.child(f"{run_id}.position-{digest}.json")


def write_side(runs: ProjectPath, run_id: str, checkpoint_key: str, data: bytes) -> dict[str, Any] | None:
    """Write the side file for a position (``data``: :func:`encode`'s) of ``checkpoint_key``; its reference.

    None past :data:`MAX_KEPT_POSITION_BYTES`: nothing is written.
    """
    body = (
        b'{"'
        + CHECKPOINT_KEY.encode("ascii")
        + b'":"'
        + checkpoint_key.encode("ascii")
        + b'","position":'
        + data
        + b"}"
    )
    if len(body) > MAX_KEPT_POSITION_BYTES:
        return None
    digest = sha256_hex(body)
    path = side_path(runs, run_id, digest)
    replace_file(path, f"{path.name}.tmp", body)
    return {"sha256": digest, "bytes": len(body)}


def read_side(runs: ProjectPath, run_id: str, checkpoint_key: str, ref: Any) -> dict[str, Any] | str:
    """The position a state's reference names, or why it cannot be used (missing, altered, another checkpoint's)."""
    digest = ref.get("sha256") if isinstance(ref, dict) else None
    if not isinstance(digest, str) or not re.fullmatch(r"[0-9a-f]{64}", digest):
        return f"its {POSITION_FILE_KEY} names no file"
    path = side_path(runs, run_id, digest)
    try:
        body = read_regular(path, MAX_KEPT_POSITION_BYTES, own=True)
    except FileNotFoundError:
        return f"{path.name}, which holds the result of its step, is missing"
    except FileTooLarge as exc:
        return f"{path.name} is {exc.size} bytes, past {exc.limit}"
    if sha256_hex(body) != digest:
        return f"{path.name} is not the file its state names (its SHA-256 differs): it was altered"
    try:
        value = parse_strict_json(body, where="", code=FailureCode.JSON_PARSE_FAILED, max_depth=MAX_ARGUMENT_DEPTH + 1)
    except RegistryError as exc:
        return f"{path.name}: {exc.code.value}: {exc.message}"
    position = value.get("position") if isinstance(value, dict) else None
    if value.get(CHECKPOINT_KEY) != checkpoint_key or not isinstance(position, dict):
        return f"{path.name} holds the result of another checkpoint"
    return position


def prune(runs: ProjectPath, run_id: str, keep: set[str]) -> None:
    """Remove ``run_id``'s side files no saved state names (``keep``: their digests); best effort, in the runs
    folder as :func:`~rimthan_host.files.open_folder` opened it."""
    with contextlib.suppress(OSError), folder(runs.root, runs.relative) as at:
        for name in os.listdir(at):
            found = _SIDE_FILE.fullmatch(name)
            if found is not None and found["run"] == run_id and found["hex"] not in keep:
                with contextlib.suppress(OSError):  # (a file left costs disk only: no state names it, none reads it)
                    os.unlink(name, dir_fd=at)


class PositionUnknown(HarnessError):
    """A resume at a step that may be ungated, with no result kept for it: asking the verifier would move it on."""

    def __init__(self, run: str, step: Any) -> None:
        super().__init__(f"run {run}: no result is kept for its step {step}")
        self.run, self.step = run, str(step)


def asks_the_verifier(saved: Mapping[str, Any]) -> bool:
    """Whether a resume may ask the verifier where the run is: a step that returns itself when asked (gated).

    A state saved before ``gated`` was: a step with outputs is gated (the
    verifier's rule: outputs or validators), one without may be ungated. A
    completed run moves no more.
    """
    if saved.get("completed"):
        return True
    return bool(saved["gated"]) if "gated" in saved else bool(saved.get("existed_before"))
