"""Where the time goes: cProfile own-time grouped by what does the work, and import time by package.

Grouping by library (jsonschema, rfc8785, hashlib, syscalls, ...) answers the
issue's question - schema compilation, canonicalisation, hashing, import time -
without depending on how our own functions happen to be split.
"""

from __future__ import annotations

import cProfile
import pstats
import re
import subprocess
import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

# (category, substrings of the profiler's file name or built-in function name), first match wins.
CATEGORIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    # urllib.parse is only reached through referencing's $ref/$dynamicRef URI joins on these paths.
    (
        "JSON Schema (jsonschema/referencing)",
        ("/jsonschema/", "/referencing/", "/rpds/", "jsonschema_specifications", "/urllib/parse.py"),
    ),
    ("canonical JSON (rfc8785)", ("/rfc8785/",)),
    ("SHA-256 hashing", ("_hashlib.HASH", "openssl_sha256", "openssl.hashes.Hash")),
    ("fsync", ("posix.fsync", "posix.fdatasync")),
    (
        "file I/O syscalls",
        (
            "posix.read",
            "posix.write",
            "posix.open",
            "posix.close",
            "posix.fstat",
            "posix.stat",
            "posix.lstat",
            "posix.scandir",
            "posix.mkdir",
            "posix.rename",
            "posix.chmod",
            "posix.fchmod",
            "posix.listdir",
            "'stat' of 'posix.DirEntry'",
            "io.open",
            "of '_io.",
            "posix.unlink",
        ),
    ),
    ("JSON parsing (json)", ("/json/", "_json.")),
    ("TOML parsing (tomllib)", ("/tomllib/",)),
    ("JWT (pyjwt)", ("/jwt/",)),
    ("Ed25519 / cryptography", ("/cryptography/", "Ed25519")),
    ("pathlib", ("/pathlib.py",)),
    ("unicodedata / str", ("unicodedata.", "of 'str' objects")),
    ("MCP SDK / pydantic / anyio", ("/mcp/", "/mcp_types/", "/pydantic", "/anyio/", "/starlette/", "/uvicorn/")),
    ("Rimthan core (own code)", ("rimthan_workflow_registry",)),
    ("Rimthan server (own code)", ("rimthan_workflow_mcp",)),
    ("Rimthan packager (own code)", ("rimthan_packager",)),
    ("benchmark harness", ("/benchmarks/",)),
)


def _label(key: tuple[str, int, str]) -> str:
    filename, line, name = key
    if filename == "~":
        return name
    return f"{Path(filename).name}:{line}({name})"


def _category(key: tuple[str, int, str]) -> str:
    text = f"{key[0]} {key[2]}"
    for name, needles in CATEGORIES:
        if any(n in text for n in needles):
            return name
    return "other (stdlib, builtins)"


def summarise(stats: pstats.Stats, *, top: int = 8) -> dict[str, Any]:
    """Own time per category (seconds and share) and the top functions by own and cumulative time."""
    raw: dict[tuple[str, int, str], tuple[Any, ...]] = stats.stats  # type: ignore[attr-defined]
    by_category: dict[str, float] = defaultdict(float)
    total = 0.0
    for key, (_cc, _nc, tottime, _ct, _callers) in raw.items():
        by_category[_category(key)] += tottime
        total += tottime
    own = sorted(raw.items(), key=lambda kv: kv[1][2], reverse=True)[:top]
    cumulative = sorted(((k, v) for k, v in raw.items() if "rimthan" in k[0]), key=lambda kv: kv[1][3], reverse=True)[
        :top
    ]
    return {
        "total_s": total,
        "categories": [
            {"category": c, "seconds": s, "share": s / total if total else 0.0}
            for c, s in sorted(by_category.items(), key=lambda cs: cs[1], reverse=True)
        ],
        "top_own": [{"function": _label(k), "seconds": v[2], "calls": v[1]} for k, v in own],
        "top_cumulative_ours": [{"function": _label(k), "seconds": v[3], "calls": v[1]} for k, v in cumulative],
    }


def profile_call(action: Callable[[], Any], *, dump: Path | None = None) -> dict[str, Any]:
    """Run ``action`` once under cProfile and summarise it (optionally keep the raw .prof for snakeviz)."""
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        action()
    finally:
        profiler.disable()
    if dump is not None:
        dump.parent.mkdir(parents=True, exist_ok=True)
        profiler.dump_stats(str(dump))
    return summarise(pstats.Stats(profiler))


_IMPORT_LINE = re.compile(r"^import time:\s+(?P<self>\d+)\s+\|\s+(?P<cum>\d+)\s+\|(?P<indent>\s*)(?P<name>\S+)$")


def import_times(modules: Sequence[str], *, top: int = 8, python: str = sys.executable) -> dict[str, Any]:
    """``python -X importtime``: total import seconds of ``modules`` and own time per top-level package."""
    code = "; ".join(f"import {m}" for m in modules)
    result = subprocess.run(
        [python, "-X", "importtime", "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    per_package: dict[str, float] = defaultdict(float)
    total = 0.0
    for line in result.stderr.splitlines():
        match = _IMPORT_LINE.match(line)
        if not match:
            continue
        seconds = int(match["self"]) / 1e6
        per_package[match["name"].split(".")[0]] += seconds
        total += seconds
    ranked = sorted(per_package.items(), key=lambda kv: kv[1], reverse=True)[:top]
    return {
        "modules": list(modules),
        "total_s": total,
        "top_packages": [{"package": p, "seconds": s, "share": s / total if total else 0.0} for p, s in ranked],
    }


def imported_libraries(argv: Sequence[str | Path], *, ours: str = "rimthan_") -> list[str]:
    """Every module outside our packages (names starting ``ours``) that the Python program ``argv`` imports.

    Read from ``python -X importtime ARGV`` run once, so it is what the program
    really imported, failed attempts included (``copy`` tries ``org.python.core``):
    importing the same names in another interpreter repeats the same work.
    """
    result = subprocess.run([sys.executable, "-X", "importtime", *map(str, argv)], capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, argv[:2]))} failed under -X importtime:\n{result.stderr[-2000:]}")
    names = (match["name"] for line in result.stderr.splitlines() if (match := _IMPORT_LINE.match(line)))
    return [name for name in names if not name.startswith(ours)]


def render_profile(title: str, summary: dict[str, Any], *, limit: int = 6) -> str:
    """A few lines for the terminal: the biggest categories, then the heaviest functions."""
    lines = [f"  {title} (profiled {summary['total_s'] * 1000:.0f} ms own time):"]
    for row in summary["categories"][:limit]:
        lines.append(f"    {row['share'] * 100:5.1f}%  {row['category']}")
    heavy = ", ".join(f"{r['function']} {r['seconds'] * 1000:.0f} ms" for r in summary["top_own"][:4])
    lines.append(f"    heaviest: {heavy}")
    return "\n".join(lines)


def render_imports(title: str, summary: dict[str, Any], *, limit: int = 6) -> str:
    parts = ", ".join(f"{r['package']} {r['seconds'] * 1000:.0f} ms" for r in summary["top_packages"][:limit])
    return f"  {title}: {summary['total_s'] * 1000:.0f} ms importing; by package: {parts}"
