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

from rimthan_workflow_registry.release.oci_limits import MAX_LAYER_BYTES, MAX_LAYERS
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


def _warnings(stderr: str) -> list[tuple[str, str]]:
    """Each ``warning:`` line of ``stderr`` with the ``next:`` line after it."""
    lines = stderr.splitlines()
    return [(line, lines[i + 1]) for i, line in enumerate(lines) if line.startswith("warning: ")]


def test_check_and_build_say_a_file_no_pull_takes_before_the_release_is_signed(
    tmp_path: Path, keypair: KeyPair, trust: Path, registry: LocalRegistry
) -> None:
    """A 17 MB data file built, signed and verified without a word; only the push, after signing, refused it."""
    source = tmp_path / "source"
    shutil.copytree(packaged_source("1.3.0"), source)
    (source / "data").mkdir()
    big = source / "data" / "corpus.bin"
    big.write_bytes(b"\0" * (MAX_LAYER_BYTES + 1))
    said = f"warning: oci_artifact_invalid: {big}: is {MAX_LAYER_BYTES + 1} bytes; no OCI pull takes a release file"

    checked = pack("check", source)
    assert checked.returncode == 0, checked.stderr
    ((line, next_line),) = _warnings(checked.stderr)
    assert line.startswith(said) and line.endswith("so rimthan-pack push will refuse this release")
    assert next_line.startswith("next: to publish it through a registry, keep the source within the limits")

    built = pack("build", source, "--key", keypair.private_path, "--out", tmp_path / "releases")
    assert built.returncode == 0 and [w[0] for w in _warnings(built.stderr)] == [line]
    refused = pack(
        "push", tmp_path / "releases" / "research-decision-1.3.0", registry.ref(REPO), "--trust", trust, "--plain-http"
    )
    assert "not pushed: no pull would take this release" in one_line_error(refused, "oci_artifact_invalid")


def test_check_says_a_source_of_more_files_than_a_pull_takes(tmp_path: Path) -> None:
    source = _with_files(tmp_path, MAX_LAYERS + 1)
    checked = pack("check", source)
    assert checked.returncode == 0, checked.stderr
    ((line, _),) = _warnings(checked.stderr)
    assert line == (
        f"warning: oci_artifact_invalid: {source}: has {MAX_LAYERS + 1} files; no OCI pull takes a release of over "
        f"{MAX_LAYERS}, so rimthan-pack push will refuse this release"
    )


def test_a_source_within_every_pull_bound_builds_without_a_warning(tmp_path: Path, keypair: KeyPair) -> None:
    built = pack("build", packaged_source("1.3.0"), "--key", keypair.private_path, "--out", tmp_path / "releases")
    assert built.returncode == 0 and "warning:" not in built.stderr, built.stderr


def test_each_bound_past_is_one_unpullable_of_the_public_type_and_none_within() -> None:
    """The type lives in a module of its own, imported only for a release past a bound; the public name is it."""
    from rimthan_workflow_registry.release import OwnFiles, Unpullable, unpullable

    own = OwnFiles(manifest=2048, checksums=1024, signatures=1)

    identity = {"name": "research-decision", "version": "1.3.0"}
    assert unpullable({"a.md": MAX_LAYER_BYTES}, own, **identity) == []
    found = unpullable({"a.md": MAX_LAYER_BYTES + 1, **{f"f{i}": 1 for i in range(MAX_LAYERS)}}, own, **identity)
    assert [type(one) for one in found] == [Unpullable, Unpullable]
    assert found[0] == Unpullable(
        "a.md", f"is {MAX_LAYER_BYTES + 1} bytes; no OCI pull takes a release file over {MAX_LAYER_BYTES} bytes"
    )
    assert found[1].path is None and found[1].reason.startswith(f"has {MAX_LAYERS + 4} files;")
