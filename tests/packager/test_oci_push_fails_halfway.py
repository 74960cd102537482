"""A ``rimthan-pack push`` that fails half-way never tags a partial release (the real registry, behind a proxy).

The proxy (tests/support/hostile_registry.py ``forward``) passes every request
to a real docker-registry on loopback, except one blob upload, which it
refuses with HTTP 500 (the upload the push awaits first is held until then).
The push must stop with one line, start no upload after the failed one, and
put no manifest: the tag still names what it named before (or nothing), as
the registry itself says afterwards."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rimthan_workflow_registry.release import open_registry
from rimthan_workflow_registry.release.oci import parse_reference, tagged_manifest
from support.hostile_registry import HostileRegistry, forward, read_body, send_json
from support.oci import one_line_error, pack, push
from support.registry import LocalRegistry

REPO = "rimthan/research"
HELD_AFTER_FAILURE = 1.0  # time for the old code to start the uploads after the failed one; not asserted


def _an_upload_fails(upstream: LocalRegistry, release: Path) -> Callable[[Any, HostileRegistry], None]:
    """The upload of ``manifest.json`` (the first blob a push awaits that the registry lacks) is held until
    another upload has failed (HTTP 500), and a second more; every other request passes."""
    first = "sha256%3A" + hashlib.sha256((release / "manifest.json").read_bytes()).hexdigest()
    failing = threading.Lock()
    failed = threading.Event()

    def answer(handler: Any, registry: HostileRegistry) -> None:
        upload = handler.command == "PUT" and "/blobs/uploads/" in handler.path
        if upload and first in handler.path:
            failed.wait()
            registry.stopping.wait(HELD_AFTER_FAILURE)
        elif upload and failing.acquire(blocking=False):
            read_body(handler)
            send_json(handler, {"errors": [{"code": "UNKNOWN", "message": "disk full"}]}, status=500)
            failed.set()
            return
        forward(handler, registry, upstream.host)

    return answer


def _tagged(registry: LocalRegistry, tag: str) -> str | None:
    ref = parse_reference(registry.ref(REPO, tag))
    found = tagged_manifest(open_registry(ref, plain_http=True), ref)
    return None if found is None else found[0]


def _blob_checks(proxy: HostileRegistry) -> int:
    return sum(method == "HEAD" and "/blobs/" in path for method, path in proxy.calls)


def _manifests_put(proxy: HostileRegistry) -> list[str]:
    return [path for method, path in proxy.calls if method == "PUT" and "/manifests/" in path]


def test_a_failed_upload_leaves_the_tag_on_the_release_it_named(
    registry: LocalRegistry,
    hostile: Callable[..., HostileRegistry],
    packaged_releases: dict[str, Path],
    trust: Path,
) -> None:
    """``--replace-tag`` moves the tag only once every blob is in. The uploads were awaited in order: while the
    first was held, every other blob was still checked and sent after the second had failed. Now none starts
    after a failure."""
    before = push(packaged_releases["1.2.0"], registry.ref(REPO, "stable"), trust)
    release = packaged_releases["1.3.0"]
    proxy = hostile(_an_upload_fails(registry, release))
    blobs = 1 + sum(1 for p in release.rglob("*") if p.is_file())  # every file, and the empty config
    failed = pack("push", release, proxy.ref(REPO, "stable"), "--trust", trust, "--plain-http", "--replace-tag")
    assert "the registry answered HTTP 500" in one_line_error(failed, "oci_registry_error")
    assert _manifests_put(proxy) == []
    assert _tagged(registry, "stable") == before
    assert _blob_checks(proxy) < blobs, "uploads went on starting after one had failed"
    after = push(release, registry.ref(REPO, "stable"), trust, "--replace-tag")  # a later push completes it
    assert _tagged(registry, "stable") == after != before


def test_a_failed_first_push_leaves_no_tag(
    registry: LocalRegistry,
    hostile: Callable[..., HostileRegistry],
    packaged_releases: dict[str, Path],
    trust: Path,
) -> None:
    """A new tag appears only with its manifest, after every blob (this already held; kept as a guard)."""
    proxy = hostile(_an_upload_fails(registry, packaged_releases["1.3.0"]))
    failed = pack("push", packaged_releases["1.3.0"], proxy.ref(REPO), "--trust", trust, "--plain-http")
    one_line_error(failed, "oci_registry_error")
    assert _manifests_put(proxy) == []
    assert _tagged(registry, "1.3.0") is None
