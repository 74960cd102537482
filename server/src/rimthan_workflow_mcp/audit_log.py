"""The run log ``rimthan-mcp audit`` reads: streamed line by line, each line bounded.

A log of any length is audited holding one line at a time (and the verified
history). A line is numbered as :func:`str.splitlines` numbers the whole text;
it ends with ``\\n`` (or ``\\r\\n``), and one longer than
:data:`MAX_LOG_LINE_BYTES` is never kept, and refused at its line like a line
that is not UTF-8: ``checkpoint_invalid``, as a token that does not verify is.
The refusal is handed to the audit with the line (:class:`LoggedToken`), so
every line before it is audited first. Nothing past the bound is read: the
rest of such a line may never end (a device, a pipe), so the log ends there.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

from rimthan_workflow_registry.errors import FailureCode
from rimthan_workflow_registry.run import MAX_TOKEN_CHARS, LoggedToken, RunAuditError

MAX_LOG_LINE_BYTES = MAX_TOKEN_CHARS + 1024  # the longest token the verifier takes, its line ending, some blanks
LOG_IO = "give the file the harness wrote its checkpoint tokens to (one per line)"


def logged_tokens(stream: BinaryIO, source: str) -> Iterator[LoggedToken]:
    """Each non-blank line of ``stream`` (a binary file) as a token, or with its refusal."""
    number = 0
    while raw := stream.readline(MAX_LOG_LINE_BYTES + 1):
        if len(raw) > MAX_LOG_LINE_BYTES:  # its rest is never read: it may not end (/dev/zero, a pipe)
            yield LoggedToken(number + 1, "", _too_long(source, number + 1))
            return
        try:
            lines = raw.decode("utf-8").splitlines()
        except UnicodeDecodeError as exc:
            line = number + _line_of(raw, exc.start)
            yield LoggedToken(line, "", _not_utf8(source, line, raw[exc.start]))
            number += len(raw.decode("utf-8", errors="replace").splitlines())
            continue
        for text in lines:
            number += 1
            if text.strip():
                yield LoggedToken(number, text.strip())


def _line_of(raw: bytes, offset: int) -> int:
    """The 1-based line within ``raw`` of the byte at ``offset`` (numbered as the audit numbers lines)."""
    return len((raw[:offset].decode("utf-8") + "x").splitlines())


def _refusal(source: str, line: int, message: str, next_step: str) -> RunAuditError:
    return RunAuditError(
        FailureCode.CHECKPOINT_INVALID,
        f"line {line}: {message}",
        path=f"{source}:{line}",
        details={"line": line, "break": "invalid"},
        next_step=next_step,
    )


def _not_utf8(source: str, line: int, byte: int) -> RunAuditError:
    return _refusal(
        source,
        line,
        f"is not UTF-8 text (byte 0x{byte:02x}); no checkpoint token holds such a byte",
        LOG_IO + ", as it wrote it (not re-encoded)",
    )


def _too_long(source: str, line: int) -> RunAuditError:
    return _refusal(
        source,
        line,
        f"is longer than {MAX_LOG_LINE_BYTES} bytes; no checkpoint token is (at most {MAX_TOKEN_CHARS} characters)",
        LOG_IO + ", each token on a line of its own",
    )
