"""The result table (stdout) and the same figures as JSON (benchmarks/out/results.json)."""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

Compare = Literal["ratio", "rate", "delta", "value"]
UNITS = {"s": (1000.0, "ms"), "MiB": (1.0, "MiB"), "B": (1.0, "B"), "calls/s": (1.0, "calls/s")}


@dataclass(frozen=True)
class Figure:
    """One row: ours beside its floor, and how they compare with the target.

    ``ratio``: ours / floor <= target; ``rate`` (more is better, e.g.
    calls per second): floor / ours <= target, i.e. how many times slower we
    are; ``delta``: ours - floor <= target (same
    unit); ``value``: ours <= target (no floor). Seconds print as ms.
    """

    id: str
    what: str
    ours: float
    floor: float | None
    unit: str
    compare: Compare
    target: float
    floor_what: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    measured_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))

    @property
    def score(self) -> float:
        if self.compare == "ratio":
            assert self.floor is not None
            return self.ours / self.floor
        if self.compare == "rate":
            assert self.floor is not None
            return self.floor / self.ours
        if self.compare == "delta":
            assert self.floor is not None
            return self.ours - self.floor
        return self.ours

    @property
    def met(self) -> bool:
        return self.score <= self.target

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "what": self.what,
            "ours": self.ours,
            "floor": self.floor,
            "floor_what": self.floor_what,
            "unit": self.unit,
            "compare": self.compare,
            "score": self.score,
            "target": self.target,
            "verdict": "meets target" if self.met else "above target",
            "measured_at": self.measured_at,
            "details": self.details,
        }


def _amount(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    scale, shown = UNITS.get(unit, (1.0, unit))
    scaled = value * scale
    digits = 1 if abs(scaled) >= 10 else 2
    return f"{scaled:,.{digits}f} {shown}"


def _score(figure: Figure) -> str:
    if figure.compare in ("ratio", "rate"):
        return f"{figure.score:.2f}x"
    if figure.compare == "delta":
        return "+" + _amount(figure.score, figure.unit)
    return "-"


def _target(figure: Figure) -> str:
    if figure.compare in ("ratio", "rate"):
        return f"<= {figure.target:g}x"
    if figure.compare == "delta":
        return "<= +" + _amount(figure.target, figure.unit)
    return "<= " + _amount(figure.target, figure.unit)


def render_table(figures: list[Figure]) -> str:
    rows = [("figure", "ours", "floor", "ratio", "target", "verdict")]
    rows += [
        (
            f.id,
            _amount(f.ours, f.unit),
            _amount(f.floor, f.unit),
            _score(f),
            _target(f),
            "meets target" if f.met else "ABOVE target",
        )
        for f in figures
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for n, row in enumerate(rows):
        cells = [
            row[0].ljust(widths[0]),
            *(c.rjust(w) for c, w in zip(row[1:-1], widths[1:-1], strict=True)),
            row[-1].ljust(widths[-1]),
        ]
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def render_notes(figures: list[Figure]) -> str:
    """What each row measured and against which floor."""
    return "\n".join(f"  {f.id}: {f.what}" + (f"; floor: {f.floor_what}" if f.floor_what else "") for f in figures)


def machine() -> dict[str, Any]:
    """Where the figures were taken: they are only comparable on the same machine."""
    try:
        openssl = subprocess.run(["openssl", "version"], capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        openssl = None
    model = None
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        model = next(
            (
                line.split(":", 1)[1].strip()
                for line in cpuinfo.read_text().splitlines()
                if line.startswith("model name")
            ),
            None,
        )
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "openssl": openssl,
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


VERSIONED = (
    "rimthan-workflow-registry",
    "rimthan-packager",
    "rimthan-workflow-mcp",
    "rimthan-host",
    "mcp",
    "jsonschema",
    "pyjwt",
    "cryptography",
    "uvicorn",
)


def versions() -> dict[str, str | None]:
    """Versions of what the figures exercise (our packages and the libraries on their hot paths)."""
    found: dict[str, str | None] = {}
    for name in VERSIONED:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def render_libraries(figure: Figure) -> str:
    """What a build would cost if none of our code took any time (P2 at 1 MiB: ``library_imports_s``)."""
    seconds, count = figure.details["library_imports_s"], len(figure.details["library_modules"])
    share = f", {seconds / figure.floor:.2f}x the floor (target {figure.target:g}x)" if figure.floor else ""
    return (
        f"  {figure.id}: an interpreter importing only the {count} library modules a build imports "
        f"(none of ours) takes {seconds * 1000:.1f} ms{share}"
    )


def render_cpu(figure: Figure) -> str:
    """P2's wall times beside the CPU time of the processes each measurement ran (``ours_cpu_s``, ``floor_cpu_s``).

    A build slower in wall time but not in CPU time waited (for the disk or a core); one slower in both worked more.
    """
    ours, floor = figure.details["ours_cpu_s"], figure.details["floor_cpu_s"]
    walls = figure.details["ours_s"]["values"]
    slow, fast = walls.index(max(walls)), walls.index(min(walls))
    mine, theirs = statistics.median(ours), statistics.median(floor)
    return (
        f"  {figure.id}: CPU time of the processes run (median): ours {mine * 1000:.1f} ms, the floor's "
        f"{theirs * 1000:.1f} ms ({mine / theirs:.2f}x); the slowest build {walls[slow] * 1000:.1f} ms wall, "
        f"{ours[slow] * 1000:.1f} ms CPU; the fastest {walls[fast] * 1000:.1f} ms wall, {ours[fast] * 1000:.1f} ms CPU"
    )


def render_verdict(figures: list[Figure]) -> str:
    """Which figures meet their targets, and which do not (the last lines ``make bench`` prints)."""
    met = [f.id for f in figures if f.met]
    above = [f.id for f in figures if not f.met]
    lines = [f"meet their targets ({len(met)}/{len(figures)}): {', '.join(met) or 'none'}"]
    if above:
        lines.append(f"above target ({len(above)}): {', '.join(above)}")
    return "\n".join(lines)


def write_json(path: Path, document: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2, sort_keys=False) + "\n", "utf-8")
