"""Attacks on the puller's availability by a registry that does not play fair (tests/support/hostile_registry.py).

Signatures protect a release's content, not the time and memory of whoever
pulls it. Each case is refused with a failure code, within a bounded wait,
having read a bounded number of bytes; a call that would not end is run in a
thread and reported as such, so no case can hang the suite.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rimthan_workflow_mcp import follow
from rimthan_workflow_registry.errors import FailureCode
from rimthan_workflow_registry.release import oci, open_registry
from rimthan_workflow_registry.release.oci import fetch_manifest, parse_reference, version_tags
from rimthan_workflow_registry.release.oci_artifact import ARTIFACT_TYPE, MANIFEST_LAYER_TYPE, OCI_MANIFEST_TYPE, TITLE
from rimthan_workflow_registry.release.oci_limits import MAX_LAYER_BYTES
from rimthan_workflow_registry.release.trust import load_trust
from support.hostile_registry import (
    HostileRegistry,
    drip_headers,
    endless_pages,
    ends,
    hold,
    refused_code,
    send_drip,
    send_flood,
    send_json,
    send_raw,
)
from support.registry import make_tls
from support.releases import make_keypair, trust_dir

FLOOD = 128 * 1024 * 1024
READ_AT_MOST = 48 * 1024 * 1024  # the 4 MiB limit plus what the kernel's socket buffers hold
MAX_TAG_PAGES = 1000
MAX_TAG_LIST_BYTES = 32 * 1024 * 1024


def tags_of(registry: HostileRegistry) -> Any:
    ref = parse_reference(registry.ref("attack/repo"))
    return ends(lambda: version_tags(open_registry(ref, plain_http=True), ref))


def test_a_tag_list_that_pages_forever_is_cut_off(hostile: Callable[..., HostileRegistry]) -> None:
    """oras followed ``Link: rel="next"`` with no bound: a sync never ended, its tag list growing."""
    registry = hostile(lambda handler, _: endless_pages(handler))
    outcome = tags_of(registry)
    assert refused_code(outcome) is FailureCode.OCI_REGISTRY_ERROR
    assert f"runs past {MAX_TAG_PAGES} pages" in outcome.message
    assert len(registry.seen) == MAX_TAG_PAGES


def test_a_tag_list_of_long_tags_is_cut_off_by_its_size(hostile: Callable[..., HostileRegistry]) -> None:
    """1,000 pages of nearly 4 MiB each would have held 4 GB of tags in memory within the page bound."""
    registry = hostile(lambda handler, _: endless_pages(handler, padding=MAX_TAG_LIST_BYTES // 8 - 1024))
    outcome = tags_of(registry)
    assert refused_code(outcome) is FailureCode.OCI_REGISTRY_ERROR
    assert f"runs past {MAX_TAG_LIST_BYTES} bytes" in outcome.message
    assert len(registry.seen) == 9


def test_a_tag_page_nested_deeper_than_the_json_decoder_goes_is_refused(
    hostile: Callable[..., HostileRegistry],
) -> None:
    """RecursionError is no transport error: a sync raised it past the follower (a traceback)."""
    outcome = tags_of(hostile(lambda handler, _: send_raw(handler, b"[" * 100_000)))
    assert refused_code(outcome) is FailureCode.OCI_REGISTRY_ERROR


def test_a_next_tag_page_on_another_host_is_not_followed_with_the_token(
    hostile: Callable[..., HostileRegistry],
) -> None:
    """oras put the registry's bearer token into its request for the next page, wherever the link pointed."""
    elsewhere = hostile(lambda handler, _: send_json(handler, {"tags": ["9.9.9"]}))

    def answer(handler: Any, registry: HostileRegistry) -> None:
        if handler.path.startswith("/token"):
            send_json(handler, {"token": "secret-token"})
        elif handler.headers.get("Authorization") != "Bearer secret-token":
            challenge = f'Bearer realm="http://{registry.host}/token",service="x",scope="repository:attack/repo:pull"'
            send_json(handler, {}, status=401, headers={"WWW-Authenticate": challenge})
        else:
            link = f'<http://{elsewhere.host}/v2/attack/repo/tags/list?last=1.2.0>; rel="next"'
            send_json(handler, {"tags": ["1.2.0"]}, headers={"Link": link})

    outcome = tags_of(hostile(answer))
    assert refused_code(outcome) is FailureCode.OCI_REGISTRY_ERROR
    assert "on another host" in outcome.message
    assert elsewhere.seen == []


def test_a_tag_list_that_is_not_an_object_is_refused(hostile: Callable[..., HostileRegistry]) -> None:
    """A JSON list where the tag page's object belongs raised AttributeError inside oras (a traceback)."""
    outcome = tags_of(hostile(lambda handler, _: send_json(handler, ["1.2.0"])))
    assert refused_code(outcome) is FailureCode.OCI_REGISTRY_ERROR


def _flood_at(where: str) -> Callable[[Any, HostileRegistry], None]:
    def answer(handler: Any, registry: HostileRegistry) -> None:
        if where in handler.path:
            send_flood(handler, registry, FLOOD)
        elif where == "/token":
            challenge = f'Bearer realm="http://{registry.host}/token",service="x"'
            send_json(handler, {}, status=401, headers={"WWW-Authenticate": challenge})
        else:
            send_json(handler, {}, status=404)

    return answer


