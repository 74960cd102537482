"""``rimthan-pack push`` refuses a release no pull would take, before anything is sent.

The pull path (``release.oci.release_layers``) takes at most 4,096 layers, 16
MiB each and 256 MiB in all. A release past one of them builds and verifies,
and a registry takes it; then every ``rimthan-pack pull`` and every follower
of the fleet refused it (``oci_artifact_invalid``). The push now applies the
pull's own rules to the manifest it would put, and sends nothing: the proxy in
front of the real registry sees no request, and the tag names nothing.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rimthan_workflow_registry.release.oci import MAX_LAYERS
from support.hostile_registry import HostileRegistry, forward
from support.oci import one_line_error, pack
from support.registry import LocalRegistry
from support.releases import KeyPair, build_release, packaged_source

REPO = "rimthan/research"


def _with_files(tmp_path: Path, layers: int) -> Path:
    """The packaged 1.3.0 catalogue plus small data files, so that its release has ``layers`` layers."""
    source = tmp_path / "source"
    shutil.copytree(packaged_source("1.3.0"), source)
    have = sum(1 for p in source.rglob("*") if p.is_file()) + 3  # and manifest.json, SHA256SUMS, one signature
    data = source / "data"
    data.mkdir()
    for index in range(layers - have):
        (data / f"f{index:05d}.txt").write_text(f"{index}\n", "utf-8")
    return source


def test_a_release_with_more_layers_than_a_pull_takes_is_not_pushed(
    tmp_path: Path,
    keypair: KeyPair,
    trust: Path,
    registry: LocalRegistry,
    hostile: Callable[..., HostileRegistry],
) -> None:
    release = build_release(_with_files(tmp_path, MAX_LAYERS + 1), tmp_path / "releases", [keypair])
    assert sum(1 for p in release.rglob("*") if p.is_file()) == MAX_LAYERS + 1

    def passing(handler: Any, proxy: HostileRegistry) -> None:
        forward(handler, proxy, registry.host)

    proxy = hostile(passing)
    refused = pack("push", release, proxy.ref(REPO, "stable"), "--trust", trust, "--plain-http")
    line = one_line_error(refused, "oci_artifact_invalid")
    assert f"not pushed: no pull would take this release (a release has 1 to {MAX_LAYERS} layers)" in line
    assert "rimthan-mcp serve --releases-dir" in refused.stderr  # what to do instead
    assert proxy.calls == []  # nothing was sent, not even the tag check
