"""Where a text file's first byte that is not UTF-8 stands, for a refusal that names it.

Imported only when a file is not UTF-8 (:func:`~rimthan_workflow_registry.limits.first_not_utf8`): a build
or a load of files that all decode pays for none of it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NotUtf8:
    """Where a text file's first byte that is not UTF-8 is: the byte, its 0-based offset in the file, and the
    1-based line and column (in characters, as an editor counts them) it stands at."""

    byte: int
    offset: int
    line: int
    column: int

    def __str__(self) -> str:
        place = f"line {self.line}, column {self.column} (byte offset {self.offset})"
        return f"byte 0x{self.byte:02x} at {place}"


def not_utf8_at(data: bytes, position: int) -> NotUtf8:
    """Where byte ``position`` of ``data`` (the first that is not UTF-8: all before it decodes) stands."""
    start = data.rfind(b"\n", 0, position) + 1
    column = len(data[start:position].decode("utf-8", "replace")) + 1
    return NotUtf8(data[position], position, data.count(b"\n", 0, position) + 1, column)
