"""A quick P2 run records what explains the build figure beside its floor.

The file system's flush cost (one flush per build, one per floor copy) moves
between samples on this VM, so each pair's ratio is kept; at 1 MiB, an
interpreter importing only the library modules a build imports (none of
ours, read from one more build with ``-X importtime``) is timed too
(``floors.library_imports``); and the run compiles every workspace
package's bytecode first (``bytecode.py``), the packager's included. Beside
every wall time, the CPU time of the processes it ran is kept.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the benchmarks are a package at the repository root
from benchmarks.config import QUICK  # noqa: E402
from benchmarks.report import Figure, render_cpu, render_libraries  # noqa: E402
from benchmarks.runner import run  # noqa: E402


def test_a_quick_p2_run_records_pair_ratios_and_the_library_imports(tmp_path: Path) -> None:
    plan = dataclasses.replace(QUICK, profile=False)
    document = run(plan, only={"P2"}, work=tmp_path / "work", out=tmp_path / "results.json")

    root = Path(__file__).resolve().parents[2]
    assert {str(root / member / "src") for member in ("core", "clikit", "packager", "server", "host")} <= set(
        document["bytecode_compiled"]
    )
    figures = {f["id"]: f for f in document["figures"]}
    small, large = figures["P2 100-files-1MiB"], figures["P2 1000-files-16MiB"]
    for figure in (small, large):
        details = figure["details"]
        ours, floor = details["ours_s"]["values"], details["floor_s"]["values"]
        assert details["pair_ratios"] == [o / f for o, f in zip(ours, floor, strict=True)]
        # beside each wall time, the CPU time of the processes it ran: waiting and working told apart
        assert len(details["ours_cpu_s"]) == len(ours) and len(details["floor_cpu_s"]) == len(floor)
        assert min(details["ours_cpu_s"] + details["floor_cpu_s"]) > 0
        slowest = ours.index(max(ours))
        line = render_cpu(Figure(figure["id"], "", figure["ours"], figure["floor"], "s", "ratio", 3, details=details))
        assert (
            f"the slowest build {ours[slowest] * 1000:.1f} ms wall, {details['ours_cpu_s'][slowest] * 1000:.1f} ms"
            in line
        )
    assert small["details"]["library_imports_s"] > 0
    libraries = small["details"]["library_modules"]  # what a timed build imports, read from one more build
    assert {"click", "cryptography.hazmat.primitives.asymmetric.ed25519", "json", "tomllib"} <= set(libraries)
    assert not [name for name in libraries if name.startswith("rimthan")]  # none of ours
    assert not [name for name in libraries if name.startswith("jsonschema")]  # taken after the warm-up, as timed
    assert "library_imports_s" not in large["details"]  # only where the floor holds an interpreter's start
    shown = Figure(
        small["id"],
        small["what"],
        small["ours"],
        small["floor"],
        "s",
        "ratio",
        small["target"],
        details=small["details"],
    )
    ratio = small["details"]["library_imports_s"] / small["floor"]
    assert render_libraries(shown).endswith(
        f"{len(libraries)} library modules a build imports (none of ours) takes "
        f"{small['details']['library_imports_s'] * 1000:.1f} ms, {ratio:.2f}x the floor (target 3x)"
    )
