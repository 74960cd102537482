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
import importlib.util
import sysconfig
from pathlib import Path

from .synthetic import REPO_ROOT

WORKSPACE_PACKAGES = (
    "rimthan_workflow_mcp",
    "rimthan_workflow_registry",
    "rimthan_clikit",
    "rimthan_packager",
    "rimthan_host",
)
"""Every package of the uv workspace (pyproject.toml's members), by import name."""


def compile_bytecode() -> list[str]:
    """Write the ``.pyc`` of every module a measured process can import (installed packages, ours, the benchmarks).

    Up-to-date files are only checked, so this is quick after the first run.
    Returns the directories compiled.
    """
    dirs = [Path(sysconfig.get_paths()["purelib"]), REPO_ROOT / "benchmarks"]
    for name in WORKSPACE_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            dirs.extend(Path(location) for location in spec.submodule_search_locations)
    for directory in dirs:
        compileall.compile_dir(directory, quiet=2, workers=0)
    return [str(d) for d in dirs]
