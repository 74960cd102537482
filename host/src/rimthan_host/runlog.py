"""The run log: ``.rimthan/runs/<run>.log`` in the project, one checkpoint token per line.

Append-only and fsynced per line, in issue order: exactly what
``rimthan-mcp audit`` verifies offline. Each line is written whole (or taken back); a last
line without its newline is one a kill cut short, no checkpoint, and the next
append cuts it off. Next to it, ``<run>.json`` holds what
the tokens cannot carry and a resumed host needs - the confirmed state with
its confirmations, the workflow, which outputs existed before the
current step, and the id, path and digest of each file the run attested -
replaced atomically after every call. Like the step's files, both are written
and read only through real directories and files of the project: a symbolic
link anywhere on their path is refused, never followed out of the project.

The two files cannot be written as one, so each saved state is keyed by the
SHA-256 of the checkpoint token it belongs to, and the state of a new
checkpoint is saved *before* the token is appended, next to the state of the
last logged checkpoint. Whichever write fails, the state of the log's last
line is there: a host that crashed resumes from the last logged checkpoint
and the state saved for exactly that token (the verifier checks it anyway).

Both files are bounded as they are read, whoever wrote them: the log is
never held whole (a run may have any number of moves), and a line longer than
the longest token the verifier takes (``MAX_TOKEN_CHARS``) is refused as
damaged; the state file is refused past ``MAX_STATE_BYTES`` (its bounds and shape:
:mod:`.run_state`), and a state that would be larger is never written. A move (append, resume, listing the runs)
reads only the log's tail, back from its end to its last token, at most one
token's length: its cost does not grow with the run. What it reads is checked
as strictly as the whole log is when streamed (:meth:`RunLog.tokens`); the
lines before it are not the bridge's to check - ``rimthan-mcp audit``
verifies the whole log, and refuses a log damaged anywhere.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from rimthan_workflow_registry.errors import FailureCode, RegistryError
from rimthan_workflow_registry.run import MAX_TOKEN_CHARS
from rimthan_workflow_registry.strict_json import parse_strict_json
from rimthan_workflow_registry.whole_writes import write_all

from . import positions
from .files import (
    FileTooLarge,
    ProjectPath,
    file_status,
    first_symlink,
    folder_entries,
    open_folder,
    open_own,
    open_regular,
    read_regular,
    replace_file,
    symlink_refused,
)
from .protocol import HarnessError
from .run_state import CHECKPOINT_KEY as CHECKPOINT_KEY  # ("as": re-exported, imported from here as before)
from .run_state import MAX_OFFER_BYTES as MAX_OFFER_BYTES
from .run_state import MAX_POSITION_BYTES as MAX_POSITION_BYTES
from .run_state import MAX_STATE_BYTES as MAX_STATE_BYTES
from .run_state import OFFER_KEY as OFFER_KEY
from .run_state import STATE_DEPTH, claims_problem, state_problem, token_key
from .run_state import kept_offer as kept_offer
from .state_size import StateTooLarge as StateTooLarge  # (re-exported: raised by save_state)
from .state_size import largest_part

RUNS_DIR = Path(".rimthan") / "runs"
_RUN_ID = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")  # fullmatch: "$" would also take a trailing newline
# The verifier refuses a checkpoint longer than MAX_TOKEN_CHARS (1 MiB; a real run's are 1-2 KiB): a log line
# longer is no token, and reading stops there. The log is read a line at a time, so no more is ever held.
_MAX_LINE_BYTES = MAX_TOKEN_CHARS + 1  # the token and its newline
_TAIL_BLOCK = 8 * 1024  # read back from the log's end this much first (a real run's token: 1-2 KiB)


def is_run_id(text: str) -> bool:
    """Whether ``text`` is a run id (lower-case letters, digits and dashes, at most 64)."""
    return _RUN_ID.fullmatch(text) is not None


def new_run_id() -> str:
    return "run-" + secrets.token_hex(4)


@dataclass(frozen=True)
class RunLog:
    """One run's log and resume state in ``project``."""

    project: Path
    run_id: str

    def __post_init__(self) -> None:
        if not _RUN_ID.fullmatch(self.run_id):
            raise HarnessError(f"run id {self.run_id!r} is not lower-case letters, digits and dashes")

    @property
    def log_path(self) -> Path:
        return self.project / RUNS_DIR / f"{self.run_id}.log"

    @property
    def state_path(self) -> Path:
        return self.project / RUNS_DIR / f"{self.run_id}.json"

    def at(self, path: Path) -> ProjectPath:
        """One of this run's files (``path``: in the runs folder), to open through the walk (files.open_folder)."""
        return ProjectPath.of(self.project, path)

    def logged(self) -> bool:
        """Whether the run has a log (anything at its path), looked up through the walk (files.file_status): a
        folder on the way that is a symbolic link is never followed, and counts as no log (nothing to resume)."""
        try:
            return file_status(self.at(self.log_path)) is not None
        except OSError:
            return False

    def tokens(self) -> list[str]:
        """Every logged checkpoint, in order (for an audit or a test: the bridge reads only the last)."""
        return list(self._stream())

    def last_token(self) -> str | None:
        """The log's last checkpoint, None for no log; only the log's tail is read (see :func:`_tail_token`)."""
        runs_dir(self.project)
        try:
            fd, status = open_regular(self.at(self.log_path), os.O_RDONLY, own=True)  # (a FIFO: an OSError)
        except FileNotFoundError:
            return None
        with os.fdopen(fd, "rb") as handle:
            return self._tail_token(handle, status.st_size)

    def _tail_token(self, handle: BinaryIO, size: int) -> str | None:
        """The last token, read back from the end, doubling the block: at most ``_MAX_LINE_BYTES + 1`` bytes back.

        A move costs the same however long the run: the lines before the last
        token are not the bridge's to read (``rimthan-mcp audit`` verifies the
        whole log). Every byte read is checked as the stream checks it: ASCII,
        and no line longer than a token.
        """
        bound = max(0, size - _MAX_LINE_BYTES - 1)
        start, tail, block = size, b"", _TAIL_BLOCK
        while start > bound:
            end, start = start, max(bound, start - block)
            handle.seek(start)
            tail = handle.read(end - start) + tail
            found = self._last_in(tail, start)
            if found is not None:
                return found or None
            block *= 2  # a longer line: twice as far back (what is held is checked again: twice the bytes in all)
        if start == 0:
            return None
        why = f"its last {_MAX_LINE_BYTES + 1} bytes hold no checkpoint: no line the bridge wrote is that long"
        raise self._damaged(self.log_path, why)

    def _last_in(self, tail: bytes, start: int) -> str | None:
        """The last token in ``tail`` (the log from byte ``start``), "" for none in a whole log, None: read on.

        What follows the last newline is checked like any line but is no
        checkpoint: every append writes its token and newline at once, so an
        unended line is one a kill cut short (:meth:`append` cuts it off).
        """
        lines = tail.split(b"\n")
        offsets = [start]
        for line in lines[:-1]:
            offsets.append(offsets[-1] + len(line) + 1)
        tokens = [self._line_tokens(line, offset, whole=i > 0 or start == 0) for i, (line, offset) in
                  enumerate(zip(lines, offsets, strict=True))][:-1]  # fmt: skip
        whole = tokens if start == 0 else tokens[1:]  # before the first newline read, a line may go on
        last = [t for line_tokens in whole for t in line_tokens][-1:]
        return last[0] if last else ("" if start == 0 else None)

    def _stream(self) -> Iterator[str]:
        """The log's tokens one by one; a line longer than any token, or a byte not ASCII, is damage."""
        runs_dir(self.project)
        try:
            fd, _ = open_regular(self.at(self.log_path), os.O_RDONLY, own=True)  # (a FIFO: an OSError, never blocks)
        except FileNotFoundError:
            return
        with os.fdopen(fd, "rb") as handle:
            offset = 0
            for line in iter(lambda: handle.readline(_MAX_LINE_BYTES), b""):
                tokens = self._line_tokens(line, offset)
                if line.endswith(b"\n"):  # (else the log's end: a line an append did not finish, see _last_in)
                    yield from tokens
                offset += len(line)

    def _line_tokens(self, line: bytes, offset: int, *, whole: bool = True) -> list[str]:
        """The tokens of one line from byte ``offset`` (not ``whole``: its end, read back from the log's end)."""
        if len(line.rstrip(b"\r\n")) > MAX_TOKEN_CHARS:  # (readline stopped at the bound: the line goes on)
            where = f"at byte {offset}" if whole else f"ending at byte {offset + len(line)}"
            why = f"the line {where} is longer than {MAX_TOKEN_CHARS} bytes, the longest checkpoint the verifier takes"
            raise self._damaged(self.log_path, why)
        try:
            text = line.decode("ascii")  # checkpoint tokens are ASCII: anything else is no line the bridge wrote
        except UnicodeDecodeError as exc:
            raise self._damaged(self.log_path, f"byte {offset + exc.start} is not ASCII") from None
        return [part.strip() for part in text.splitlines() if part.strip()]

    def append(self, token: str) -> None:
        """Log a checkpoint the verifier issued (a repeat of the last line is skipped)."""
        if self.last_token() == token:
            return
        fd = open_own(self.at(self.log_path), os.O_RDWR | os.O_CREAT | os.O_APPEND, make=True)
        try:
            _cut_unended(fd)
            whole = os.fstat(fd).st_size
            try:
                write_all(fd, (token + "\n").encode("ascii"))  # (a disk that fills part way: a short write)
                os.fsync(fd)
            except OSError as exc:  # the line cut short is taken back: the log ends at its last whole line
                os.ftruncate(fd, whole)
                raise OSError(exc.errno, exc.strerror, str(self.log_path)) from None
        finally:
            os.close(fd)

    def save_state(self, checkpoint: str, state: Mapping[str, Any], *, logged: str | None) -> None:
        """Save ``state`` for ``checkpoint``, keeping the state of ``logged`` (the log's last line), atomically.

        Called before ``checkpoint`` is appended: if the append then fails,
        the state of the line the log still ends with is kept. A state file
        that would be past :data:`MAX_STATE_BYTES` (which reading refuses) is
        :class:`StateTooLarge`, before it is written. An ungated step's result
        past :data:`MAX_POSITION_BYTES` is kept in a side file (:mod:`.positions`).
        """
        key = token_key(checkpoint)
        kept = token_key(logged) if logged is not None and logged != checkpoint else None
        entries = [e for e in self._entries() if kept is not None and e.get(CHECKPOINT_KEY) == kept]
        states = [self._kept({**state, CHECKPOINT_KEY: key}, key), *entries]
        data = json.dumps({"run": self.run_id, "states": states}, sort_keys=True, separators=(",", ":")).encode(
            "ascii"
        )  # compact: bounded
        if len(data) > MAX_STATE_BYTES:  # (a side file just written is named by no state: the next save prunes it)
            part = largest_part(states)
            raise StateTooLarge(self.run_id, len(data), MAX_STATE_BYTES, part, started=logged is not None)
        replace_file(self.at(self.state_path), f"{self.state_path.name}.tmp", data, make=True)
        named = {str(e[positions.POSITION_FILE_KEY]["sha256"]) for e in states if
                 isinstance(e.get(positions.POSITION_FILE_KEY), dict)}  # fmt: skip
        positions.prune(runs_folder(self.project), self.run_id, named)

    def _kept(self, entry: dict[str, Any], key: str) -> dict[str, Any]:
        """``entry`` with its position kept inline up to :data:`MAX_POSITION_BYTES`, else in a side file."""
        position = entry.get("position")
        data = positions.encode(position) if isinstance(position, dict) else None
        if data is None or len(data) <= MAX_POSITION_BYTES:
            return entry if data is not None or position is None else {**entry, "position": None}
        ref = positions.write_side(runs_folder(self.project), self.run_id, key, data)
        return {**entry, "position": None, **({positions.POSITION_FILE_KEY: ref} if ref is not None else {})}

    def side_position(self, token: str, saved: Mapping[str, Any]) -> dict[str, Any] | None:
        """The position kept in a side file for ``token``'s saved state, None if it names none."""
        ref = saved.get(positions.POSITION_FILE_KEY)
        if ref is None:
            return None
        found = positions.read_side(runs_folder(self.project), self.run_id, token_key(token), ref)
        if isinstance(found, str):
            raise self._damaged(self.state_path, found)
        return found

    def load_state(self) -> dict[str, Any]:
        """The state saved for the log's last checkpoint."""
        return self.last_checkpoint()[1]

    def last_checkpoint(self) -> tuple[str, dict[str, Any]]:
        """The log's last checkpoint and the state saved for it (what a run goes on from)."""
        token = self.last_token()
        if token is None:
            if self.logged():  # a log cut to nothing (or blank lines): no line the bridge wrote
                raise self._damaged(self.log_path, "it holds no checkpoint")
            raise HarnessError(f"run {self.run_id} has no logged checkpoint")
        return token, self.state_for(token)

    def state_for(self, token: str) -> dict[str, Any]:
        """The state saved for ``token`` (the log's last checkpoint, as the caller read it)."""
        key = token_key(token)
        for entry in self._entries():
            if entry.get(CHECKPOINT_KEY) == key:
                problem = state_problem(entry) or claims_problem(entry, token)
                if problem is not None:
                    raise self._damaged(self.state_path, problem)
                return entry
        log, state = (path.relative_to(self.project) for path in (self.log_path, self.state_path))
        why = f"{state.name} holds no state for the last checkpoint of {log.name}: one was cut short, replaced or lost"
        raise self._damaged(f"{log} or {state}", why)

    def _entries(self) -> list[dict[str, Any]]:
        try:
            data = _read(self.project, self.state_path, MAX_STATE_BYTES)
        except FileTooLarge as exc:
            why = f"it is {exc.size} bytes; a run state file is at most {exc.limit} bytes"
            raise self._damaged(self.state_path, why) from None
        if data is None:
            return []
        try:  # strictly: of a key written twice, or NaN, nothing is guessed
            value = parse_strict_json(data, where="", code=FailureCode.JSON_PARSE_FAILED, max_depth=STATE_DEPTH)
        except RegistryError as exc:
            raise self._damaged(self.state_path, f"{exc.code.value}: {exc.message}") from None
        entries = value.get("states") if isinstance(value, dict) else None
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise self._damaged(self.state_path, "it is not a run state object")
        return entries

    def _damaged(self, path: Path | str, why: str) -> HarnessError:
        """A run file the bridge cannot trust (``path``: one, or the words naming two): what is wrong, what to do."""
        where = path.relative_to(self.project) if isinstance(path, Path) else path
        return HarnessError(
            f"{where} is damaged ({why}), so run {self.run_id} cannot go on from it. "
            f"Restore {'the file' if isinstance(path, Path) else 'them'}, or call start_run with new_run true to start "
            "a new run."
        )


