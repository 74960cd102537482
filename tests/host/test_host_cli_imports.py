"""``rimthan-host --help`` imports only the command line: not the MCP SDK, the bridge or jsonschema.

Checked in a fresh interpreter through the console script's own entry point.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

_PROBE = (
    "import json, sys\n"
    "from rimthan_host.entry import main\n"
    "sys.argv = ['rimthan-host', *sys.argv[1:]]\n"
    "try:\n    main()\nexcept SystemExit:\n    pass\n"
    "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
)


@pytest.mark.parametrize("argv", [("--help",), ("serve", "--help")])
def test_host_help_imports_no_sdk_and_no_bridge(argv: tuple[str, ...]) -> None:
    result = subprocess.run(
        [sys.executable, "-c", _PROBE, *argv], capture_output=True, text=True, check=True, timeout=120
    )
    modules = set(json.loads(result.stderr.strip().splitlines()[-1]))
    assert "Usage: rimthan-host" in result.stdout and "rimthan_host.serve" in modules  # the control
    assert not {m.split(".")[0] for m in modules} & {"mcp", "jsonschema", "anyio", "pydantic", "cryptography"}
    assert "rimthan_host.bridge" not in modules and "rimthan_host.bridge_server" not in modules
