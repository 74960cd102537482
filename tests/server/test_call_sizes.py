"""What a release may declare fits what every transport takes (limits.MAX_REQUEST_BODY_BYTES).

A real ``rimthan-mcp serve`` process over Streamable HTTP takes a prepare at
the largest size a release may declare, with a confirmed state at its bound,
both full of characters JSON escapes (the SDK's own 4 MiB body bound answered
it with a bare HTTP 413); and a confirmed state past its bound is refused with
``confirmed_state_invalid`` over stdio and HTTP alike.
"""

from __future__ import annotations

import json
import tomllib
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
import tomli_w
from rimthan_workflow_registry.canonical import canonical_bytes
from rimthan_workflow_registry.limits import MAX_CONFIRMED_STATE_BYTES, MAX_REQUEST_BODY_BYTES, MAX_STEP_ARTIFACT_BYTES
from rimthan_workflow_registry.protocol_names import PREPARE_STEP_VALIDATION, START_WORKFLOW
from support.engines import StepKit, example_state
from support.processes import serve_module_args
from support.releases import build_release, make_keypair, trust_dir, unbounded_objective_source
from support.servers import HttpServer, http_server, stdio_client_for, structured_error

SDK_DEFAULT_BODY_BYTES = 4 * 1024 * 1024  # mcp.server.transport_security.DEFAULT_MAX_REQUEST_BODY_SIZE
ESCAPED = "\x01"  # JSON writes it as \u0001: six bytes for one


@dataclass(frozen=True)
class Served:
    args: list[str]
    http: HttpServer


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """1.2.0 with no maxLength on ``objective`` and setup's manifest declared at MAX_STEP_ARTIFACT_BYTES."""
    root = tmp_path_factory.mktemp("call-sizes")
    source = unbounded_objective_source(root)
    workflow = source / "workflows" / "research-decision.toml"
    data = tomllib.loads(workflow.read_text("utf-8"))
    data["steps"][0]["outputs"][0]["max_bytes"] = MAX_STEP_ARTIFACT_BYTES
    workflow.write_text(tomli_w.dumps(data), "utf-8")
    key = make_keypair(root / "keys", "release-engineer")
    release = build_release(source, root / "built", [key])
    args = serve_module_args(release, trust_dir(root / "trust", key), root / "state")
    with http_server(args) as http:
        yield Served(args, http)


def state_of(size: int) -> dict[str, Any]:
    """The example state with an objective of escaped characters making it ``size`` canonical bytes."""
    values = {**example_state("1.2.0"), "objective": ""}
    room = size - len(canonical_bytes(values))
    values["objective"] = ESCAPED * (room // 6) + "a" * (room % 6)
    assert len(canonical_bytes(values)) == size
    return StepKit(Path(".")).confirm(values)


def post(url: str, name: str, arguments: dict[str, Any]) -> tuple[int, int, dict[str, Any] | str]:
    """A ``tools/call`` as a plain JSON client sends it (``json.dumps``): status, body size, structured result."""
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    body = json.dumps(call).encode("ascii")
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
    }
    request = urllib.request.Request(url, data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, len(body), json.loads(response.read())["result"]["structuredContent"]
    except urllib.error.HTTPError as error:
        return error.code, len(body), error.read().decode()


def test_http_takes_a_prepare_at_the_largest_size_a_release_may_declare(served: Served) -> None:
    state = state_of(MAX_CONFIRMED_STATE_BYTES)
    host = StepKit(Path(".")).host()
    status, _, started = post(
        served.http.url, START_WORKFLOW, {"workflow": "research", "confirmed_state": state, "host": host}
    )
    assert status == 200 and isinstance(started, dict), started
    (output,) = started["step"]["outputs"]
    assert output["max_bytes"] == MAX_STEP_ARTIFACT_BYTES
    artifact = {
        "artifact_id": output["id"],
        "path": output["path"],
        "media_type": output["media_type"],
        "content": ESCAPED * MAX_STEP_ARTIFACT_BYTES,
    }
    arguments = {"checkpoint": started["checkpoint"], "confirmed_state": state, "host": host, "artifacts": [artifact]}
    status, size, prepared = post(served.http.url, PREPARE_STEP_VALIDATION, arguments)
    assert SDK_DEFAULT_BODY_BYTES < size <= MAX_REQUEST_BODY_BYTES  # the SDK's default answered 413
    assert status == 200, (status, prepared)
    assert isinstance(prepared, dict) and prepared["status"] == "deterministic_validation_failed", prepared
    assert "json_parse_failed" in [f["code"] for f in prepared["failures"]]  # the content was read and judged


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_confirmed_state_past_its_bound_is_refused_on_every_transport(
    served: Served, transport: str, tmp_path: Path
) -> None:
    arguments = {
        "workflow": "research",
        "confirmed_state": state_of(MAX_CONFIRMED_STATE_BYTES + 1),
        "host": StepKit(Path(".")).host(),
    }
    if transport == "http":
        status, _, answer = post(served.http.url, START_WORKFLOW, arguments)
        assert status == 200 and isinstance(answer, dict), answer
        error = answer["error"]
    else:

        async def call() -> dict[str, Any]:
            async with stdio_client_for(served.args, (tmp_path / "stderr.log").open("w")) as client:
                return structured_error(await client.call_tool(START_WORKFLOW, arguments))

        error = anyio.run(call)
    assert error["code"] == "confirmed_state_invalid"
    assert error["message"] == (
        f"the confirmed state is {MAX_CONFIRMED_STATE_BYTES + 1} bytes as canonical JSON (RFC 8785), past the "
        f"{MAX_CONFIRMED_STATE_BYTES} bytes a confirmed state may hold: confirm short facts (an objective, answers, "
        "choices) and keep long texts in files the workflow's steps write"
    )
