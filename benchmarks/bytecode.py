"""Every figure's processes start from compiled bytecode, as an installed package's do.

With ``PYTHONDONTWRITEBYTECODE`` set (as on the shared benchmark VM) a module
whose source changed since its ``.pyc`` was written, or that never had one,
is compiled again by every process that imports it. That charges our side
for a checkout's edits and for the packages no earlier step compiled: the
floors (``openssl``, ``cp``, ``python3 -c pass``, the SDK echo server) import
none of our modules. Measured once: four changed server modules, +23 M
instructions per server start (0.8%, P5); the packager's modules, never
compiled before ``make bench`` did this, about 7 ms of every ``rimthan-pack
build`` (P2 at 1 MiB on a quiet disk: 136-140 against 127-136 ms compiled).
:func:`compile_bytecode` runs once, before the first figure.
"""

from __future__ import annotations

import compileall
import sysconfig
import tomllib
from pathlib import Path

from .synthetic import REPO_ROOT


def workspace_sources(root: Path = REPO_ROOT) -> list[Path]:
    """The ``src`` directory of every uv workspace member (``[tool.uv.workspace] members`` in pyproject.toml)."""
    members = tomllib.loads((root / "pyproject.toml").read_text("utf-8"))["tool"]["uv"]["workspace"]["members"]
    return [root / member / "src" for member in members]


def compile_bytecode() -> list[str]:
    """Write the ``.pyc`` of every module a measured process can import (installed packages, ours, the benchmarks).

    Up-to-date files are only checked, so this is quick after the first run.
    Returns the directories compiled.
    """
    dirs = [Path(sysconfig.get_paths()["purelib"]), REPO_ROOT / "benchmarks", *workspace_sources()]
    for directory in dirs:
        compileall.compile_dir(directory, quiet=2, workers=0)
    return [str(d) for d in dirs]
