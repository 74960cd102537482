"""Structured JSON logs on stderr.

Under stdio, stdout is the MCP wire, so every log line goes to stderr as one
JSON object (``ts``, ``level``, ``logger``, ``event`` plus event fields). An
operator can pipe it to ``jq``; nothing here ever prints a traceback to a
client (tracebacks of unexpected errors stay in these logs, at debug level
or under ``exc`` as a single string).
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

LOGGER_NAME = "rimthan.mcp"
LEVELS = ("debug", "info", "warning", "error")
_RESERVED = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per record; extra fields passed via ``extra=`` are kept."""

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
        if record.exc_info and record.exc_info[0] is not None:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, sort_keys=False)


def configure_logging(level: str = "info") -> None:
    """Route every logger (ours and the SDK's) to stderr as JSON at ``level``."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
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
    return logging.getLogger(f"{LOGGER_NAME}.{suffix}" if suffix else LOGGER_NAME)
