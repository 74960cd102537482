"""An upload's body goes to the registry in pieces: a slow but honest registry takes it, a stalled one is cut.

urllib3 sent a request's body in one ``sendall``, which the socket timeout
(``REQUEST_TIMEOUT``, 30 s) bounds as a whole: a blob had to be taken within
30 s, whatever the push's deadline. A release file is at most 1 MiB (a
catalogue file) and a push runs four uploads at once, so on a 150 KB/s uplink
each took 28 of its 30 s, and on a slower one failed. The body now goes in
64 KiB pieces (urllib3 hands the socket 16 KiB at a time), each within the
timeout, the whole by the push's deadline.

The rates are scaled here: the timeout is 2 s, and the blob 16 MiB, taken at
4 MiB/s. The loopback kernel buffers about 2.5 MiB of a body whatever the
reader does: the blob must be well over that for the rate to matter, and the
reader fast enough to drain it within the timeout the answer is awaited for.
The honest registry is a real docker-registry behind a proxy that reads slowly.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import pytest
from rimthan_packager.oci import upload_blob
from rimthan_workflow_registry.canonical import digest_bytes
from rimthan_workflow_registry.errors import FailureCode
from rimthan_workflow_registry.release import oci_bounds, open_registry
from rimthan_workflow_registry.release.oci import parse_reference
from rimthan_workflow_registry.release.oci_artifact import FILE_LAYER_TYPE, TITLE
from rimthan_workflow_registry.release.oci_bounds import registry_deadline
from support.hostile_registry import (
    HostileRegistry,
    ends,
    forward,
    hold,
    read_body_at,
    refused_code,
    send_json,
    send_raw,
)
from support.registry import LocalRegistry

TIMEOUT = 2.0  # REQUEST_TIMEOUT, scaled down from 30 s
RATE = 4 * 1024 * 1024  # what the slow registry takes a second: the whole blob in 4 s
BLOB = 16 * 1024 * 1024
DEADLINE = 1.0  # the push's, for the registry that takes the body at that rate and never answers
REPO = "rimthan/pace"


def _blob() -> bytes:
    seed = hashlib.sha256(b"pace").digest()
    return (seed * (BLOB // len(seed) + 1))[:BLOB]


def _upload(registry: HostileRegistry, blob: bytes, deadline: float = oci_bounds.PUSH_DEADLINE) -> Any:
    """``upload_blob`` (one of a push's uploads) of ``blob`` to ``registry`` under ``deadline``."""
    ref = parse_reference(registry.ref(REPO, "0.1.0"))
    client = open_registry(ref, plain_http=True)
    layer = {"mediaType": FILE_LAYER_TYPE, "digest": digest_bytes(blob), "size": len(blob)}
    layer["annotations"] = {TITLE: "catalogue/big.json"}

    def call() -> int:
        with registry_deadline(deadline):
            return upload_blob(client, ref, client.get_container(ref.target), layer, blob)

    return ends(call)


@pytest.fixture(autouse=True)
def _short_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(oci_bounds, "REQUEST_TIMEOUT", TIMEOUT)


def test_a_slow_honest_registry_takes_a_blob_longer_than_the_socket_timeout(
    registry: LocalRegistry, hostile: Callable[..., HostileRegistry]
) -> None:
    """Old code: the body's one ``sendall`` timed out after 2 s (``('Connection aborted.', TimeoutError('timed
    out'))``) while the registry was taking it steadily, and would have had it all in 4."""
    blob = _blob()
    proxy = hostile(lambda handler, proxy: forward(handler, proxy, registry.host, read=read_body_at(RATE)))
    outcome = _upload(proxy, blob)
    assert outcome == 1, outcome
    assert registry.blob_path(digest_bytes(blob)).read_bytes() == blob


def _upload_taken(take: Callable[[Any, HostileRegistry], None]) -> Callable[[Any, HostileRegistry], None]:
    """A registry that holds no blob, opens an upload session, and takes the upload's body with ``take``."""

    def answer(handler: Any, registry: HostileRegistry) -> None:
        if handler.command == "POST":
            send_raw(handler, b"", status=202, headers={"Location": f"/v2/{REPO}/blobs/uploads/session-1"})
        elif handler.command == "PUT":
            take(handler, registry)
        else:
            send_json(handler, {}, status=404)

    return answer


def _stalls(handler: Any, registry: HostileRegistry) -> None:
    """Take a megabyte of the body, then nothing more."""
    handler.rfile.read(1024 * 1024)
    hold(handler, registry)


def _takes_it_slowly(handler: Any, registry: HostileRegistry) -> None:
    """Take the body at ``RATE`` (every piece in time, the whole in 4 s), then never answer."""
    read_body_at(RATE)(handler)
    hold(handler, registry)


def test_a_registry_that_stops_taking_the_body_is_cut_at_the_timeout(hostile: Callable[..., HostileRegistry]) -> None:
    """The piece the socket cannot hand over within the timeout ends the upload (this already held for the
    whole body; kept as a guard for the pieces)."""
    outcome = _upload(hostile(_upload_taken(_stalls)), _blob())
    assert refused_code(outcome) is FailureCode.OCI_REGISTRY_ERROR, outcome
    assert "timed out" in outcome.message, outcome.message


def test_a_body_taken_piece_by_piece_is_still_cut_at_the_push_deadline(
    hostile: Callable[..., HostileRegistry],
) -> None:
    """Each piece within the timeout, the whole past the push's deadline (1 s here): the body is cut there, saying
    so. A guard for the new bound: the old code's one ``sendall`` was cut by the timeout instead (2 s), and said
    the registry's answer was late."""
    outcome = _upload(hostile(_upload_taken(_takes_it_slowly)), _blob(), deadline=DEADLINE)
    assert refused_code(outcome) is FailureCode.OCI_REGISTRY_ERROR, outcome
    assert "sending the body to the registry took longer than the deadline; stopped" in outcome.message
