"""Both servers name their installed version in ``serverInfo``: never the empty string a host shows.

A real MCP client initializes (the ``initialize`` handshake: ``mode="legacy"``) against the installed console
scripts, ``rimthan-host serve`` (its verifier a real ``rimthan-mcp serve`` child) and ``rimthan-mcp serve``
itself, over signed packaged releases; each reply's ``serverInfo.version`` is the version the same script's
``--version`` prints (click reads the distribution's metadata on its own path).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import anyio
import pytest
from mcp import StdioServerParameters
from support.bridge import BIN, bridge_params
from support.checked_client import CheckedClient
from support.processes import serve_options
from support.servers import ServerWorld, build_world


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("server-info-world"))


def _printed_version(script: str) -> str:
    """What ``SCRIPT --version`` prints as the version: ``rimthan-host, version 0.1.0`` -> ``0.1.0``."""
    out = subprocess.run([str(BIN / script), "--version"], capture_output=True, text=True, check=True).stdout
    return out.split()[-1]


def _server_info(params: StdioServerParameters) -> tuple[str, str]:
    async def go() -> tuple[str, str]:
        async with CheckedClient(params, mode="legacy") as client:
            info = client.server_info
            assert info is not None
            return info.name, info.version

    return anyio.run(go)


def test_the_bridge_names_its_installed_version(world: ServerWorld, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    name, version = _server_info(bridge_params(project, world, tmp_path / "state"))
    assert name == "rimthan-host"
    assert version == _printed_version("rimthan-host") != ""


def test_the_verifier_names_its_installed_version(world: ServerWorld, tmp_path: Path) -> None:
    options = serve_options(world.built["1.2.0"], world.trust, tmp_path / "state", log_level="warning")
    name, version = _server_info(StdioServerParameters(command=str(BIN / "rimthan-mcp"), args=["serve", *options]))
    assert name == "rimthan-workflow-mcp"
    assert version == _printed_version("rimthan-mcp") != ""
