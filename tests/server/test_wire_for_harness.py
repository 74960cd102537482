"""What a harness reads off the wire besides tool results.

A resource read the server refuses is a JSON-RPC error whose ``data`` carries the failure ``code`` and
``next`` (what to do: the same one remediation table tool refusals use). Checked through the SDK client
against a real ``rimthan-mcp serve`` process.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from rimthan_workflow_registry.errors import FailureCode
from rimthan_workflow_registry.remediation import REMEDIATION
from support.servers import ServerWorld, serve_args, stdio_client_for


def _hex(release: Path) -> str:
    return hashlib.sha256((release / "manifest.json").read_bytes()).hexdigest()


async def _refused(client: Any, uri: str) -> dict[str, Any]:
    with pytest.raises(MCPError) as refused:
        await client.read_resource(uri)
    data = refused.value.data
    assert isinstance(data, dict) and data["uri"] == uri, data
    return data


def test_a_refused_resource_read_says_what_to_do_next(mcp_world: ServerWorld, tmp_path: Path) -> None:
    release = mcp_world.publish("1.2.0", tmp_path / "releases")
    args = serve_args(mcp_world, release, state_dir=tmp_path / "state")
    example = "examples/confirmed-state.json"  # read from disk when asked (the loader never reads it)
    served = f"rimthan://releases/{_hex(release)}/{example}"

    async def check() -> None:
        async with stdio_client_for(args, (tmp_path / "stderr.log").open("w")) as client:
            unheld = await _refused(client, f"rimthan://manifests/{'0' * 64}/manifest.json")
            assert unheld["code"] == "pinned_release_unavailable"
            assert unheld["next"] == REMEDIATION[FailureCode.PINNED_RELEASE_UNAVAILABLE]  # the one table
            for nothing in ("rimthan://releases/" + _hex(release) + "/no-such-file.md", "file:///etc/passwd"):
                unknown = await _refused(client, nothing)
                assert unknown["code"] == "invalid_arguments" and "resources/list" in unknown["next"], unknown
            with pytest.raises(MCPError) as no_prompt:
                await client.get_prompt("no-such-prompt")
            said = no_prompt.value.data
            assert said["code"] == "invalid_arguments" and "prompts/list" in said["next"], said
            on_disk = release / "catalogue" / example
            on_disk.write_text(on_disk.read_text("utf-8").replace("{", "{ ", 1), "utf-8")  # changed after signing
            changed = await _refused(client, served)
            code = FailureCode(changed["code"])
            assert code in (FailureCode.FILE_SIZE_MISMATCH, FailureCode.FILE_DIGEST_MISMATCH), changed
            assert changed == {"code": code.value, "uri": served, "next": REMEDIATION[code]}

    anyio.run(check)
