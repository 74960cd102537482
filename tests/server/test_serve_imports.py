"""``rimthan-mcp`` start-up imports the registry client (oras, requests) only when it follows a registry.

A server start is mostly imports (P5 in docs/performance.md); serving a
release directory must not pay for the OCI client. Checked in a fresh
interpreter importing the CLI module the console script runs.
"""

from __future__ import annotations

import json
import subprocess
import sys

_PROBE = "import json, sys, rimthan_workflow_mcp.cli; print(json.dumps(sorted(sys.modules)))"


def test_the_server_cli_imports_no_registry_client() -> None:
    result = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True, timeout=120)
    modules = set(json.loads(result.stdout.strip().splitlines()[-1]))
    assert "rimthan_workflow_mcp.server" in modules  # the control: the probe did import the CLI
    assert not {m for m in modules if m.split(".")[0] in ("oras", "requests")}
    assert "rimthan_workflow_registry.release.oci" not in modules
