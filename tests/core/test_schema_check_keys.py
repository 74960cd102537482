"""The checker identity in a remembered check's key names each library by its installed distribution.

The distributions are found by listing the ``.dist-info`` directories on
``sys.path``; one installed where a listing cannot see it (a zip file on
``sys.path``) is still named, through ``importlib.metadata``. Checked in a
fresh interpreter with a real zip-installed distribution on its path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

_PROBE = """
import json, sys
import zipped_probe
from rimthan_workflow_registry.release.schema_checks import _distribution, _installed_distributions
installed = _installed_distributions()
print(json.dumps({
    "module": zipped_probe.__file__,
    "listed": [name for name in installed if name.startswith(("zipped_probe-", "jsonschema-"))],
    "zipped": _distribution("zipped_probe", installed),
    "jsonschema": _distribution("jsonschema", installed),
}))
"""


def _zip_install(archive: Path, name: str, version: str) -> None:
    """A wheel-style install of distribution ``name`` (one module) inside a zip file, as zipimport reads it."""
    dist_info = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr(f"{name}.py", "VALUE = 1\n")
        zipped.writestr(f"{dist_info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        zipped.writestr(f"{dist_info}/RECORD", "")


def test_a_distribution_the_listing_cannot_see_is_named_through_importlib_metadata(tmp_path: Path) -> None:
    archive = tmp_path / "site.zip"
    _zip_install(archive, "zipped_probe", "3.1.4")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(archive), os.environ.get("PYTHONPATH")]))}
    run = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    found = json.loads(run.stdout)

    assert found["module"].startswith(str(archive))  # really imported from the zip
    jsonschema = [name for name in found["listed"] if name.startswith("jsonschema-")]
    assert found["listed"] == jsonschema  # the zip is not listed; jsonschema's .dist-info directory is
    assert found["zipped"] == "zipped_probe-3.1.4"  # the fallback: importlib.metadata reads the zip
    assert [found["jsonschema"]] == jsonschema  # a listed distribution is named from the listing
