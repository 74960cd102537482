"""The key file warning's names: defined only when a warning is made, still importable from ``key_file_modes``."""

from __future__ import annotations

import json
import subprocess
import sys

_PROBE = """
import json, sys
from pathlib import Path
from rimthan_workflow_registry.key_file_modes import READ_BITS, key_file_exposure
path = Path(sys.argv[1])
path.write_bytes(b"secret")
path.chmod(0o600)
quiet = key_file_exposure(path, READ_BITS)
before = "rimthan_workflow_registry.key_file_warning" in sys.modules
path.chmod(0o644)
exposed = key_file_exposure(path, READ_BITS)
print(json.dumps([quiet is None, before, type(exposed).__name__, exposed.whom]))
"""


def test_a_key_file_nobody_else_can_read_never_imports_the_warning(tmp_path: object) -> None:
    run = subprocess.run(
        [sys.executable, "-c", _PROBE, f"{tmp_path}/k.key"], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(run.stdout) == [True, False, "KeyFileExposure", "group and others"]


def test_the_warning_names_are_still_importable_from_key_file_modes() -> None:
    from rimthan_workflow_registry import key_file_modes, key_file_warning
    from rimthan_workflow_registry.key_file_modes import ExposureWarning, KeyFileExposure, KeyFileKind, exposure_warning

    assert (ExposureWarning, KeyFileExposure, KeyFileKind, exposure_warning) == (
        key_file_warning.ExposureWarning,
        key_file_warning.KeyFileExposure,
        key_file_warning.KeyFileKind,
        key_file_warning.exposure_warning,
    )
    assert key_file_modes.KeyFileKind is key_file_warning.KeyFileKind
