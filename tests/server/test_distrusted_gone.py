"""What a server remembers of a release its trust store stopped vouching for, and when it forgets it.

A directory refused only as untrusted is remembered by the manifest its load read (never read again: a change on
disk between the refusal and a second read changed the advice); a release dropped as untrusted is forgotten once
its directory left the releases directory, so a run pinned to it is told to put it back. Real keys, real signed
releases, the installed ``rimthan-mcp serve`` over HTTP and ``kill -HUP``. Each refresh asks whether a remembered
directory still holds its manifest: the manifest is read again only when its stamp (``stat``) changed, the opens
counted with an audit hook (``os.open`` raises ``open``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from rimthan_host.harness import client_caller
from rimthan_workflow_mcp.loading import LoadedRelease
from rimthan_workflow_mcp.trust_refresh import Distrusted
from rimthan_workflow_registry.errors import FailureCode, RegistryError, ReleaseVerificationError
from rimthan_workflow_registry.release import MANIFEST_NAME, load_trust, verify_release
from rimthan_workflow_registry.run import CheckpointKeyring
from support.processes import HttpServer, http_server_process
from support.releases import KeyPair, build_release, make_keypair, packaged_source, trust_dir
from support.servers import RIMTHAN_MCP, harness, http_client_for, server_env

OPENED: list[str] = []  # the paths ``open`` events give while a test counts them
COUNTING: list[bool] = []


def _count(event: str, args: tuple[Any, ...]) -> None:
    if COUNTING and event == "open" and isinstance(args[0], (str, os.PathLike)):
        OPENED.append(os.fspath(args[0]))


sys.addaudithook(_count)


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("distrusted-gone")
    old, new = make_keypair(root / "keys", "old"), make_keypair(root / "keys", "new")
    return {
        "old": old,
        "new": new,
        "1.2.0-old": build_release(packaged_source("1.2.0"), root / "1.2.0-old", [old]),
        "1.3.0-new": build_release(packaged_source("1.3.0"), root / "1.3.0-new", [new]),
    }


def _refused(release: Path, key: KeyPair, where: Path) -> RegistryError:
    with pytest.raises(RegistryError) as refused:
        verify_release(release, load_trust(trust_dir(where, key)))
    return refused.value


def test_a_directory_refused_as_untrusted_is_remembered_by_the_manifest_its_load_read(
    signed: dict[str, Any], tmp_path: Path
) -> None:
    """The manifest deleted between the refusal and the remembering: the advice is the load's, not a re-read's."""
    release = shutil.copytree(signed["1.2.0-old"], tmp_path / "research-decision-1.2.0")
    digest = verify_release(release, load_trust(trust_dir(tmp_path / "old-trust", signed["old"]))).manifest_digest
    failure = _refused(release, signed["new"], tmp_path / "new-trust")
    assert failure.code == FailureCode.SIGNATURE_UNTRUSTED and failure.details["manifest_digest"] == digest
    (release / "manifest.json").unlink()  # the race: gone before it is remembered
    distrusted = Distrusted()
    distrusted.found_on_disk(release, failure)
    assert distrusted.holds(digest)


def test_only_a_failure_of_the_store_s_vouching_alone_is_remembered(signed: dict[str, Any], tmp_path: Path) -> None:
    """Fail closed: any other failure collected with it (or another code) leaves the directory "not held"."""
    release = signed["1.2.0-old"]
    failure = _refused(release, signed["new"], tmp_path / "trust")
    damaged = ReleaseVerificationError(FailureCode.FILE_DIGEST_MISMATCH, "changed", path=str(release))
    other = ReleaseVerificationError(FailureCode.SIGNATURE_INVALID, "bad", details=failure.details)
    told, mixed, invalid = Distrusted(), Distrusted(), Distrusted()
    told.found_on_disk(release, failure)
    mixed.found_on_disk(release, failure.with_also([damaged]))
    invalid.found_on_disk(release, other)
    digest = failure.details["manifest_digest"]
    assert told.holds(digest) and not mixed.holds(digest) and not invalid.holds(digest)


def _serve(tmp_path: Path, trust: Path) -> Any:
    args = ["serve", "--releases-dir", str(tmp_path / "releases"), "--trust", str(trust)]
    args += ["--state-dir", str(tmp_path / "state"), "--transport", "http", "--port", "0"]
    return http_server_process([RIMTHAN_MCP, *args], env=server_env())


def _refresh(server: HttpServer) -> list[str]:
    seen = len(server.lines)
    server.process.send_signal(signal.SIGHUP)
    server.wait_for('"refresh done"', after=seen)
    return [json.loads(line)["event"] for line in server.lines[seen:] if line.startswith("{")]


def test_a_release_dropped_as_untrusted_then_deleted_is_one_to_put_back(signed: dict[str, Any], tmp_path: Path) -> None:
    """A run pinned to 1.2.0 (the old key's), 1.3.0 (the new key's) activated, the old key removed: the run is
    refused as untrusted; once 1.2.0's directory is deleted, the next refresh forgets that, and the run is told
    to put the release back."""
    releases, trust = tmp_path / "releases", trust_dir(tmp_path / "trust", signed["old"])
    shutil.copytree(signed["1.2.0-old"], releases / "research-decision-1.2.0")

    async def pinned(server: HttpServer) -> tuple[dict[str, Any], dict[str, Any]]:
        async with http_client_for(server.url) as client:
            run = harness(client_caller(client), tmp_path / "project")
            result = await run.run(await run.start("research", initial_version="1.2.0"), until_step="interview")
            shutil.copytree(signed["1.3.0-new"], releases / "research-decision-1.3.0")
            trust_dir(trust, signed["new"])
            _refresh(server)
            (trust / signed["old"].public_path.name).unlink()
            assert "release no longer trusted; dropped" in _refresh(server)
            call = {"checkpoint": result.wire["checkpoint"], "confirmed_state": run.state.projection()}
            before = (await client.call_tool("rimthan.continue_workflow", call)).structured_content["error"]
            shutil.rmtree(releases / "research-decision-1.2.0")
            _refresh(server)
            after = (await client.call_tool("rimthan.continue_workflow", call)).structured_content["error"]
            return before, after

    with _serve(tmp_path, trust) as server:
        before, after = anyio.run(pinned, server)
    assert before["code"] == after["code"] == "pinned_release_unavailable", (before, after)
    assert before["details"]["untrusted"] is True, before
    assert "untrusted" not in after["details"], after
    assert "no longer vouches" not in after["message"] and "back" in after["message"] + after["next"], after


def _manifests_read(distrusted: Distrusted, serving: tuple[str, ...] = ()) -> int:
    """How many manifests one :meth:`Distrusted.forget_gone` opened."""
    OPENED.clear()
    COUNTING.append(True)
    try:
        distrusted.forget_gone(serving)
    finally:
        COUNTING.clear()
    return sum(1 for path in OPENED if Path(path).name == MANIFEST_NAME)


def test_a_directory_refused_as_untrusted_is_read_again_only_once_its_manifest_changed(
    signed: dict[str, Any], tmp_path: Path
) -> None:
    """Unchanged: not read again at each refresh. Replaced by another release's manifest (a rename): forgotten."""
    release = shutil.copytree(signed["1.2.0-old"], tmp_path / "research-decision-1.2.0")
    failure = _refused(release, signed["new"], tmp_path / "new-trust")
    digest = failure.details["manifest_digest"]
    distrusted = Distrusted()
    distrusted.found_on_disk(release, failure)
    assert _manifests_read(distrusted) == 1 and distrusted.holds(digest)
    assert _manifests_read(distrusted) == 0 and distrusted.holds(digest)
    other = tmp_path / "other-manifest.json"
    shutil.copyfile(signed["1.3.0-new"] / MANIFEST_NAME, other)
    other.replace(release / MANIFEST_NAME)
    assert _manifests_read(distrusted) == 1 and not distrusted.holds(digest)
    assert distrusted.manifests_read == {}  # nothing remembered: nothing kept of it


