"""Helpers for tests that publish releases to the loopback registry with the real ``rimthan-pack``.

Functions
    pack(*args, env=None) -> CompletedProcess the installed ``rimthan-pack`` console script (env: extra variables)
    push(release, ref, trust, *extra) -> str  push with --plain-http; returns the OCI manifest digest
    pull(ref, trust, out, *extra) -> CompletedProcess
    one_line_error(proc, code)                assert exit 1 and the two-line refusal naming ``code``
    tree_bytes(directory) -> dict[str, bytes] every regular file under a directory, by relative path
    rewrite(ref, edit)                        as an attacker with push rights: fetch, edit and PUT an OCI manifest
    add_blob(ref, title, data) -> layer       upload a blob and return its layer descriptor
    push_corrupt(release, ref, trust, title)  push a good release, then re-point one file's layer to flipped bytes
                                              (a consistent OCI artifact whose release does not verify)
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rimthan_packager.oci import push_release, put_manifest, upload_blob
from rimthan_workflow_registry.release import manifest_bytes, open_registry
from rimthan_workflow_registry.release.oci import fetch_manifest, parse_reference
from rimthan_workflow_registry.release.oci_artifact import FILE_LAYER_TYPE, OCI_MANIFEST_TYPE, TITLE
from rimthan_workflow_registry.release.trust import TrustStore

RIMTHAN_PACK = Path(sys.executable).parent / "rimthan-pack"


def pack(*args: str | Path, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(RIMTHAN_PACK), *(str(a) for a in args)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **env} if env is not None else None,
    )


def push(release: Path, ref: str, trust: Path, *extra: str) -> str:
    proc = pack("push", release, ref, "--trust", trust, "--plain-http", *extra)
    assert proc.returncode == 0, proc.stderr
    digest = proc.stdout.strip().splitlines()[-1]
    assert digest.startswith("sha256:") and len(digest) == 71, proc.stdout
    return digest


def pull(ref: str, trust: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return pack("pull", ref, "--trust", trust, "--out", out, "--plain-http", *extra)


def one_line_error(proc: subprocess.CompletedProcess[str], code: str) -> str:
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 2, proc.stderr
    assert lines[0].startswith(f"error: {code}: "), lines[0]
    assert lines[1].startswith("next: "), lines[1]
    assert "Traceback" not in proc.stderr
    return lines[0]


def tree_bytes(directory: Path) -> dict[str, bytes]:
    return {p.relative_to(directory).as_posix(): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def rewrite(ref: str, edit: Callable[[dict[str, Any]], None]) -> str:
    parsed = parse_reference(ref)
    registry = open_registry(parsed, plain_http=True)
    _, manifest = fetch_manifest(registry, parsed)
    edit(manifest)
    return put_manifest(registry, parsed, registry.get_container(parsed.target), manifest_bytes(manifest))


def put_raw_manifest(ref: str, data: bytes) -> None:
    """PUT ``data`` as the manifest at ``ref`` as given (bytes no JSON serialiser would write)."""
    parsed = parse_reference(ref)
    registry = open_registry(parsed, plain_http=True)
    url = f"{registry.prefix}://{registry.get_container(parsed.target).manifest_url()}"
    response = registry.do_request(url, "PUT", data=data, headers={"Content-Type": OCI_MANIFEST_TYPE})
    assert response.status_code in (200, 201), response.text


def add_blob(ref: str, title: str, data: bytes) -> dict[str, Any]:
    parsed = parse_reference(ref)
    registry = open_registry(parsed, plain_http=True)
    layer = {
        "mediaType": FILE_LAYER_TYPE,
        "digest": "sha256:" + hashlib.sha256(data).hexdigest(),
        "size": len(data),
        "annotations": {TITLE: title},
    }
    upload_blob(registry, parsed, registry.get_container(parsed.target), layer, data)
    return layer


def push_corrupt(release: Path, ref: str, trust: TrustStore, title: str) -> str:
    """Push ``release``, then swap the layer titled ``title`` for a copy with one byte flipped."""
    pushed = push_release(release, parse_reference(ref), trust, plain_http=True)
    data = bytearray((release / title).read_bytes())
    data[len(data) // 2] ^= 0x20
    flipped = add_blob(pushed.reference, title, bytes(data))

    def swap(manifest: dict[str, Any]) -> None:
        manifest["layers"] = [
            flipped if layer["annotations"][TITLE] == title else layer for layer in manifest["layers"]
        ]

    return rewrite(pushed.reference, swap)
