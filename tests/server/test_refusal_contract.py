"""The refusal contract: the published schema of an ``isError`` result's ``structuredContent``.

One copy (``result_contracts.REFUSAL``), served as the immutable resource
``rimthan://contracts/refusal/<hex>.schema.json`` beside the other contracts and shipped in
docs/test-vectors/host-protocol.json (``refusals.contract``). Every refusal ``domain_tool_error``
builds matches it, whatever the code, with its ``next`` (what to do: the refusal's own step, else the
code's line of ``remediation.REMEDIATION``, or its ``FOR_A_HARNESS`` line where it has one); and every
refusal a ``rimthan.*`` tool answers an SDK client anywhere in the suite is checked against it by the suites'
client, ``support.checked_client.CheckedClient``.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from jsonschema import Draft202012Validator
from rimthan_workflow_mcp.result_contracts import REFUSAL
from rimthan_workflow_mcp.server import domain_tool_error
from rimthan_workflow_registry.errors import FailureCode, RegistryError
from rimthan_workflow_registry.remediation import FOR_A_HARNESS, REMEDIATION
from support.refusal_contract import refusal_problems
from support.releases import REPO_ROOT
from support.servers import ServerWorld, serve_args, stdio_client_for, text_of

VECTORS = REPO_ROOT / "docs" / "test-vectors" / "host-protocol.json"
CHECK = Draft202012Validator(REFUSAL)


@pytest.mark.parametrize("code", sorted(FailureCode))
def test_every_code_the_refusal_builder_sends_matches_the_contract(code: FailureCode) -> None:
    for exc in (
        RegistryError(code, "what is wrong"),
        RegistryError(code, "what is wrong", path="releases/x/manifest.json", details={"pointer": "/a", "n": [1]}),
        RegistryError(code, "details that are not JSON", details={"when": object()}),  # the builder's fallback
    ):
        result = domain_tool_error(exc)
        assert result.is_error is True
        assert refusal_problems(result.structured_content, result.content[0].text) == []  # type: ignore[union-attr]
        assert result.structured_content is not None and result.structured_content["error"]["code"] == code.value
        # the one table, no second copy; a harness's own line where the table's is an operator's
        assert result.structured_content["error"]["next"] == FOR_A_HARNESS.get(code, REMEDIATION[code])
    own = domain_tool_error(RegistryError(code, "what is wrong", next_step="do this instead")).structured_content
    assert own is not None and own["error"]["next"] == "do this instead"  # the situation's own step wins


def test_the_contract_names_exactly_the_closed_list_and_refuses_anything_else() -> None:
    error = REFUSAL["properties"]["error"]
    assert error["properties"]["code"]["enum"] == sorted(code.value for code in FailureCode)
    assert not CHECK.is_valid({"error": {"code": "no_such_code", "message": "x"}})
    assert not CHECK.is_valid({"error": {"code": "internal_error", "message": "x", "next": "y", "hint": "z"}})  # closed
    assert not CHECK.is_valid({"error": {"code": "internal_error", "message": "x"}})  # next is required
    assert not CHECK.is_valid({"error": "boom"})
    assert not CHECK.is_valid({"status": "blocked"})


def test_the_test_vectors_ship_the_same_contract_and_real_refusals_that_match_it() -> None:
    shipped = json.loads(VECTORS.read_text("utf-8"))["refusals"]
    stale = "docs/test-vectors/host-protocol.json ships another refusal contract: run make test-vectors"
    assert shipped["contract"] == REFUSAL, stale
    assert {e["structuredContent"]["error"]["code"] for e in shipped["examples"]} >= {"workflow_not_found"}
    for example in shipped["examples"]:
        assert example["isError"] is True and CHECK.is_valid(example["structuredContent"]), example


def test_the_server_serves_the_contract_and_its_refusals_match_what_it_serves(
    mcp_world: ServerWorld, tmp_path: Path
) -> None:
    args = serve_args(mcp_world, mcp_world.built["1.2.0"], state_dir=tmp_path / "state")

    async def check() -> None:
        async with stdio_client_for(args, (tmp_path / "stderr.log").open("w")) as client:
            uris = [r.uri for r in (await client.list_resources()).resources]
            (uri,) = [u for u in uris if u.startswith("rimthan://contracts/refusal/")]
            served = json.loads(text_of(await client.read_resource(uri)))
            assert served == REFUSAL
            refused = await client.call_tool("rimthan.start_workflow", {"workflow": "nope"})
            assert refused.is_error and refused.structured_content is not None
            assert Draft202012Validator(served).is_valid(refused.structured_content)
            assert refused.structured_content["error"]["code"] == "invalid_arguments"
            assert refused.structured_content["error"]["next"] == REMEDIATION[FailureCode.INVALID_ARGUMENTS]
            unknown = await client.call_tool(
                "rimthan.continue_workflow",
                {"checkpoint": "x.y.z", "confirmed_state": {"state": {}, "confirmations": {}}},
            )
            error = unknown.structured_content["error"] if unknown.structured_content else {}
            assert unknown.is_error and error["next"] == REMEDIATION[FailureCode(error["code"])], error

    anyio.run(check)


def test_an_internal_error_tells_a_harness_what_it_can_do_not_the_operators_step() -> None:
    """``internal_error``'s table line is for the operator (rerun the server with a flag); a harness reading the
    refusal is told to report it with the call's time and try again later instead."""
    error = domain_tool_error(RegistryError(FailureCode.INTERNAL_ERROR, "boom")).structured_content
    said = error["error"]["next"] if error else ""
    assert said == FOR_A_HARNESS[FailureCode.INTERNAL_ERROR] != REMEDIATION[FailureCode.INTERNAL_ERROR]
    assert "operator" in said and "time" in said and "again later" in said and "--log-level" not in said
