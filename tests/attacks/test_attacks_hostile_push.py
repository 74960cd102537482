"""Attacks on ``rimthan-pack push`` by a registry that does not play fair (tests/support/hostile_registry.py).

A release engineer pushes to a registry that may be compromised, or reached
over plain HTTP through a man in the middle. Each request of a push had its
own 120 s deadline, but the push had none: a registry answering each request
just inside it held a push for hours (2 requests a blob, 4 at a time, up to
4,096 blobs), and one that held a request was waited on for that request's
whole deadline. And oras sent each blob, with the registry's token or (asked
again) the engineer's credentials, to whatever ``Location`` the registry
named for the upload session, and requests sent it again wherever the
registry redirected the upload. Each case now ends with ``oci_registry_error``
by the push deadline (shortened for the test), the credentials and the blobs
never leave the registry's host, and no manifest is put: the tag is never
moved to a partial release."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rimthan_packager import oci as pack_oci
from rimthan_packager.oci import push_release
from rimthan_workflow_registry.errors import QUOTE_MAX_CHARS, FailureCode
from rimthan_workflow_registry.release import oci_bounds
from rimthan_workflow_registry.release.oci import parse_reference
from rimthan_workflow_registry.release.oci_artifact import DIGEST_ANNOTATION
from rimthan_workflow_registry.release.trust import TrustStore, load_trust
from support.hostile_registry import (
    TOKEN,
    HostileRegistry,
    drip_headers,
    ends,
    guarded_by,
    hold,
    read_body,
    read_slowly,
    refused_code,
    send_drip,
    send_flood,
    send_json,
    send_raw,
)

READ_AT_MOST = 48 * 1024 * 1024  # the 4 MiB limit plus what the kernel's socket buffers hold
SESSION = "/v2/attack/repo/blobs/uploads/session-1"
IN_TIME = 0.5  # of a request's deadline: each answer comes well in time
Upload = Callable[[Any, HostileRegistry], None]


def _registry(on_post: Upload, on_put: Upload) -> Callable[[Any, HostileRegistry], None]:
    """A registry that holds no blob and no tag, answering upload sessions (POST) and uploads (PUT) as told."""

    def answer(handler: Any, registry: HostileRegistry) -> None:
        if handler.command == "POST":
            on_post(handler, registry)
        elif handler.command == "PUT" and "/blobs/" in handler.path:
            on_put(handler, registry)
        elif handler.command == "PUT":
            send_json(handler, {}, status=201)  # a manifest: the test checks none was put
        else:
            send_json(handler, {}, status=404)

    return answer


def _session(handler: Any, registry: HostileRegistry) -> None:
    send_raw(handler, b"", status=202, headers={"Location": SESSION})


def _stored(handler: Any, registry: HostileRegistry) -> None:
    read_body(handler)
    send_raw(handler, b"", status=201)


def _after_body(then: Upload) -> Upload:
    def upload(handler: Any, registry: HostileRegistry) -> None:
        read_body(handler)
        then(handler, registry)

    return upload


HOLDS: dict[str, tuple[Upload, Upload]] = {
    "never answers the upload session": (hold, _stored),
    "drips the upload session's headers": (lambda h, r: drip_headers(h, r, every=0.5), _stored),
    "never answers after the body": (_session, _after_body(hold)),
    "takes the body a byte at a time": (_session, lambda h, r: read_slowly(h, r, every=0.5)),
    "drips the upload's headers": (_session, _after_body(lambda h, r: drip_headers(h, r, every=0.5))),
    "drips the upload's answer": (_session, _after_body(lambda h, r: send_drip(h, r, every=0.5))),
}


def _push(registry: HostileRegistry, release: Path, trust: TrustStore) -> Any:
    ref = parse_reference(registry.ref("attack/repo"))
    return ends(lambda: push_release(release, ref, trust, plain_http=True))


def _manifests_put(registry: HostileRegistry) -> list[str]:
    return [path for method, path in registry.calls if method == "PUT" and "/manifests/" in path]


@pytest.fixture
def trusted(trust: Path) -> TrustStore:
    return load_trust(trust)


@pytest.mark.parametrize("how", sorted(HOLDS))
def test_a_push_ends_by_its_deadline_however_the_registry_holds_it(
    hostile: Callable[..., HostileRegistry],
    signed_release: Path,
    trusted: TrustStore,
    monkeypatch: pytest.MonkeyPatch,
    how: str,
) -> None:
    """A held request ended only at its own 120 s deadline, and the uploads running beside it at theirs; the
    push's one deadline (shortened for the test) now ends them all."""
    monkeypatch.setattr(pack_oci, "PUSH_DEADLINE", 2.0, raising=False)
    registry = hostile(_registry(*HOLDS[how]))
    outcome = _push(registry, signed_release, trusted)
    assert refused_code(outcome) is FailureCode.OCI_REGISTRY_ERROR, outcome
    assert "took longer than the deadline" in outcome.message
    assert _manifests_put(registry) == []


