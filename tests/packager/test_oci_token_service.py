"""A registry behind a token service (Docker Hub, GHCR, Harbor) that refuses the credentials, or gets none.

The registry answers ``401`` with ``WWW-Authenticate: Bearer realm=...``; its token service answers ``401`` to
the credentials given (a wrong or expired password), or to none. oras logged "This endpoint requires a token.
Please use basic auth with a username or password." (a stray first line on ``rimthan-pack pull``'s stderr) and
raised "Cannot respond to request for authentication.", refused as ``oci_registry_error`` with a next step about
the registry address and ``--plain-http``: docs/fleet.md says ``oci_unauthorized``, the next step naming where
credentials come from. Real ``rimthan-pack pull`` and ``push`` against a registry on loopback
(``support.hostile_registry``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.hostile_registry import HostileRegistry, read_body, send_json
from support.oci import one_line_error, pack
from support.releases import build_release, make_keypair, packaged_source, trust_dir


def _token_service_refusing(handler: Any, registry: HostileRegistry) -> None:
    if handler.path.startswith("/token"):
        send_json(handler, {"errors": [{"code": "UNAUTHORIZED", "message": "authentication required"}]}, status=401)
        return
    read_body(handler)
    challenge = f'Bearer realm="http://{registry.host}/token",service="registry",scope="repository:r/rd:pull"'
    send_json(handler, {"errors": [{"code": "UNAUTHORIZED"}]}, status=401, headers={"WWW-Authenticate": challenge})


@pytest.mark.parametrize("credentials", ["wrong", "none"])
@pytest.mark.parametrize("command", ["pull", "push"])
def test_a_token_service_refusing_the_credentials_is_oci_unauthorized_in_one_line(
    hostile: Callable[..., HostileRegistry],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    command: str,
    credentials: str,
) -> None:
    registry = hostile(_token_service_refusing)
    signer = make_keypair(tmp_path / "keys", "ops")
    trust = trust_dir(tmp_path / "trust", signer)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "no-docker-config"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    if credentials == "wrong":
        monkeypatch.setenv("RIMTHAN_REGISTRY_USERNAME", "ops")
        monkeypatch.setenv("RIMTHAN_REGISTRY_PASSWORD", "expired")
    else:
        monkeypatch.delenv("RIMTHAN_REGISTRY_USERNAME", raising=False)
        monkeypatch.delenv("RIMTHAN_REGISTRY_PASSWORD", raising=False)
    if command == "pull":
        done = pack(
            "pull", f"oci://{registry.host}/r/rd:1.2.0", "--trust", trust, "--out", tmp_path / "out", "--plain-http"
        )
    else:
        release = build_release(packaged_source("1.2.0"), tmp_path / "built", [signer])
        done = pack("push", release, f"oci://{registry.host}/r/rd", "--trust", trust, "--plain-http")
    line = one_line_error(done, "oci_unauthorized")
    said = "token service refused the credentials" if credentials == "wrong" else "asks for credentials; none found"
    assert said in line, line
    assert "RIMTHAN_REGISTRY_USERNAME" in done.stderr.splitlines()[1], done.stderr
    assert not (tmp_path / "out").exists()
