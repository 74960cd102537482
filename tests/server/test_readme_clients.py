"""The README's "Connect a client" section, followed word for word.

The JSON blocks are read out of README.md as a user would copy them; the only
substitutions are the ones the README itself tells the user to make: the
checkout path for ``/path/to/rimthan``, uv's absolute path where the block asks
for it, and, through the ``"env"`` variables the README documents, temporary
directories for releases, trust and state (so no key or release is written into
this checkout). The exact command is then started by the MCP SDK's stdio
client, as Claude Code starts it, and must list the four tools.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.stdio import StdioServerParameters, stdio_client
from support.checked_client import CheckedClient
from support.releases import REPO_ROOT, build_release, make_keypair, packaged_source, trust_dir

README = REPO_ROOT / "README.md"
PLACEHOLDER = "/path/to/rimthan"
UV_PLACEHOLDER = "/absolute/path/to/uv"
ENV_VARS = ("RIMTHAN_RELEASES_DIR", "RIMTHAN_TRUST", "RIMTHAN_STATE_DIR")
TOOLS = [
    "rimthan.start_workflow",
    "rimthan.continue_workflow",
    "rimthan.prepare_step_validation",
    "rimthan.submit_step_validation",
]


def _section() -> str:
    text = README.read_text("utf-8")
    start = text.index("\n## Connect a client\n")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def _blocks() -> dict[str, dict[str, Any]]:
    section = _section()
    found = re.findall(r"\*\*(Claude Code|Claude Desktop)\*\*.*?```json\n(.*?)```", section, flags=re.S)
    return {name: json.loads(block) for name, block in found}


def _uv() -> str:
    """uv as `command -v uv` finds it, else the uv running this test suite (it exports its own path as UV)."""
    found = shutil.which("uv") or os.environ.get("UV")
    assert found, "uv is not on PATH and UV is not set"
    return str(Path(found).absolute())


def test_the_section_gives_the_instructions_the_test_follows() -> None:
    words = " ".join(_section().split())
    assert "replace `/path/to/rimthan` with the absolute path of this checkout" in words
    assert 'put absolute paths in `"env"`: `RIMTHAN_RELEASES_DIR` (the releases), `RIMTHAN_TRUST`' in words
    assert "`RIMTHAN_STATE_DIR` (checkpoint keys and the activation floor)" in words
    assert "name uv by its absolute path (`command -v uv` prints it)" in words
    assert sorted(_blocks()) == ["Claude Code", "Claude Desktop"]
    assert "docs/harness-guide.md" in words


@pytest.mark.parametrize("host", ["Claude Code", "Claude Desktop"])
def test_the_readme_config_starts_the_server_and_lists_the_four_tools(host: str, tmp_path: Path) -> None:
    server = _blocks()[host]["mcpServers"]["rimthan"]
    # Claude Code names `uv` (found on PATH); Desktop asks for uv's absolute path in place of the placeholder.
    assert server["command"] == ("uv" if host == "Claude Code" else UV_PLACEHOLDER)
    assert server.get("type", "stdio") == "stdio"
    command = _uv()
    args = [arg.replace(PLACEHOLDER, str(REPO_ROOT)) for arg in server["args"]]
    assert args[:2] == ["--directory", str(REPO_ROOT)] and args[-2:] == ["rimthan-mcp", "serve"]

    key = make_keypair(tmp_path / "keys", "readme")
    releases = tmp_path / "releases"
    for version in ("1.2.0", "1.3.0"):
        build_release(packaged_source(version), releases, [key])
    documented = {
        "RIMTHAN_RELEASES_DIR": str(releases),
        "RIMTHAN_TRUST": str(trust_dir(tmp_path / "trust", key)),
        "RIMTHAN_STATE_DIR": str(tmp_path / "state"),
    }
    env = {**dict(server.get("env") or {}), **documented}
    params = StdioServerParameters(command=command, args=args, env=env, cwd=tmp_path)
    errlog = tmp_path / "server-stderr.log"

    async def list_tools() -> list[str]:
        with errlog.open("w") as stream:
            async with CheckedClient(stdio_client(params, errlog=stream)) as client:
                return [tool.name for tool in (await client.list_tools()).tools]

    assert anyio.run(list_tools) == TOOLS
    said = errlog.read_text("utf-8")
    assert "rimthan-mcp: release research-decision@1.3.0 sha256:" in said, said
    assert f"({releases / 'research-decision-1.3.0'}) [active]" in said
    assert f"checkpoint keys {tmp_path / 'state' / 'checkpoint-keys.json'} (created)" in said
    assert not (REPO_ROOT / "keys" / "local" / "readme.key").exists()
