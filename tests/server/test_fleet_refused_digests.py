"""A follower remembers the publishes it refused by their OCI manifest digest (real registry, real process).

Found: a publish the follower refused was downloaded and verified again whenever its manifest came back under
a tag it had not seen it under (the same bytes pushed under another version, a tag deleted and put back),
reaching the same refusal each time, with one more ``"publish refused"`` line. A manifest digest names the same
bytes forever, so for the process's life (under one trust store) a digest refused once is neither downloaded
nor verified again, and its refusal is logged once; it is still reported in each refresh's ``rejected``. A new
digest is pulled and verified as ever, and nothing refused is ever activated.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

from rimthan_workflow_mcp.follow_memory import RefusedDigests
from rimthan_workflow_registry.errors import FailureCode, RegistryError
from rimthan_workflow_registry.release.trust import load_trust
from support.oci import push, push_corrupt, put_raw_manifest
from support.registry import LocalRegistry
from test_serve_full_disk import _healthz, _size, serving, wait_for

REFUSED = '"publish refused"'
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


def _manifest(registry: LocalRegistry, repository: str, tag: str) -> bytes:
    url = f"http://{registry.host}/v2/{repository}/manifests/{tag}"
    with urllib.request.urlopen(urllib.request.Request(url, headers={"Accept": OCI_MANIFEST}), timeout=30) as got:
        data: bytes = got.read()
        return data


def _lines(log: Path, after: int = 0) -> list[dict[str, Any]]:
    text = log.read_text("utf-8")[after:]
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def _blob_downloads(log: Path, after: int) -> list[str]:
    return [line["event"] for line in _lines(log, after) if "/blobs/sha256:" in str(line.get("event"))]


def _refreshes(log: Path, proc: Any, after: int, count: int) -> int:
    """Wait for ``count`` refreshes past byte ``after``; the log's size then."""
    for _ in range(count):
        wait_for(log, '"refresh done"', proc, after)
        after = _size(log)
    return after


def test_a_refused_digest_is_not_downloaded_or_verified_again_under_another_tag_and_a_new_one_is(
    tmp_path: Path, registry: LocalRegistry, packaged_releases: dict[str, Path], trust: Path
) -> None:
    repository = "rimthan/refused-digests"
    ref = registry.ref(repository)
    push(packaged_releases["1.2.0"], ref + ":1.2.0", trust)
    log = tmp_path / "serve.log"
    with serving(log, "--releases-from", ref, "--plain-http", "--releases-dir", tmp_path / "releases",
                 "--trust", trust, "--state-dir", tmp_path / "state", "--log-level", "debug") as proc:  # fmt: skip
        bad = push_corrupt(packaged_releases["1.3.0"], ref + ":1.3.0", load_trust(trust), "catalogue/catalogue.toml")
        wait_for(log, REFUSED, proc)
        mark = _refreshes(log, proc, _size(log), 1)
        put_raw_manifest(ref + ":1.3.1", _manifest(registry, repository, "1.3.0"))  # the same bytes, another tag
        after = _refreshes(log, proc, mark, 3)
        assert _blob_downloads(log, mark) == [], "the refused digest was downloaded again"
        last = [line for line in _lines(log, mark) if line["event"] == "refresh done"][-1]
        rejected = sorted(r["path"] for r in last["rejected"])
        assert rejected == [f"{ref}:1.3.0@{bad}", f"{ref}:1.3.1@{bad}"], last
        newer = push_corrupt(  # another file flipped: another digest
            packaged_releases["1.3.0"], ref + ":1.3.2", load_trust(trust), "catalogue/schemas/evidence-log.schema.json"
        )
        assert newer != bad
        wait_for(log, f":1.3.2@{newer}", proc, after)
        assert _blob_downloads(log, after), "a new digest is pulled"
        _refreshes(log, proc, _size(log), 1)
        assert _healthz(log)["active"] == ["research-decision@1.2.0"]  # never an accept
    said = [line["reference"] for line in _lines(log) if line["event"] == "publish refused"]
    assert said == [f"{ref}:1.3.0@{bad}", f"{ref}:1.3.2@{newer}"], said  # each digest's refusal said once


def test_a_refusal_for_the_tag_alone_is_kept_for_that_tag_and_a_trust_change_forgets_every_one() -> None:
    """The same manifest under its own version's tag may verify: ``oci_tag_mismatch`` is no verdict on its bytes."""
    memory = RefusedDigests()
    mismatch = RegistryError(FailureCode.OCI_TAG_MISMATCH, "the release is 1.3.0")
    corrupt = RegistryError(FailureCode.FILE_DIGEST_MISMATCH, "SHA-256 differs")
    memory.remember("sha256:aa", "1.4.0", mismatch)
    memory.remember("sha256:bb", "1.3.0", corrupt)
    assert memory.known("sha256:aa", "1.4.0") is mismatch
    assert memory.known("sha256:aa", "1.3.0") is None  # pulled and verified under its own tag
    assert memory.known("sha256:bb", "1.3.1") is corrupt  # the same bytes under any tag
    assert memory.known("sha256:cc", "1.3.0") is None  # a new digest
    memory.forget()
    assert memory.known("sha256:bb", "1.3.0") is None
