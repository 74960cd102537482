"""Fixtures shared by every test package; the helpers behind them live in ``tests/support/``.

keypair                one KeyPair in tmp_path/keys
trust                  tmp_path/trust: a trust directory holding ``keypair``
scaffold               a scaffold catalogue source in tmp_path/source
signed_release         a release of ``scaffold`` signed by ``keypair``
packaged_releases      research-decision 1.2.0 and 1.3.0 built and signed by
                       ``keypair``: {"1.2.0": Path, "1.3.0": Path}
registry               a real OCI registry (docker-registry) on loopback, stopped after the test
mcp_raw                ``rimthan-mcp serve`` over stdio pipes for the module, raw lines (support.raw_stdio)
hostile                start(answer, tls=None) -> a registry that does not play fair (support.hostile_registry),
                       every one stopped after the test

Every ``isError`` result a ``rimthan.*`` tool answers an SDK client in any test is checked against the
published refusal contract by the client the tests connect with (support.checked_client.CheckedClient).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.hostile_registry import HeldFront, HostileRegistry, holding_front, start_hostile
from support.oci import push
from support.raw_stdio import RawStdio, raw_stdio_server
from support.registry import LocalRegistry, TlsFiles, start_registry
from support.releases import (
    PACKAGED_VERSIONS,
    KeyPair,
    build_release,
    make_keypair,
    packaged_source,
    scaffold_source,
    trust_dir,
)
from support.servers import RIMTHAN_MCP, HttpServer, ServerWorld, build_world, http_server, serve_args

RAW_WAIT_SECONDS = 60.0


@pytest.fixture(autouse=True, scope="session")
def _user_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The packager's user cache (XDG_CACHE_HOME) in a temporary directory, never the developer's own.

    uv finds its own cache through XDG_CACHE_HOME too, so it is pinned first with UV_CACHE_DIR
    (uv's own rule): tests that run `uv sync --offline` keep the wheels this machine already has.
    """
    before = os.environ.get("XDG_CACHE_HOME")
    pinned_uv = "UV_CACHE_DIR" not in os.environ
    if pinned_uv:
        os.environ["UV_CACHE_DIR"] = str(Path(before or Path.home() / ".cache") / "uv")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))
    yield
    if pinned_uv:
        del os.environ["UV_CACHE_DIR"]
    if before is None:
        del os.environ["XDG_CACHE_HOME"]
    else:
        os.environ["XDG_CACHE_HOME"] = before


@pytest.fixture
def keypair(tmp_path: Path) -> KeyPair:
    return make_keypair(tmp_path / "keys", "alice")


@pytest.fixture
def trust(tmp_path: Path, keypair: KeyPair) -> Path:
    return trust_dir(tmp_path / "trust", keypair)


@pytest.fixture
def scaffold(tmp_path: Path) -> Path:
    return scaffold_source(tmp_path / "source")


@pytest.fixture
def signed_release(tmp_path: Path, scaffold: Path, keypair: KeyPair) -> Path:
    return build_release(scaffold, tmp_path / "releases", [keypair])


@pytest.fixture
def packaged_releases(tmp_path: Path, keypair: KeyPair) -> dict[str, Path]:
    out = tmp_path / "packaged-releases"
    return {v: build_release(packaged_source(v), out, [keypair]) for v in PACKAGED_VERSIONS}


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[LocalRegistry]:
    running = start_registry(tmp_path / "registry")
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def mcp_world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("mcp-world"))


@pytest.fixture(scope="module")
def mcp_http(mcp_world: ServerWorld, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    """One HTTP server for the module: 1.2.0 active, 1.3.0 as migration target."""
    args = serve_args(
        mcp_world,
        mcp_world.built["1.2.0"],
        state_dir=tmp_path_factory.mktemp("mcp-http-state"),
        migration_target=mcp_world.built["1.3.0"],
    )
    with http_server(args) as server:
        yield server


@pytest.fixture(scope="module")
def mcp_raw(mcp_world: ServerWorld, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RawStdio]:
    """``rimthan-mcp serve`` (1.2.0) over stdio pipes, initialised by hand: raw lines in, raw lines out."""
    args = serve_args(mcp_world, mcp_world.built["1.2.0"], state_dir=tmp_path_factory.mktemp("mcp-raw-state"))
    with raw_stdio_server([RIMTHAN_MCP, *args[2:]], RAW_WAIT_SECONDS) as client:
        yield client


@pytest.fixture
def hostile() -> Iterator[Callable[..., HostileRegistry]]:
    started: list[HostileRegistry] = []

    def start(answer: Callable[..., None], tls: TlsFiles | None = None) -> HostileRegistry:
        started.append(start_hostile(answer, tls))
        return started[-1]

    yield start
    for registry in started:
        registry.stop()


@pytest.fixture
def held(
    registry: LocalRegistry,
    hostile: Callable[..., HostileRegistry],
    packaged_releases: dict[str, Path],
    trust: Path,
) -> Iterator[HeldFront]:
    """1.2.0 pushed to ``rimthan/held`` of a real registry, behind a front holding each request until released."""
    push(packaged_releases["1.2.0"], registry.ref("rimthan/held"), trust)
    front = holding_front(hostile, registry.host)
    yield front
    front.released.set()
