"""Attacks through the OCI registry: each refused by the pull path with nothing left in the releases directory.

The attacker controls the registry (its storage directory, or push credentials)
but not the trusted signing key. Releases are pushed with the real
``push_release``; the attacker's artifacts are written with the same oras
client, or by editing the registry's storage behind its back.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from rimthan_packager.oci import push_release
from rimthan_workflow_registry.errors import FailureCode, RegistryError
from rimthan_workflow_registry.release import open_registry
from rimthan_workflow_registry.release.oci import (
    fetch_manifest,
    is_version_tag,
    parse_reference,
    pull_release,
    release_layers,
    version_tags,
)
from rimthan_workflow_registry.release.oci_artifact import TITLE
from rimthan_workflow_registry.release.oci_limits import MAX_LAYER_BYTES
from rimthan_workflow_registry.release.trust import TrustStore, load_trust
from support.oci import add_blob, one_line_error, pull, put_raw_manifest, rewrite
from support.registry import LocalRegistry, start_registry
from support.releases import build_release, make_keypair, packaged_source, trust_dir


@dataclass(frozen=True)
class World:
    registry: LocalRegistry
    trust_path: Path
    trust: TrustStore
    releases: dict[str, Path]
    untrusted_130: Path


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("registry-attacks")
    alice = make_keypair(root / "keys", "alice")
    mallory = make_keypair(root / "mallory-keys", "mallory")
    trust_path = trust_dir(root / "trust", alice)
    releases = {v: build_release(packaged_source(v), root / "built", [alice]) for v in ("1.2.0", "1.3.0")}
    untrusted = build_release(packaged_source("1.3.0"), root / "mallory-built", [mallory])
    registry = start_registry(root / "registry")
    try:
        yield World(registry, trust_path, load_trust(trust_path), releases, untrusted)
    finally:
        registry.stop()


def publish(world: World, repo: str, *versions: str) -> dict[str, str]:
    """Push the good releases to ``repo``; returns version -> OCI manifest digest."""
    ref = parse_reference(world.registry.ref(repo))
    return {v: push_release(world.releases[v], ref, world.trust, plain_http=True).oci_digest for v in versions}


def refused(world: World, ref: str, out: Path) -> FailureCode:
    with pytest.raises(RegistryError) as caught:
        pull_release(parse_reference(ref), world.trust, out, plain_http=True)
    assert not out.exists() or list(out.iterdir()) == [], list(out.iterdir())
    return caught.value.code


def catalogue_layer(manifest: dict[str, Any], index: int = 0) -> dict[str, Any]:
    layers: list[dict[str, Any]] = [
        layer for layer in manifest["layers"] if layer["annotations"][TITLE].startswith("catalogue/")
    ]
    return layers[index]


def test_a_blob_replaced_behind_the_registrys_back_is_refused(world: World, tmp_path: Path) -> None:
    publish(world, "attack/blob", "1.2.0")
    ref = world.registry.ref("attack/blob", "1.2.0")
    _, manifest = fetch_manifest(open_registry(parse_reference(ref), plain_http=True), parse_reference(ref))
    layer = catalogue_layer(manifest)
    blob = world.registry.blob_path(layer["digest"])
    original = blob.read_bytes()
    try:
        blob.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))  # same size, other bytes
        assert refused(world, ref, tmp_path / "same-size") is FailureCode.OCI_BLOB_MISMATCH
        blob.write_bytes(original + b"\n# appended by the attacker\n" * 4096)  # more bytes than advertised
        assert refused(world, ref, tmp_path / "longer") is FailureCode.OCI_BLOB_MISMATCH
        # and through the real command line: one line, exit 1, nothing installed (the --out it made taken back)
        one_line_error(pull(ref, world.trust_path, tmp_path / "cli"), "oci_blob_mismatch")
        assert not (tmp_path / "cli").exists()
    finally:
        blob.write_bytes(original)  # the other attacks share this registry


def test_a_manifest_repointed_to_another_releases_files_is_refused(world: World, tmp_path: Path) -> None:
    publish(world, "attack/repoint", "1.2.0", "1.3.0")
    ref130 = parse_reference(world.registry.ref("attack/repoint", "1.3.0"))
    _, newer = fetch_manifest(open_registry(ref130, plain_http=True), ref130)
    newer_files = [layer for layer in newer["layers"] if layer["annotations"][TITLE].startswith("catalogue/")]

    def repoint(manifest: dict[str, Any]) -> None:
        kept = [layer for layer in manifest["layers"] if not layer["annotations"][TITLE].startswith("catalogue/")]
        manifest["layers"] = kept + newer_files

    rewrite(world.registry.ref("attack/repoint", "1.2.0"), repoint)
    code = refused(world, world.registry.ref("attack/repoint", "1.2.0"), tmp_path / "out")
    assert code in {
        FailureCode.FILE_DIGEST_MISMATCH,
        FailureCode.FILE_SIZE_MISMATCH,
        FailureCode.FILE_MISSING,
        FailureCode.FILE_UNLISTED,
    }, code


def test_a_tag_moved_to_an_older_release_is_refused_as_rollback(world: World, tmp_path: Path) -> None:
    digests = publish(world, "attack/rollback", "1.2.0", "1.3.0")
    link = world.registry.tag_link("attack/rollback", "1.3.0")
    assert link.read_text() == digests["1.3.0"]
    link.write_text(digests["1.2.0"])  # behind the registry's back
    assert (
        refused(world, world.registry.ref("attack/rollback", "1.3.0"), tmp_path / "a") is FailureCode.OCI_TAG_MISMATCH
    )

    ref = parse_reference(world.registry.ref("attack/rollback2", "1.3.0"))  # with push rights and --replace-tag
    push_release(world.releases["1.3.0"], ref, world.trust, plain_http=True)
    push_release(world.releases["1.2.0"], ref, world.trust, plain_http=True, replace_tag=True)
    assert refused(world, str(ref), tmp_path / "b") is FailureCode.OCI_TAG_MISMATCH


def test_a_tag_moved_to_a_release_signed_by_an_untrusted_key_is_refused(world: World, tmp_path: Path) -> None:
    publish(world, "attack/untrusted", "1.3.0")
    mallory_trust = load_trust(Path(world.untrusted_130).parent.parent / "mallory-keys")
    ref = parse_reference(world.registry.ref("attack/untrusted", "1.3.0"))
    push_release(world.untrusted_130, ref, mallory_trust, plain_http=True, replace_tag=True)
    assert refused(world, str(ref), tmp_path / "out") is FailureCode.SIGNATURE_UNTRUSTED


def test_a_missing_layer_is_refused(world: World, tmp_path: Path) -> None:
    publish(world, "attack/missing", "1.2.0")
    rewrite(world.registry.ref("attack/missing", "1.2.0"), lambda m: m["layers"].remove(catalogue_layer(m, 1)))
    assert refused(world, world.registry.ref("attack/missing", "1.2.0"), tmp_path / "out") is FailureCode.FILE_MISSING


def test_an_extra_layer_is_refused(world: World, tmp_path: Path) -> None:
    publish(world, "attack/extra", "1.2.0")
    extra = add_blob(world.registry.ref("attack/extra", "x"), "catalogue/assets/extra.md", b"# not signed\n")
    rewrite(world.registry.ref("attack/extra", "1.2.0"), lambda m: m["layers"].append(extra))
    assert refused(world, world.registry.ref("attack/extra", "1.2.0"), tmp_path / "a") is FailureCode.FILE_UNLISTED

    escape = add_blob(world.registry.ref("attack/extra", "x"), "../../outside.md", b"# escape\n")
    rewrite(world.registry.ref("attack/extra", "1.2.0"), lambda m: m["layers"].append(escape))
    assert (
        refused(world, world.registry.ref("attack/extra", "1.2.0"), tmp_path / "b") is FailureCode.OCI_ARTIFACT_INVALID
    )
    assert not (tmp_path / "outside.md").exists()


def test_a_layer_digest_or_a_reference_ending_in_a_newline_is_refused(world: World) -> None:
    """re's "$" takes a trailing newline: digests and references are matched whole.

    The registry here will not store a manifest with such a digest (HTTP 500), so the pushed manifest is
    fetched and its layer digest changed in hand: the check a pull makes before it fetches any layer.
    """
    publish(world, "attack/newline", "1.2.0")
    ref = parse_reference(world.registry.ref("attack/newline", "1.2.0"))
    _, manifest = fetch_manifest(open_registry(ref, plain_http=True), ref)
    release_layers(manifest, "here")  # the control: the pushed manifest passes
    catalogue_layer(manifest)["digest"] += "\n"
    with pytest.raises(RegistryError) as caught:
        release_layers(manifest, "here")
    assert caught.value.code is FailureCode.OCI_ARTIFACT_INVALID, caught.value.one_line()
    assert "a layer is not a titled Rimthan release file" in caught.value.message
    with pytest.raises(RegistryError) as reference:
        parse_reference(world.registry.ref("attack/newline", "1.2.0") + "\n")
    assert reference.value.code is FailureCode.OCI_REFERENCE_INVALID
    assert is_version_tag("1.3.0") and not is_version_tag("1.3.0\n") and not is_version_tag("1.\u0663.0")


def test_a_manifest_with_a_key_written_twice_is_refused(world: World, tmp_path: Path) -> None:
    """Of a repeated key, json.loads took the last value while another client may take the first."""
    publish(world, "attack/twice", "1.2.0")
    ref = world.registry.ref("attack/twice", "1.2.0")
    parsed = parse_reference(ref)
    _, manifest = fetch_manifest(open_registry(parsed, plain_http=True), parsed)
    data = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    put_raw_manifest(ref, b'{"artifactType":"application/vnd.example.other",' + data[1:])
    assert refused(world, ref, tmp_path / "out") is FailureCode.OCI_ARTIFACT_INVALID


def test_a_layer_title_with_a_lone_surrogate_is_refused_in_one_line(world: World, tmp_path: Path) -> None:
    """Was a UnicodeEncodeError traceback from the installed ``rimthan-pack pull``: the title named its file."""
    publish(world, "attack/surrogate", "1.2.0")
    ref = world.registry.ref("attack/surrogate", "1.2.0")
    parsed = parse_reference(ref)
    _, manifest = fetch_manifest(open_registry(parsed, plain_http=True), parsed)
    catalogue_layer(manifest)["annotations"][TITLE] += "\ud800"
    put_raw_manifest(ref, json.dumps(manifest).encode("ascii"))  # the title as the escape \ud800
    out = tmp_path / "out"
    line = one_line_error(pull(ref, world.trust_path, out), "oci_artifact_invalid")
    assert "lone surrogate in path" in line, line
    assert not out.exists() or list(out.iterdir()) == [], list(out.iterdir())


def test_a_huge_layer_is_refused_before_it_is_downloaded(world: World, tmp_path: Path) -> None:
    publish(world, "attack/huge", "1.2.0")
    huge = add_blob(world.registry.ref("attack/huge", "x"), "catalogue/assets/huge.md", b"x" * (MAX_LAYER_BYTES + 1))
    rewrite(world.registry.ref("attack/huge", "1.2.0"), lambda m: m["layers"].append(huge))
    assert (
        refused(world, world.registry.ref("attack/huge", "1.2.0"), tmp_path / "out") is FailureCode.OCI_ARTIFACT_INVALID
    )


def test_an_artifact_of_another_type_is_refused(world: World, tmp_path: Path) -> None:
    publish(world, "attack/type", "1.2.0")

    def retype(manifest: dict[str, Any]) -> None:
        manifest["artifactType"] = "application/vnd.example.other"

    rewrite(world.registry.ref("attack/type", "1.2.0"), retype)
    assert (
        refused(world, world.registry.ref("attack/type", "1.2.0"), tmp_path / "out") is FailureCode.OCI_ARTIFACT_INVALID
    )


def test_a_digest_reference_the_registry_answers_with_other_bytes_is_refused(world: World, tmp_path: Path) -> None:
    digests = publish(world, "attack/digest", "1.2.0")
    manifest_blob = world.registry.blob_path(digests["1.2.0"])
    data = json.loads(manifest_blob.read_bytes())
    data["annotations"]["note"] = "swapped"
    original = manifest_blob.read_bytes()
    manifest_blob.write_bytes(json.dumps(data).encode())
    ref = f"{world.registry.ref('attack/digest')}@{digests['1.2.0']}"
    assert refused(world, ref, tmp_path / "out") is FailureCode.OCI_BLOB_MISMATCH
    manifest_blob.write_bytes(original)


class _TagLister(http.server.BaseHTTPRequestHandler):
    """A registry that breaks the distribution spec: its tag list holds a "version" of 5,000 digits."""

    TAGS = ["1.2.0", "9" * 5000 + ".0.0", "1.10.0"]

    def do_GET(self) -> None:  # noqa: N802 (the http.server hook's name)
        body = json.dumps({"name": "attack/tags", "tags": self.TAGS}).encode() if "/tags/list" in self.path else b"{}"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_a_listed_tag_longer_than_a_tag_can_be_is_not_taken_for_a_version() -> None:
    """A tag is at most 128 characters (OCI distribution spec); a longer "version" in a registry's tag list
    raised ValueError from the version sort (Python reads at most 4,300 digits), stopping a follower's sync."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _TagLister)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        ref = parse_reference(f"oci://127.0.0.1:{server.server_port}/attack/tags")
        assert version_tags(open_registry(ref, plain_http=True), ref) == ["1.2.0", "1.10.0"]
    finally:
        server.shutdown()
        server.server_close()