def test_a_release_dropped_as_untrusted_is_read_again_only_once_its_manifest_changed(
    signed: dict[str, Any], tmp_path: Path
) -> None:
    """Unchanged or still served: not read again. Written in place: read again and forgotten; deleted: forgotten."""
    trust = load_trust(trust_dir(tmp_path / "trust", signed["old"]))
    written, deleted = (shutil.copytree(signed["1.2.0-old"], tmp_path / name / "r") for name in ("written", "deleted"))
    told, gone = Distrusted(), Distrusted()
    told.remember(LoadedRelease(verify_release(written, trust), CheckpointKeyring.generate()))
    gone.remember(LoadedRelease(verify_release(deleted, trust), CheckpointKeyring.generate()))
    digest = verify_release(written, trust).manifest_digest
    assert _manifests_read(told) == 1 and told.holds(digest)
    assert _manifests_read(told) == 0 and _manifests_read(told, (digest,)) == 0
    manifest = written / MANIFEST_NAME
    manifest.write_bytes(manifest.read_bytes() + b" ")
    assert _manifests_read(told, (digest,)) == 0 and told.holds(digest)  # still served: kept, not read
    assert _manifests_read(told) == 1 and not told.holds(digest)
    assert _manifests_read(gone) == 1 and gone.holds(digest)
    shutil.rmtree(deleted)
    assert _manifests_read(gone) == 0 and not gone.holds(digest)
