"""The one error voice both CLIs speak, as tests read it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Refusal:
    """A refusal's two stderr lines: ``error: <code>: <file>: <message>`` and ``next: <what to do>``."""

    error: str
    next: str

    @property
    def code(self) -> str:
        return self.error.removeprefix("error: ").split(":", 1)[0]


def refusal(stderr: str, *, allow_before: bool = False) -> Refusal:
    """Parse the refusal at the end of ``stderr``; no traceback, nothing after it.

    ``allow_before`` admits earlier lines (a server's start-up banner, a help text).
    """
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) >= 2, stderr
    if not allow_before:
        assert len(lines) == 2, stderr
    error, next_line = lines[-2], lines[-1]
    assert error.startswith("error: "), stderr
    assert next_line.startswith("next: ") and len(next_line) > len("next: "), stderr
    return Refusal(error, next_line.removeprefix("next: "))


def refusals(stderr: str) -> list[Refusal]:
    """Every refusal in ``stderr``: a check that collects its failures says each in its two lines, in order."""
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines and len(lines) % 2 == 0, stderr
    return [refusal(f"{error}\n{next_line}") for error, next_line in zip(lines[::2], lines[1::2], strict=True)]