@pytest.mark.parametrize(
    ("where", "code"),
    [
        ("/tags/list", FailureCode.OCI_REGISTRY_ERROR),
        ("/manifests/", FailureCode.OCI_ARTIFACT_INVALID),
        ("/token", FailureCode.OCI_REGISTRY_ERROR),
    ],
)
def test_an_answer_larger_than_any_registry_sends_is_cut_off_while_read(
    hostile: Callable[..., HostileRegistry], where: str, code: FailureCode
) -> None:
    """A tag page, a manifest or a token was read whole (``.json()``, ``.content``) before any size check."""
    registry = hostile(_flood_at(where))
    ref = parse_reference(registry.ref("attack/repo", "1.2.0"))
    call = version_tags if where != "/manifests/" else fetch_manifest
    outcome = ends(lambda: call(open_registry(ref, plain_http=True), ref))
    assert refused_code(outcome) is code, outcome
    assert registry.sent < READ_AT_MOST, f"read {registry.sent} bytes of the answer"


def _drip_release(handler: Any, registry: HostileRegistry) -> None:
    """A one-layer release artifact whose layer (declared at the size limit) arrives a byte at a time."""
    layer = {"mediaType": MANIFEST_LAYER_TYPE, "digest": "sha256:" + "0" * 64, "size": MAX_LAYER_BYTES}
    manifest = {"mediaType": OCI_MANIFEST_TYPE, "artifactType": ARTIFACT_TYPE, "layers": [layer]}
    layer["annotations"] = {TITLE: "manifest.json"}
    if "/tags/list" in handler.path:
        send_json(handler, {"tags": ["1.2.0"]})
    elif "/manifests/" in handler.path:
        send_json(handler, manifest, headers={"Content-Type": OCI_MANIFEST_TYPE})
    else:
        send_drip(handler, registry, every=0.5)


_DRIPS: dict[str, Callable[[Any, HostileRegistry], None]] = {
    "tag list": lambda handler, registry: send_drip(handler, registry, every=0.5),
    "headers": lambda handler, registry: drip_headers(handler, registry, every=0.5),
    "layer": _drip_release,
}


@pytest.mark.parametrize("answer", sorted(_DRIPS))
def test_a_registry_that_drips_does_not_hold_the_followers_lock(
    hostile: Callable[..., HostileRegistry], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: str
) -> None:
    """requests' timeout bounds the wait for the next byte, not a request: one byte each half second (of a
    body, a layer, or the headers) held a sync, and the follower's lock with it, for ever. The sync's
    deadline is shortened for the test."""
    monkeypatch.setattr("rimthan_workflow_mcp.follower.SYNC_DEADLINE", 2.0)  # where the sync reads it
    registry = hostile(_DRIPS[answer])
    trust = load_trust(trust_dir(tmp_path / "trust", make_keypair(tmp_path / "keys", "alice")))
    (tmp_path / "releases").mkdir()
    follower = follow.RegistryFollower(
        parse_reference(registry.ref("attack/repo")), trust, tmp_path / "releases", plain_http=True
    )
    assert ends(follower.sync) == ()
    assert ends(follower.sync) == ()  # the lock was released: the next refresh syncs again
    assert sum("/blobs/" in path for path, _ in registry.seen) == (2 if answer == "layer" else 0)
    assert list((tmp_path / "releases").iterdir()) == []


def test_a_tls_registry_cannot_send_the_credentials_to_a_plain_http_token_service(
    hostile: Callable[..., HostileRegistry], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """oras sent the registry's credentials to whatever realm its Bearer challenge named, http:// included:
    in the clear, past the TLS the operator asked for."""
    tls = make_tls(tmp_path / "tls")
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(tls.ca_cert))
    monkeypatch.setenv("RIMTHAN_REGISTRY_USERNAME", "alice")
    monkeypatch.setenv("RIMTHAN_REGISTRY_PASSWORD", "secret")
    plain = hostile(lambda handler, _: send_json(handler, {"token": "t"}))
    challenge = f'Bearer realm="http://{plain.host}/token",service="x"'
    registry = hostile(lambda handler, _: send_json(handler, {}, 401, {"WWW-Authenticate": challenge}), tls)
    ref = parse_reference(registry.ref("attack/repo"))
    outcome = ends(lambda: version_tags(open_registry(ref), ref))
    assert [headers.get("Authorization") for _, headers in plain.seen] == []
    assert refused_code(outcome) is FailureCode.OCI_REGISTRY_ERROR, outcome
    assert "plain HTTP" in outcome.message


def _held_manifest(handler: Any, registry: HostileRegistry) -> None:
    if "/manifests/" in handler.path:
        hold(handler, registry)
    else:
        send_json(handler, {}, status=404)


_PULL_HOLDS: dict[str, Callable[[Any, HostileRegistry], None]] = {
    "every layer drips": _drip_release,
    "the manifest's headers drip": lambda handler, registry: drip_headers(handler, registry, every=0.5),
    "the manifest is never answered": _held_manifest,
}


@pytest.mark.parametrize("how", sorted(_PULL_HOLDS))
def test_a_pull_ends_by_its_deadline_however_many_layers_drip(
    hostile: Callable[..., HostileRegistry], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """Each request had its own deadline: 4,096 layers dripping just inside it held ``rimthan-pack pull`` for days.
    A pull's registry part now has one deadline (shortened for the test); nothing is left behind. The manifest
    cases are kept as guards: the deadline holds from the pull's first request."""
    monkeypatch.setattr(oci, "PULL_DEADLINE", 2.0)
    registry = hostile(_PULL_HOLDS[how])
    trust = load_trust(trust_dir(tmp_path / "trust", make_keypair(tmp_path / "keys", "alice")))
    ref = parse_reference(registry.ref("attack/repo", "1.2.0"))
    outcome = ends(lambda: oci.pull_release(ref, trust, tmp_path / "out", plain_http=True))
    assert refused_code(outcome) is FailureCode.OCI_REGISTRY_ERROR, outcome
    assert "took longer than the deadline" in outcome.message
    assert list((tmp_path / "out").iterdir()) == []
