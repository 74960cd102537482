"""Seeded, reproducible synthetic catalogue sources (generated into a work dir, never committed).

Both generators start from the packaged ``catalogues/research-decision/1.2.0``
source, so what they produce builds with ``rimthan-pack build`` and loads in
the server exactly like the real catalogue:

* :func:`bulk_source` adds data files until the whole source holds exactly
  ``files`` files and ``total_bytes`` bytes (P1, P1m, P2);
* :func:`long_source` adds a workflow of ``steps`` gated steps, each with one
  Markdown output and its own validator (P4).

The same spec and seed always give byte-identical trees. A stamp file beside
each tree records the spec, so an unchanged tree is reused instead of rewritten.
"""

from __future__ import annotations

import json
import random
import shutil
import tomllib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import tomli_w
from rimthan_workflow_registry.protocol_names import SETUP_STEP_ID

REPO_ROOT = Path(__file__).resolve().parents[1]
BASE_SOURCE = REPO_ROOT / "catalogues" / "research-decision" / "1.2.0"
DATA_DIR = "data/synthetic"
FILES_PER_DIR = 100
LONG_WORKFLOW = "long-synthetic"
LONG_WORKFLOW_VERSION = "1.0.0"
LONG_WORKFLOW_FILE = f"workflows/{LONG_WORKFLOW}.toml"
LONG_ALIAS = "long"
LONG_SUBAGENT = "reviewer"
STAMP_FORMAT = "rimthan.bench-synthetic/1"


@dataclass(frozen=True)
class BulkSpec:
    """A catalogue of exactly ``files`` files and ``total_bytes`` bytes (base catalogue included)."""

    files: int
    total_bytes: int
    seed: int = 6

    @property
    def label(self) -> str:
        return f"{self.files}-files-{_size_label(self.total_bytes)}"

    @property
    def small(self) -> bool:
        """The 1 MiB case, where fixed costs (interpreter start, signatures, schema checks) dominate."""
        return self.total_bytes <= 1 << 20


@dataclass(frozen=True)
class LongSpec:
    """The base catalogue plus a linear workflow of ``steps`` gated steps."""

    steps: int
    seed: int = 6

    @property
    def label(self) -> str:
        return f"long-{self.steps}-steps"


