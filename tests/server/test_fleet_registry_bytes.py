"""A blob the registry serves wrong is the registry's fault, not the publish's (real registry, real process).

Found: a follower that was served other bytes for a release file than the OCI manifest names
(``oci_blob_mismatch``: the registry's storage altered, a proxy that mangles plain HTTP) remembered the refusal by
the OCI manifest digest for the process's life, as it does a release that does not verify. Once the registry was
repaired (the next step the refusal gives), the replica still never pulled the release, while a replica restarted
meanwhile did: the fleet split across versions until every replica was restarted, and a run started on the newer
release was refused by the replicas that did not hold it. The digest names the release's true bytes, so such a
refusal is no verdict on them: the tag is pulled again at the next refresh, its refusal said once.

Found too: ``GET /healthz`` of a replica that refused a publish said nothing of it (``sync_failed`` stays ``null``:
the registry was reached), so an operator polling the replicas after a push could not tell a refusal from a
replica that had not synced yet. It now lists the publishes the last sync refused (``refused``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from support.oci import push
from support.registry import LocalRegistry
from test_serve_full_disk import _healthz, _size, serving, wait_for


def test_a_release_whose_blob_the_registry_served_wrong_is_pulled_once_the_registry_is_repaired(
    tmp_path: Path, registry: LocalRegistry, packaged_releases: dict[str, Path], trust: Path
) -> None:
    ref = registry.ref("rimthan/registry-bytes")
    push(packaged_releases["1.2.0"], ref + ":1.2.0", trust)
    push(packaged_releases["1.3.0"], ref + ":1.3.0", trust)
    manifest = (packaged_releases["1.3.0"] / "manifest.json").read_bytes()
    stored = registry.blob_path(f"sha256:{hashlib.sha256(manifest).hexdigest()}")
    stored.write_bytes(manifest.replace(b"1.3.0", b"1.3.9"))  # the registry's storage altered
    log = tmp_path / "serve.log"
    with serving(log, "--releases-from", ref, "--plain-http", "--releases-dir", tmp_path / "releases",
                 "--trust", trust, "--state-dir", tmp_path / "state", "--log-level", "debug") as proc:  # fmt: skip
        refused = json.loads(wait_for(log, '"publish refused"', proc))
        assert refused["error"]["code"] == "oci_blob_mismatch", refused
        mark = _size(log)
        for _ in range(2):  # refreshes while the registry still serves the wrong bytes: said once
            wait_for(log, '"refresh done"', proc, mark)
            mark = _size(log)
        assert log.read_text("utf-8").count('"publish refused"') == 1
        health = _healthz(log)
        assert health["active"] == ["research-decision@1.2.0"] and health["sync_failed"] is None, health
        (said,) = health["refused"]  # why this replica serves the older release, for whoever polls it
        assert said["reference"] == refused["reference"] and said["code"] == "oci_blob_mismatch", health
        stored.write_bytes(manifest)  # the registry repaired
        wait_for(log, '"activated": ["research-decision@1.3.0"]', proc, mark)
        wait_for(log, '"refresh done"', proc, _size(log))
        health = _healthz(log)
        assert health["active"] == ["research-decision@1.3.0"] and "refused" not in health, health