def _cut_unended(fd: int) -> None:
    """Cut off a last line with no newline (an append a kill cut short), so the next token starts its own line.

    One byte is read when the log ends as every append leaves it; else at
    most a token's length back (a longer unended line is refused as damage
    before this, by :meth:`RunLog.last_token`). The bridge holding the
    project's lock (:mod:`.workspace_lock`) is the log's only writer.
    """
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return
    start = max(0, size - _MAX_LINE_BYTES - 1)
    tail = os.pread(fd, size - start, start)
    os.ftruncate(fd, start + tail.rfind(b"\n") + 1)  # (no newline read back: start is 0, the whole log goes)


def runs_dir(project: Path) -> Path:
    """``.rimthan/runs`` in ``project``; an OSError if a part of it is a symbolic link (never followed)."""
    link = first_symlink(Path(project), RUNS_DIR)
    if link is not None:
        raise symlink_refused(link)
    return Path(project) / RUNS_DIR


def runs_folder(project: Path) -> ProjectPath:
    """``.rimthan/runs`` in ``project``, to open through the walk (files.open_folder)."""
    return ProjectPath(Path(project), RUNS_DIR)


def make_runs_dir(project: Path) -> Path:
    """``.rimthan/runs`` in ``project``, made if missing, one folder at a time, never through a link
    (files.open_folder); a file where a folder must be is ``NotADirectoryError`` naming it."""
    os.close(open_folder(Path(project), RUNS_DIR, make=True))
    return Path(project) / RUNS_DIR