def _size_label(size: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size % scale == 0:
            return f"{size // scale}{unit}"
    return f"{size}B"


def base_files(base: Path = BASE_SOURCE) -> dict[str, int]:
    """Relative path -> size of every file in the base source."""
    return {p.relative_to(base).as_posix(): p.stat().st_size for p in sorted(base.rglob("*")) if p.is_file()}


def _stamp(kind: str, spec: Any, base: Path) -> dict[str, Any]:
    return {"format": STAMP_FORMAT, "kind": kind, "spec": asdict(spec), "base": base_files(base)}


def _reuse_or_clear(dest: Path, stamp: dict[str, Any]) -> bool:
    """True if ``dest`` was generated from exactly ``stamp``; otherwise remove whatever is there."""
    stamp_path = dest.with_name(dest.name + ".stamp.json")
    if dest.is_dir() and stamp_path.is_file():
        try:
            if json.loads(stamp_path.read_text("utf-8")) == stamp:
                return True
        except ValueError:
            pass
    stamp_path.unlink(missing_ok=True)
    if dest.exists():
        shutil.rmtree(dest)
    return False


def _write_stamp(dest: Path, stamp: dict[str, Any]) -> None:
    dest.with_name(dest.name + ".stamp.json").write_text(json.dumps(stamp, sort_keys=True), "utf-8")


def split_sizes(count: int, total: int, rng: random.Random) -> list[int]:
    """``count`` file sizes that vary (0.25x to 1.75x the mean) and add up to exactly ``total``."""
    if count <= 0:
        if total:
            raise ValueError("bytes left over but no files to hold them")
        return []
    weights = [rng.uniform(0.25, 1.75) for _ in range(count)]
    scale = total / sum(weights)
    sizes = [int(w * scale) for w in weights]
    for i in range(total - sum(sizes)):
        sizes[i % count] += 1
    return sizes


def bulk_source(dest: Path, spec: BulkSpec, base: Path = BASE_SOURCE) -> Path:
    """The base catalogue plus seeded random data files, ``spec.files`` files / ``spec.total_bytes`` in all."""
    stamp = _stamp("bulk", spec, base)
    if _reuse_or_clear(dest, stamp):
        return dest
    existing = base_files(base)
    extra_files = spec.files - len(existing)
    extra_bytes = spec.total_bytes - sum(existing.values())
    if extra_files < 0 or extra_bytes < 0:
        raise ValueError(f"the base catalogue alone has {len(existing)} files / {sum(existing.values())} bytes")
    shutil.copytree(base, dest)
    rng = random.Random(spec.seed)
    for index, size in enumerate(split_sizes(extra_files, extra_bytes, rng)):
        path = dest / DATA_DIR / f"d{index // FILES_PER_DIR:04d}" / f"f{index:06d}.bin"
        if index % FILES_PER_DIR == 0:
            path.parent.mkdir(parents=True)
        path.write_bytes(rng.randbytes(size))
    _write_stamp(dest, stamp)
    return dest


# --------------------------------------------------------------------------- the long workflow


def step_id(number: int) -> str:
    return f"step-{number:03d}"


def note_id(number: int) -> str:
    return f"note-{number:03d}"


def _base_setup(base: Path) -> dict[str, Any]:
    """The setup step of the base catalogue's first workflow (its instruction and workspace-manifest output)."""
    manifest = tomllib.loads((base / "catalogue.toml").read_text("utf-8"))
    workflow = tomllib.loads((base / manifest["workflows"][0]).read_text("utf-8"))
    step: dict[str, Any] = next(s for s in workflow["steps"] if s["id"] == SETUP_STEP_ID)
    return step


def _long_workflow(steps: int, base: Path) -> dict[str, Any]:
    """A linear workflow: the base setup step, then ``steps`` gated steps with one output and one validator each."""
    numbers = range(1, steps + 1)
    setup = {**_base_setup(base), "host_assets": [LONG_SUBAGENT], "next": step_id(1)}
    gated = []
    for n in numbers:
        step: dict[str, Any] = {
            "id": step_id(n),
            "title": f"Synthetic step {n}",
            "instruction": f"assets/instructions/long/{step_id(n)}.md",
            "validators": [f"check-{n:03d}@1.0.0"],
            "outputs": [
                {
                    "id": note_id(n),
                    "path": f"research/long/{note_id(n)}.md",
                    "media_type": "text/markdown",
                    "max_bytes": 65536,
                    "write_policy": "create_or_replace",
                }
            ],
        }
        if n < steps:
            step["next"] = step_id(n + 1)
        gated.append(step)
    return {
        "id": LONG_WORKFLOW,
        "version": LONG_WORKFLOW_VERSION,
        "owner": "rimthan.research",
        "title": "Long synthetic workflow",
        "summary": f"Benchmark workflow: {steps} gated steps in a line, each with one note and its own validator.",
        "entry_aliases": [LONG_ALIAS],
        "confirmed_state_schema": "schemas/confirmed-state.schema.json",
        "required_capabilities": ["workspace.write", "subagents"],
        "host_adapters": ["claude-code@1.0.0"],
        "assets": [{"id": LONG_SUBAGENT, "kind": "subagent", "file": "assets/subagents/evidence-auditor.md"}],
        "validators": [
            {
                "id": f"check-{n:03d}",
                "version": "1.0.0",
                "instruction": f"assets/validators/long/check-{n:03d}.md",
                "subagent": LONG_SUBAGENT,
                "required_capabilities": ["subagent.isolated-context"],
            }
            for n in numbers
        ],
        "steps": [setup, *gated],
    }


def long_source(dest: Path, spec: LongSpec, base: Path = BASE_SOURCE) -> Path:
    """The base catalogue plus the long workflow (listed in ``catalogue.toml`` after the packaged one)."""
    stamp = _stamp("long", spec, base)
    if _reuse_or_clear(dest, stamp):
        return dest
    shutil.copytree(base, dest)
    rng = random.Random(spec.seed)
    manifest = tomllib.loads((dest / "catalogue.toml").read_text("utf-8"))
    manifest["workflows"] = [*manifest["workflows"], LONG_WORKFLOW_FILE]
    (dest / "catalogue.toml").write_text(tomli_w.dumps(manifest), "utf-8")
    (dest / LONG_WORKFLOW_FILE).write_text(tomli_w.dumps(_long_workflow(spec.steps, base)), "utf-8")
    for folder in ("assets/instructions/long", "assets/validators/long"):
        (dest / folder).mkdir(parents=True)
    for n in range(1, spec.steps + 1):
        token = rng.randbytes(8).hex()
        (dest / f"assets/instructions/long/{step_id(n)}.md").write_text(
            f"# Synthetic step {n}\n\nWrite `research/long/{note_id(n)}.md`: one paragraph quoting {token}.\n", "utf-8"
        )
        (dest / f"assets/validators/long/check-{n:03d}.md").write_text(
            f"# Check {n}\n\nPass when `{note_id(n)}` quotes the step's token.\n", "utf-8"
        )
    _write_stamp(dest, stamp)
    return dest


def long_initial_state() -> dict[str, Any]:
    """Values the long workflow's confirmed-state schema requires."""
    return {"objective": "Does a 200-step run cost the same per call as a 2-step one?", "decision_owner": "benchmark"}
