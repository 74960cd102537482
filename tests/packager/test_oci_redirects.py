"""Redirects a registry may send, against a real docker-registry behind a proxy (tests/support/hostile_registry.py).

The distribution spec lets a registry redirect a blob download to its storage,
often on another host (a CDN, a presigned bucket URL); docker and oras follow
it without the registry's ``Authorization`` header (docker copies every header
but that one to another host; requests drops it too). An upload redirected
within the registry is followed with its whole body; one redirected to another
host is refused (tests/attacks/test_attacks_hostile_push.py). Credentials go
only to the registry: a storage host asking for them gets none."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.hostile_registry import HostileRegistry, forward, guarded_by, read_body, send_json, send_raw
from support.oci import one_line_error, pack, push, tree_bytes
from support.registry import LocalRegistry

REPO = "rimthan/research"
VERSION = "1.2.0"
CREDENTIALS = {"RIMTHAN_REGISTRY_USERNAME": "alice", "RIMTHAN_REGISTRY_PASSWORD": "secret"}


@dataclass
class World:
    """A real registry, the means to put hostile hosts in front of it, and a release to push and pull."""

    registry: LocalRegistry
    hostile: Callable[..., HostileRegistry]
    release: Path
    trust: Path
    out: Path

    def files(self) -> int:
        return sum(1 for p in self.release.rglob("*") if p.is_file())


@pytest.fixture
def world(
    registry: LocalRegistry,
    hostile: Callable[..., HostileRegistry],
    packaged_releases: dict[str, Path],
    trust: Path,
    tmp_path: Path,
) -> World:
    return World(registry, hostile, packaged_releases[VERSION], trust, tmp_path / "out")


@pytest.mark.parametrize("status", [307, 308])
def test_an_upload_redirected_on_the_registry_is_sent_again_whole(world: World, status: int) -> None:
    """Each blob's PUT is first redirected to the same upload URL on the same host: the push follows, sends each
    body again from its start, and the release pulled back from the registry is the one pushed."""

    def answer(handler: Any, proxy: HostileRegistry) -> None:
        if handler.command == "PUT" and "/blobs/uploads/" in handler.path and "moved=1" not in handler.path:
            read_body(handler)
            send_raw(handler, b"", status=status, headers={"Location": handler.path + "&moved=1"})
        else:
            forward(handler, proxy, world.registry.host)

    proxy = world.hostile(answer)
    push(world.release, proxy.ref(REPO, VERSION), world.trust)
    moved = [path for method, path in proxy.calls if method == "PUT" and "moved=1" in path]
    assert len(moved) == 1 + world.files()  # every file, and the config
    pulled = pack("pull", world.registry.ref(REPO, VERSION), "--trust", world.trust, "--out", world.out, "--plain-http")
    assert pulled.returncode == 0, pulled.stderr
    assert tree_bytes(world.out / world.release.name) == tree_bytes(world.release)


def _behind(world: World, scheme: str, storage: Callable[[Any, HostileRegistry], None]) -> tuple[HostileRegistry, Any]:
    """Push the release to the real registry, then pull it through a front that wants credentials (``scheme``)
    and redirects every blob download to a ``storage`` host: that host, and the pull."""
    push(world.release, world.registry.ref(REPO, VERSION), world.trust)
    store = world.hostile(storage)

    def answer(handler: Any, front: HostileRegistry) -> None:
        if handler.command == "GET" and "/blobs/sha256:" in handler.path:
            send_raw(handler, b"", status=307, headers={"Location": f"http://{store.host}{handler.path}"})
        else:
            forward(handler, front, world.registry.host)

    front = world.hostile(guarded_by(scheme, answer))
    ref = front.ref(REPO, VERSION)
    pulled = pack("pull", ref, "--trust", world.trust, "--out", world.out, "--plain-http", env=CREDENTIALS)
    assert _authorizations(front), "the registry itself was never sent credentials: the case tests nothing"
    return store, pulled


def _authorizations(host: HostileRegistry) -> list[str]:
    return [headers["Authorization"] for _, headers in host.seen if "Authorization" in headers]


@pytest.mark.parametrize("scheme", ["Bearer", "Basic"])
def test_a_blob_redirected_to_storage_on_another_host_is_fetched_without_credentials(world: World, scheme: str) -> None:
    """The pull follows each blob to the storage host and installs the release; the storage host never sees the
    registry's token or the engineer's credentials (this already held, by requests; kept as a guard)."""
    storage, pulled = _behind(world, scheme, lambda handler, host: forward(handler, host, world.registry.host))
    assert pulled.returncode == 0, pulled.stderr
    assert tree_bytes(world.out / world.release.name) == tree_bytes(world.release)
    assert len(storage.seen) == world.files()  # every layer
    assert _authorizations(storage) == []


STORAGE_CHALLENGES = {
    "a token service, to a Basic registry": ("Basic", 401, "Bearer"),
    "a token service, again (403), to a token registry": ("Bearer", 403, "Bearer"),
    "Basic credentials": ("Basic", 401, "Basic"),
}


@pytest.mark.parametrize("case", sorted(STORAGE_CHALLENGES))
def test_a_storage_host_asking_for_credentials_is_refused_and_given_none(world: World, case: str) -> None:
    """oras answered a challenge from wherever a redirect led: a storage host answering 403 with a token service
    of its own (``Bearer realm=...``) was sent the engineer's Basic credentials there (oras drops its token after
    a 403 and asks the service the answer names). Only the registry's own challenge is answered now; the pull is
    refused naming the host, and installs nothing. The other cases sent nothing before either, but were refused
    as ``oci_unauthorized``, "the registry refused the credentials", which it had not."""
    front_scheme, status, scheme = STORAGE_CHALLENGES[case]

    def storage(handler: Any, host: HostileRegistry) -> None:
        if handler.path.startswith("/token"):
            send_json(handler, {"token": "storage-token"})
            return
        challenge = f'Bearer realm="http://{host.host}/token",service="s"' if scheme == "Bearer" else 'Basic realm="s"'
        send_json(handler, {}, status=status, headers={"WWW-Authenticate": challenge})

    store, pulled = _behind(world, front_scheme, storage)
    assert _authorizations(store) == [], "the storage host was sent credentials"
    line = one_line_error(pulled, "oci_registry_error")
    assert "a host the registry redirected to asks for credentials" in line and store.host in line, line
    assert not (world.out / world.release.name).exists()