def _read(project: Path, path: Path, limit: int) -> bytes | None:
    """The bytes of one of the run files, None if there is none; an OSError for a symlink or a non-file.

    Past ``limit`` bytes, :class:`~rimthan_host.files.FileTooLarge`, before a byte is read.
    """
    try:
        return read_regular(ProjectPath.of(project, path), limit, own=True)  # (a FIFO: an OSError, never blocks)
    except FileNotFoundError:
        return None


def list_runs(project: Path) -> list[str]:
    """Run ids with a log in ``project``, oldest first (a name no run id has is no run of the bridge's)."""
    listed = folder_entries(runs_folder(project))  # (through the walk: a folder swapped for a link is refused)
    logs = {name[: -len(".log")]: found for name, found in listed.items() if name.endswith(".log")}
    return sorted((run for run in logs if _RUN_ID.fullmatch(run)), key=lambda run: logs[run].st_mtime)


@dataclass(frozen=True)
class RunSummary:
    """What a project's run log and state say about one run: its id, whether it completed, its step."""

    run_id: str
    completed: bool
    step: str | None
    damaged: bool = False  # its log or state cannot be read back: resume_run refuses it, so none offers it

    def words(self) -> str:
        if self.damaged:
            return f"{self.run_id} (damaged: its run files cannot be resumed)"
        where = f"at step {self.step}" if self.step else "at a step its run files do not say"  # (unreadable)
        return f"{self.run_id} ({'complete' if self.completed else f'unfinished, {where}'})"


def run_summaries(project: Path) -> list[RunSummary]:
    """Every run in ``project``, oldest first: one whose run files are damaged is unfinished and damaged; one
    the system cannot read now (a directory where its log must be) unfinished, to be resumed once that is fixed."""
    out = []
    for run_id in list_runs(project):
        try:
            state = RunLog(project, run_id).load_state()
        except OSError:
            state = {}
        except (HarnessError, ValueError):
            out.append(RunSummary(run_id, completed=False, step=None, damaged=True))
            continue
        out.append(RunSummary(run_id, bool(state.get("completed")), state.get("step")))
    return out