def _just_in_time(then: Upload) -> Upload:
    def answer(handler: Any, registry: HostileRegistry) -> None:
        registry.stopping.wait(IN_TIME * oci_bounds.REQUEST_DEADLINE)
        then(handler, registry)

    return answer


def test_a_registry_answering_each_request_just_in_time_cannot_hold_a_push_for_hours(
    hostile: Callable[..., HostileRegistry], signed_release: Path, trusted: TrustStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each request answered just inside its own deadline: every upload succeeded, slowly, and the push went on
    for 2 requests a blob, 4 blobs at a time, up to 4,096 blobs (about 68 hours at 120 s a request). Here a
    request's deadline is 2 s (each answer comes after 1 s) and the push's 3 s: the old code pushed the whole
    release, every blob and the manifest."""
    monkeypatch.setattr(oci_bounds, "REQUEST_DEADLINE", 2.0)
    monkeypatch.setattr(pack_oci, "PUSH_DEADLINE", 3.0, raising=False)
    registry = hostile(_registry(_just_in_time(_session), _just_in_time(_stored)))
    outcome = _push(registry, signed_release, trusted)
    assert refused_code(outcome) is FailureCode.OCI_REGISTRY_ERROR, outcome
    assert "took longer than the deadline" in outcome.message
    assert _manifests_put(registry) == []


def _elsewhere(handler: Any, registry: HostileRegistry) -> None:
    """Another host that asks for credentials the way the registry did (Basic), and keeps what it gets."""
    read_body(handler)
    send_json(handler, {}, status=401, headers={"WWW-Authenticate": 'Basic realm="elsewhere"'})


@pytest.fixture
def credentials(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("RIMTHAN_REGISTRY_USERNAME", "alice")
    monkeypatch.setenv("RIMTHAN_REGISTRY_PASSWORD", "secret")
    return "Basic " + base64.b64encode(b"alice:secret").decode()


@pytest.mark.parametrize("scheme", ["Bearer", "Basic"])
def test_an_upload_session_on_another_host_is_refused_and_sent_nothing(
    hostile: Callable[..., HostileRegistry], signed_release: Path, trusted: TrustStore, credentials: str, scheme: str
) -> None:
    """oras PUT each blob to the session ``Location`` wherever it pointed: with the registry's token, or, asked
    there, with the engineer's Basic credentials."""
    elsewhere = hostile(_elsewhere)
    session = f"http://{elsewhere.host}/v2/attack/repo/blobs/uploads/stolen"

    def away(handler: Any, registry: HostileRegistry) -> None:
        send_raw(handler, b"", status=202, headers={"Location": session})

    registry = hostile(guarded_by(scheme, _registry(away, _stored)))
    outcome = _push(registry, signed_release, trusted)
    sent = [headers.get("Authorization") for _, headers in elsewhere.seen]
    assert f"Bearer {TOKEN}" not in sent and credentials not in sent
    assert elsewhere.seen == []
    assert refused_code(outcome) is FailureCode.OCI_REGISTRY_ERROR, outcome
    assert "upload session is on another host" in outcome.message
    assert _manifests_put(registry) == []


@pytest.mark.parametrize("status", [307, 308])
@pytest.mark.parametrize("method", ["POST", "PUT"])
def test_an_upload_redirected_to_another_host_is_refused_and_sends_it_nothing(
    hostile: Callable[..., HostileRegistry],
    signed_release: Path,
    trusted: TrustStore,
    credentials: str,
    method: str,
    status: int,
) -> None:
    """requests followed a 307/308 to wherever the registry pointed and sent the blob there again (only the
    ``Authorization`` header was dropped; the other host then asked for credentials itself). A redirect of an
    upload (the session's POST, the blob's PUT) to another host is now refused before anything is sent there,
    naming that host; redirects of blob downloads to storage stay followed (test_oci_redirects.py)."""
    elsewhere = hostile(_elsewhere)

    def redirect(handler: Any, registry: HostileRegistry) -> None:
        read_body(handler)
        send_raw(handler, b"", status=status, headers={"Location": f"http://{elsewhere.host}{handler.path}"})

    on = (redirect, _stored) if method == "POST" else (_session, redirect)
    registry = hostile(guarded_by("Bearer", _registry(*on)))
    outcome = _push(registry, signed_release, trusted)
    assert elsewhere.seen == [], f"{len(elsewhere.seen)} requests went to the other host"
    assert refused_code(outcome) is FailureCode.OCI_REGISTRY_ERROR, outcome
    assert f"redirected an upload ({method}) to another host; not followed" in outcome.message
    assert elsewhere.host in outcome.message
    assert _manifests_put(registry) == []


def test_an_upload_session_that_redirects_forever_is_refused(
    hostile: Callable[..., HostileRegistry], signed_release: Path, trusted: TrustStore
) -> None:
    """At most 5 redirects (this already held; kept as a guard)."""

    def loop(handler: Any, registry: HostileRegistry) -> None:
        send_raw(handler, b"", status=307, headers={"Location": f"{handler.path.partition('?')[0]}?again"})

    registry = hostile(_registry(loop, _stored))
    outcome = _push(registry, signed_release, trusted)
    assert refused_code(outcome) is FailureCode.OCI_REGISTRY_ERROR, outcome
    assert "redirects" in outcome.message
    assert _manifests_put(registry) == []


@pytest.mark.parametrize("where", ["POST", "PUT"])
def test_a_huge_answer_to_an_upload_is_cut_off_while_read(
    hostile: Callable[..., HostileRegistry], signed_release: Path, trusted: TrustStore, where: str
) -> None:
    """An upload's answer is read whole only up to 4 MiB (this already held; kept as a guard). One answer floods,
    the others are refused at once: ``sent`` then counts one answer."""
    first = threading.Lock()

    def flood(handler: Any, registry: HostileRegistry) -> None:
        read_body(handler)
        if first.acquire(blocking=False):
            send_flood(handler, registry, 128 * 1024 * 1024)
        else:
            send_json(handler, {}, status=500)

    on = (flood, _stored) if where == "POST" else (_session, flood)
    registry = hostile(_registry(*on))
    outcome = _push(registry, signed_release, trusted)
    assert refused_code(outcome) is FailureCode.OCI_REGISTRY_ERROR, outcome
    assert registry.sent < READ_AT_MOST, f"read {registry.sent} bytes of the answer"
    assert _manifests_put(registry) == []


def test_an_upload_session_refused_with_a_long_error_is_said_in_one_short_line(
    hostile: Callable[..., HostileRegistry], signed_release: Path, trusted: TrustStore
) -> None:
    """oras raised ``Issue retrieving session url: <the registry's whole JSON answer>``: the refusal's one line
    carried up to 4 MiB the registry chose."""
    error = {"errors": [{"code": "DENIED", "message": "x" * 100_000}]}
    registry = hostile(_registry(lambda h, r: send_json(h, error, status=500), _stored))
    outcome = _push(registry, signed_release, trusted)
    assert refused_code(outcome) is FailureCode.OCI_REGISTRY_ERROR, outcome
    assert "xxxx" not in outcome.message and len(outcome.message) < 300, outcome.message[:300]
    assert "HTTP 500" in outcome.message


def test_an_upload_session_on_another_host_is_quoted_cut(
    hostile: Callable[..., HostileRegistry], signed_release: Path, trusted: TrustStore
) -> None:
    """Old code: the refusal quoted the session's ``Location`` whole (here 60 KiB, with a terminal escape)."""
    session = "http://elsewhere.example/" + "s" * 60_000 + "\x1b[2J"

    def away(handler: Any, registry: HostileRegistry) -> None:
        send_raw(handler, b"", status=202, headers={"Location": session})

    outcome = _push(hostile(_registry(away, _stored)), signed_release, trusted)
    assert refused_code(outcome) is FailureCode.OCI_REGISTRY_ERROR, outcome
    assert len(outcome.message) < 2 * QUOTE_MAX_CHARS + 200 and "\x1b" not in outcome.message, len(outcome.message)
    assert "upload session is on another host; not followed" in outcome.message
    assert "chars, cut]" in outcome.message


def _tag_held_by(claim: str) -> Callable[[Any, HostileRegistry], None]:
    """A registry whose tag names an artifact claiming the release digest ``claim``."""
    manifest = json.dumps({"schemaVersion": 2, "annotations": {DIGEST_ANNOTATION: claim}}).encode()

    def answer(handler: Any, registry: HostileRegistry) -> None:
        if handler.command == "GET" and "/manifests/" in handler.path:
            send_raw(handler, manifest)
        else:
            send_json(handler, {}, status=404)

    return answer


def _manifest_stored_as(digest: str) -> Callable[[Any, HostileRegistry], None]:
    """A registry that takes every blob, then says it stored the manifest under ``digest``."""
    blobs = _registry(_session, _stored)

    def answer(handler: Any, registry: HostileRegistry) -> None:
        if handler.command == "PUT" and "/manifests/" in handler.path:
            read_body(handler)
            send_raw(handler, b"", status=201, headers={"Docker-Content-Digest": digest})
        else:
            blobs(handler, registry)

    return answer


@pytest.mark.parametrize(
    ("answer", "code"),
    [(_tag_held_by, FailureCode.OCI_TAG_EXISTS), (_manifest_stored_as, FailureCode.OCI_BLOB_MISMATCH)],
    ids=["the tag's claimed digest", "the stored manifest's digest"],
)
def test_a_digest_the_registry_names_is_quoted_cut(
    hostile: Callable[..., HostileRegistry],
    signed_release: Path,
    trusted: TrustStore,
    answer: Callable[[str], Callable[[Any, HostileRegistry], None]],
    code: FailureCode,
) -> None:
    """Old code: the refusal quoted what the registry named as a digest whole (here 60 KiB)."""
    outcome = _push(hostile(answer("sha256:" + "d" * 60_000 + "\x1b[2J")), signed_release, trusted)
    assert refused_code(outcome) is code, outcome
    assert len(outcome.message) < 2 * QUOTE_MAX_CHARS + 200 and "\x1b" not in outcome.message, len(outcome.message)
    assert "chars, cut]" in outcome.message
