"""A registry's text quoted into a refusal: one line of bounded length, however much of it the registry sends.

A refusal is printed whole (``rimthan-pack pull`` on the terminal, the
follower's log). Each case has the registry put 60 KiB or more into what the
refusal quotes: a ``Link`` or a Bearer realm (a header line up to the client's
64 KiB limit), a layer title, a layer size of 4,000 digits, a JSON key. On the
old code the refusal quoted it whole; now it is cut after ``QUOTE_MAX_CHARS``
with a marker, control characters escaped.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rimthan_workflow_registry.errors import QUOTE_MAX_CHARS, FailureCode
from rimthan_workflow_registry.release import oci, open_registry
from rimthan_workflow_registry.release.oci import parse_reference, version_tags
from rimthan_workflow_registry.release.oci_artifact import ARTIFACT_TYPE, MANIFEST_LAYER_TYPE, OCI_MANIFEST_TYPE, TITLE
from rimthan_workflow_registry.release.trust import load_trust
from support.hostile_registry import HostileRegistry, ends, refused_code, send_json, send_raw
from support.registry import make_tls
from support.releases import make_keypair, trust_dir

LONG = "e" * 60_000 + "\x1b[2J"  # a header line within the client's 64 KiB limit, ending in a terminal escape
MAX_MESSAGE = 2 * QUOTE_MAX_CHARS + 200  # what a refusal's fixed words and one cut quote take, at most


def _assert_cut(outcome: Any, code: FailureCode, words: str) -> None:
    assert refused_code(outcome) is code, outcome
    assert words in outcome.message and "chars, cut]" in outcome.message, outcome.message[:500]
    assert len(outcome.message) < MAX_MESSAGE and "\x1b" not in outcome.message, outcome.message[:500]


def test_a_next_tag_page_on_another_host_is_quoted_cut(hostile: Callable[..., HostileRegistry]) -> None:
    """Old code: the refusal quoted the ``Link`` URL whole (60 KiB on one line)."""
    link = f'<http://elsewhere.example/{LONG}?last=1>; rel="next"'
    registry = hostile(lambda handler, _: send_json(handler, {"tags": ["1.2.0"]}, headers={"Link": link}))
    ref = parse_reference(registry.ref("attack/repo"))
    outcome = ends(lambda: version_tags(open_registry(ref, plain_http=True), ref))
    _assert_cut(outcome, FailureCode.OCI_REGISTRY_ERROR, "next tag page is on another host")


def test_a_plain_http_token_service_is_quoted_cut(
    hostile: Callable[..., HostileRegistry], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Old code: the refusal quoted the Bearer challenge's realm whole."""
    tls = make_tls(tmp_path / "tls")
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(tls.ca_cert))
    challenge = f'Bearer realm="http://elsewhere.example/{LONG}",service="x"'
    registry = hostile(lambda handler, _: send_json(handler, {}, 401, {"WWW-Authenticate": challenge}), tls)
    ref = parse_reference(registry.ref("attack/repo"))
    outcome = ends(lambda: version_tags(open_registry(ref), ref))
    _assert_cut(outcome, FailureCode.OCI_REGISTRY_ERROR, "token service is plain HTTP")


def _manifest(layer: dict[str, Any]) -> bytes:
    return json.dumps(
        {"schemaVersion": 2, "mediaType": OCI_MANIFEST_TYPE, "artifactType": ARTIFACT_TYPE, "layers": [layer]}
    ).encode()


_LAYER = {"mediaType": MANIFEST_LAYER_TYPE, "digest": "sha256:" + "0" * 64, "size": 1}
_MANIFESTS: dict[str, tuple[bytes, FailureCode, str]] = {
    "a layer title": (
        _manifest({**_LAYER, "annotations": {TITLE: LONG}}),
        FailureCode.OCI_ARTIFACT_INVALID,
        "layer title",
    ),
    "a layer size": (
        _manifest({**_LAYER, "size": 10**4000, "annotations": {TITLE: "manifest.json"}}),
        FailureCode.OCI_ARTIFACT_INVALID,
        "bytes; the limit is",
    ),
    "a repeated key": (
        b'{"' + LONG[:-4].encode() + b'": 1, "' + LONG[:-4].encode() + b'": 2}',
        FailureCode.OCI_ARTIFACT_INVALID,
        "duplicate JSON key",
    ),
}


@pytest.mark.parametrize("what", sorted(_MANIFESTS))
def test_a_manifest_s_long_values_are_quoted_cut(
    hostile: Callable[..., HostileRegistry], tmp_path: Path, what: str
) -> None:
    """Old code: the refusal quoted the title, the size's 4,000 digits or the key whole."""
    body, code, words = _MANIFESTS[what]
    registry = hostile(lambda handler, _: send_raw(handler, body, headers={"Content-Type": OCI_MANIFEST_TYPE}))
    trust = load_trust(trust_dir(tmp_path / "trust", make_keypair(tmp_path / "keys", "alice")))
    ref = parse_reference(registry.ref("attack/repo", "1.2.0"))
    outcome = ends(lambda: oci.pull_release(ref, trust, tmp_path / "out", plain_http=True))
    _assert_cut(outcome, code, words)
