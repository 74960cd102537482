"""Structured JSON logs on stderr, one bounded line per record whatever a peer sends.

Under stdio, stdout is the MCP wire, so every log line goes to stderr as one
JSON object (``ts``, ``level``, ``logger``, ``event`` plus event fields). An
operator can pipe it to ``jq``; nothing here ever prints a traceback to a
client. Every string in a record (ours, the SDK's, asyncio's) is written as
:func:`~rimthan_workflow_registry.errors.quoted` writes it: one line, cut
past ``QUOTE_MAX_CHARS`` with a marker, so a client's 60 KiB ``Host`` header
or tool name cannot make a 60 KiB log line. An exception is ``exc``: its type
and message on one bounded line. What a peer causes (a client gone
mid-request, a reset, the open-file limit reached by connections) gets no
traceback; a fault of ours keeps its frames (``trace``, one string). A record
logged while an HTTP request is handled names the client (``peer``).
asyncio's "accept failed" error, logged up to 128 times a second at the
open-file limit, is written at most once a second.
"""

from __future__ import annotations

import contextvars
import errno
import json
import logging
import sys
import time
import traceback
from typing import Any

from rimthan_workflow_registry.errors import map_strings, quoted

PROCESS_LOGGER = "rimthan.mcp"  # the root of the process's own logging loggers (the operator's log lines)
LEVELS = ("debug", "info", "warning", "error")
_RESERVED = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}
PEER: contextvars.ContextVar[str | None] = contextvars.ContextVar("rimthan_peer", default=None)
# what a peer can cause: no traceback tells the operator more than the exception's name
# (module, name) of what a peer causes beside ConnectionError: looked up only in modules already imported (an
# exception of a class exists only once its module is), so a process that never serves HTTP (a release check,
# stdio) does not import starlette and anyio here (90 modules, 6 MB).
_PEER_FAULTS = (
    ("starlette.requests", "ClientDisconnect"),
    ("anyio", "ClosedResourceError"),
    ("anyio", "BrokenResourceError"),
)
_OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
REPEAT_SECONDS = 1.0  # asyncio retries an accept that failed for lack of resources after 1 s


class JsonFormatter(logging.Formatter):
    """One JSON object per record, each string bounded; extra fields passed via ``extra=`` are kept."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _RESERVED and not key.startswith("_"):
                out[key] = value
        peer = PEER.get()
        if peer is not None:
            out.setdefault("peer", peer)
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None:
            out["exc"] = f"{type(exc).__name__}: {exc}"
        line = map_strings(out, quoted)
        if exc is not None and not _peer_caused(exc):  # a fault of ours: where (frames only; the message is in exc)
            line["trace"] = "".join(traceback.format_tb(exc.__traceback__))
        return json.dumps(line, default=quoted, sort_keys=False)


def _peer_caused(exc: BaseException) -> bool:
    if isinstance(exc, OSError) and exc.errno in _OUT_OF_RESOURCES:
        return True
    if isinstance(exc, ConnectionError):
        return True
    return any(isinstance(exc, getattr(sys.modules.get(module), name, ())) for module, name in _PEER_FAULTS)


class _AcceptRepeats(logging.Filter):
    """Drops asyncio's repeats of one error within ``REPEAT_SECONDS`` (a failed accept is logged per pending
    connection, up to the backlog at once, every second while the open-file limit is reached)."""

    def __init__(self) -> None:
        super().__init__()
        self._last: dict[str, float] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name != "asyncio":
            return True
        key = str(record.msg).split("\n", 1)[0]
        if record.created - self._last.get(key, float("-inf")) < REPEAT_SECONDS:
            return False
        self._last = {key: record.created}  # one key held: no growth, whatever asyncio logs
        return True


def configure_logging(level: str = "info") -> None:
    """Route every logger (ours and the SDK's) to stderr as JSON at ``level``."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(_AcceptRepeats())
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level.upper())
    # The SDK and HTTP stack are chatty at info; keep them at warning unless debugging.
    quiet = logging.DEBUG if level == "debug" else logging.WARNING
    for name in ("mcp", "httpx", "httpcore", "uvicorn", "uvicorn.access", "uvicorn.error", "sse_starlette"):
        logging.getLogger(name).setLevel(quiet)


def get_logger(suffix: str | None = None) -> logging.Logger:
    return logging.getLogger(f"{PROCESS_LOGGER}.{suffix}" if suffix else PROCESS_LOGGER)
