"""A release whose OCI manifest would be past 4 MiB: ``check`` and ``build`` say so, ``push`` sends nothing.

The OCI manifest ``push`` puts lists every release file as a layer titled with
its path. Registries refuse a manifest over 4 MiB (the distribution spec's
bound, which the reference registry the suite runs enforces), and so does
every pull. A catalogue of many files with long paths (non-ASCII ones count
six times: the manifest escapes them) can stay within the 4,096 layers a pull
takes and still be past it: it built and signed without a word. ``check`` and
``build`` now render the manifest push would put (a placeholder for each
digest, so without hashing) and warn with its exact size; ``push`` refuses it
before the first request, with the same size.
"""

from __future__ import annotations

import json
import re
import shutil
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rimthan_workflow_registry.release import MANIFEST_PAST_NEXT, MAX_OCI_MANIFEST_BYTES, OCI_MANIFEST_TYPE
from support.hostile_registry import HostileRegistry, forward
from support.oci import one_line_error, pack
from support.registry import LocalRegistry
from support.releases import KeyPair, packaged_source

REPO = "rimthan/research"
SEGMENT = "\u6587" * 84  # 252 UTF-8 bytes: a name within the 255 a file system takes; 504 characters escaped
FILES = 2100  # each about 2.2 KB of manifest: past 4 MiB, within the 4,096 layers a pull takes
SIZE = re.compile(r"its OCI manifest would be (\d+) bytes")


def _long_paths(tmp_path: Path, files: int) -> Path:
    source = tmp_path / "source"
    shutil.copytree(packaged_source("1.3.0"), source)
    deep = source / "data" / SEGMENT / SEGMENT / SEGMENT
    deep.mkdir(parents=True)
    for index in range(files):
        (deep / f"{index:05d}{SEGMENT[:70]}.txt").write_text(f"{index}\n", "utf-8")
    return source


def _manifest_warning(stderr: str) -> int:
    """The size the one manifest warning of ``stderr`` says, its ``next:`` line checked."""
    lines = stderr.splitlines()
    (at,) = [i for i, line in enumerate(lines) if line.startswith("warning: ") and SIZE.search(line)]
    assert lines[at].startswith("warning: oci_artifact_invalid: "), lines[at]
    assert lines[at].endswith("so rimthan-pack push will refuse this release"), lines[at]
    assert lines[at + 1] == f"next: {MANIFEST_PAST_NEXT}", lines[at + 1]
    assert "Traceback" not in stderr
    found = SIZE.search(lines[at])
    assert found is not None
    return int(found.group(1))


@pytest.fixture
def proxy(registry: LocalRegistry, hostile: Callable[..., HostileRegistry]) -> HostileRegistry:
    """A proxy in front of the suite's real registry that passes every request on and counts it."""

    def passing(handler: Any, proxy: HostileRegistry) -> None:
        forward(handler, proxy, registry.host)

    return hostile(passing)


def test_check_and_build_warn_and_push_refuses_a_release_whose_oci_manifest_is_past_4_mib(
    tmp_path: Path, keypair: KeyPair, trust: Path, registry: LocalRegistry, proxy: HostileRegistry
) -> None:
    source = _long_paths(tmp_path, FILES)
    checked = pack("check", source)
    assert checked.returncode == 0, checked.stderr
    said = _manifest_warning(checked.stderr)
    assert said > MAX_OCI_MANIFEST_BYTES

    built = pack("build", source, "--key", keypair.private_path, "--out", tmp_path / "releases", "--trust", trust)
    assert built.returncode == 0, built.stderr
    assert _manifest_warning(built.stderr) == said
    release = tmp_path / "releases/research-decision-1.3.0"
    assert sum(1 for p in release.rglob("*") if p.is_file()) < 4096  # within the layers a pull takes
    refused = pack("push", release, proxy.ref(REPO, "1.3.0"), "--trust", trust, "--plain-http")
    line = one_line_error(refused, "oci_artifact_invalid")
    assert f"not pushed: its OCI manifest would be {said} bytes" in line  # what build said: the bytes push puts
    assert refused.stderr.splitlines()[1] == f"next: {MANIFEST_PAST_NEXT}"
    assert proxy.calls == []  # nothing was sent, not even the tag check
    assert _registry_answer(registry, said) == 400  # as the real registry answers a manifest of that size


def _registry_answer(registry: LocalRegistry, size: int) -> int:
    """The status the suite's registry answers a PUT of an OCI manifest of ``size`` bytes with."""
    padding = "x" * (size - len(json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST_TYPE, "pad": ""})))
    data = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST_TYPE, "pad": padding}).encode()
    assert len(data) == size
    url = f"http://{registry.host}/v2/{REPO}/manifests/too-large"
    put = urllib.request.Request(url, data=data, method="PUT", headers={"Content-Type": OCI_MANIFEST_TYPE})
    try:
        with urllib.request.urlopen(put, timeout=60) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as refused:
        assert b"request body too large" in refused.read(), "refused for another reason than its size"
        return int(refused.code)


def test_a_catalogue_with_long_paths_but_a_manifest_within_4_mib_is_not_warned_of(tmp_path: Path) -> None:
    checked = pack("check", _long_paths(tmp_path, FILES // 2))
    assert checked.returncode == 0, checked.stderr
    assert "OCI manifest" not in checked.stderr, checked.stderr
