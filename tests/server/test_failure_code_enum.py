"""A failure's ``code`` in every tool's ``outputSchema`` is the closed list of codes, not any snake_case word.

The list is generated from ``FailureCode`` (one source), the same ``enum`` the refusal contract holds.
A client that validates a result against the served ``outputSchema`` (as the SDK client does) accepts a
real ``blocked`` answer and refuses the same answer with a code the closed list does not have.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import anyio
from jsonschema import Draft202012Validator
from rimthan_workflow_mcp.result_contracts import FAILURE, REFUSAL
from rimthan_workflow_registry.errors import FailureCode
from support.servers import ServerWorld, serve_args, stdio_client_for

CLOSED_LIST = sorted(code.value for code in FailureCode)
HOST = {
    "harness": "claude-code",
    "adapter": {"id": "claude-code", "version": "1.0.0"},
    "capabilities": ["skills"],
    "validator_capabilities": [],
    "repository_policy": {"writable_paths": ["research/*"], "protected_paths": [".git/*"]},
}


def test_the_failure_contract_and_the_refusal_contract_name_the_same_closed_list() -> None:
    assert FAILURE["properties"]["code"]["enum"] == CLOSED_LIST
    assert REFUSAL["properties"]["error"]["properties"]["code"]["enum"] == CLOSED_LIST


def test_a_client_validating_a_result_against_the_served_output_schema_refuses_an_unknown_code(
    mcp_world: ServerWorld, tmp_path: Path
) -> None:
    args = serve_args(mcp_world, mcp_world.built["1.2.0"], state_dir=tmp_path / "state")

    async def blocked_start() -> tuple[dict[str, Any], dict[str, Any]]:
        async with stdio_client_for(args, (tmp_path / "stderr.log").open("w")) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            empty: dict[str, Any] = {"state": {}, "confirmations": {}}
            result = await client.call_tool(
                "rimthan.start_workflow", {"workflow": "research", "confirmed_state": empty, "host": HOST}
            )
            assert not result.is_error and result.structured_content is not None
            schema = tools["rimthan.start_workflow"].output_schema
            assert schema is not None
            return schema, result.structured_content

    schema, answer = anyio.run(blocked_start)
    check = Draft202012Validator(schema)
    assert answer["status"] == "blocked"
    codes = {f["code"] for f in answer["failures"]}
    assert {"confirmed_field_missing", "host_capability_missing"} <= codes
    assert check.is_valid(answer)
    for bad in ("no_such_code", "confirmed_field_missing_too"):
        forged = copy.deepcopy(answer)
        forged["failures"][0]["code"] = bad
        assert not check.is_valid(forged), bad
