"""The published refusal contract, as the tests hold every refusal of the verifier's tools to it.

The suites' SDK client (``support.checked_client.CheckedClient``) checks every ``isError`` result a
``rimthan.*`` tool answers any test (server, attack and host suites alike) here;
``raw_stdio`` checks the answers it reads off the wire the same way. Checking only: nothing is replaced.
"""

from __future__ import annotations

import json
from typing import Any

from jsonschema import Draft202012Validator
from rimthan_workflow_mcp.result_contracts import REFUSAL

_CHECK = Draft202012Validator(REFUSAL)
VERIFIER_TOOL_PREFIX = "rimthan."  # the four tools, and any other name a client tries on the verifier


def refusal_problems(structured: Any, text: str) -> list[str]:
    """Where a refusal's ``structuredContent`` breaks the contract, or its text is not the same JSON."""
    problems = [f"{list(e.absolute_path)}: {e.message}" for e in _CHECK.iter_errors(structured)]
    if json.loads(text) != structured:
        problems.append("the text content is not the structuredContent's JSON")
    return problems


def check_tool_result(name: str, result: Any) -> None:
    """Assert a verifier tool's ``isError`` result (an SDK ``CallToolResult``) matches the refusal contract."""
    if not name.startswith(VERIFIER_TOOL_PREFIX) or not getattr(result, "is_error", False):
        return
    problems = refusal_problems(result.structured_content, result.content[0].text)
    assert problems == [], (name, result.structured_content, problems)


def check_raw_answer(name: str, answer: dict[str, Any] | None) -> None:
    """Assert a raw JSON-RPC ``tools/call`` answer of a verifier tool, when it is a refusal, matches the refusal
    contract (the bridge's tools answer in the model's words: not this contract)."""
    result = (answer or {}).get("result")
    if not name.startswith(VERIFIER_TOOL_PREFIX) or not isinstance(result, dict) or result.get("isError") is not True:
        return
    problems = refusal_problems(result.get("structuredContent"), result["content"][0]["text"])
    assert problems == [], (result, problems)
