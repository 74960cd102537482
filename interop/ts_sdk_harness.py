"""``make interop`` step 8: the TypeScript harness on the official MCP TypeScript SDK, over stdio and HTTP.

interop/ts-sdk-harness/harness.mts (run by the pinned Node 22 as it is: type stripping, nothing compiled)
checks docs/test-vectors/host-protocol.json with the npm ``canonicalize`` library, then serves
``--release`` 1.2.0 ``--migration-target`` 1.3.0 over each transport and completes a run: every result
checked by the SDK's ``callTool`` against the tool's outputSchema, refusals read through
``client.request`` (docs/harness-guide.md "Reading a refusal with the TypeScript SDK") and checked
against the served refusal contract, an output refused for a false attestation, a failing validator
report repaired, and the migration.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
HARNESS = HERE / "ts-sdk-harness" / "harness.mts"
VECTORS = HERE.parent / "docs" / "test-vectors" / "host-protocol.json"
TRANSPORTS = ("stdio", "http")
TIMEOUT = 180


def run_ts_sdk_harness(
    node: Path,
    server: str,
    releases: tuple[Path, Path],
    trust: Path,
    work: Path,
    check: Callable[[bool, str, str], bool],
) -> None:
    """One run per transport, from ``releases`` (the run's release, its migration target)."""
    release, target = releases
    for transport in TRANSPORTS:
        project = work / f"ts-{transport}-project"
        project.mkdir()
        command = [str(node), str(HARNESS), "--server", server, "--transport", transport, "--vectors", str(VECTORS)]
        command += ["--release", str(release), "--migration-target", str(target), "--trust", str(trust)]
        command += ["--state-dir", str(work / f"ts-{transport}-state"), "--project", str(project)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT, check=False)
        last = (done.stdout.strip().splitlines() or [""])[-1]
        check(
            done.returncode == 0 and last.startswith(f"ok: {transport}: completed research-decision@1.3.0"),
            f"a harness in TypeScript on the official SDK over {transport}: vectors (canonicalize), a refused call, "
            "a refused output, a failed validation repaired, a migration",
            last if done.returncode == 0 else done.stderr.strip()[-600:],
        )
