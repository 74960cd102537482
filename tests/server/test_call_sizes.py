"""Every call a tool's input schema accepts fits what every transport takes (limits.MAX_REQUEST_BODY_BYTES).

Each tool's served input schema is walked for its largest schema-valid call
(support.schema_sizes): every part bounded, all of it within the body bound.
A real ``rimthan-mcp serve`` process over Streamable HTTP takes a prepare at
the largest size a release may declare, with a confirmed state at its bound,
both full of characters JSON escapes (the SDK's own 4 MiB body bound answered
it with a bare HTTP 413) and its id and ``_meta`` at their bounds, and a submit whose validator reports are at their
bound; a confirmed state or reports past their bound are refused
(``confirmed_state_invalid``, ``invalid_arguments``) over stdio and HTTP alike.
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
from rimthan_workflow_registry.limits import (
    JSON_BYTES_PER_STRING_BYTE,
    MAX_CONFIRMED_STATE_BYTES,
    MAX_FINDING_CHARS,
    MAX_REQUEST_BODY_BYTES,
    MAX_REQUEST_ID_CHARS,
    MAX_REQUEST_META_BYTES,
    MAX_STEP_ARTIFACT_BYTES,
    MAX_VALIDATOR_REPORTS_BYTES,
    REQUEST_ENVELOPE_BYTES,
    REQUEST_REST_BYTES,
)
from rimthan_workflow_registry.protocol_names import (
    PREPARE_STEP_VALIDATION,
    START_WORKFLOW,
    SUBMIT_STEP_VALIDATION,
    TOOL_NAMES,
)
from rimthan_workflow_registry.run.validation_bundle import reports_size
from support.engines import StepKit, example_state
from support.processes import serve_module_args
from support.releases import build_release, make_keypair, trust_dir, unbounded_objective_source
from support.schema_sizes import ARTIFACT_CONTENTS, BOUNDED_ELSEWHERE, WorstCase
from support.servers import HttpServer, http_server, stdio_client_for, structured_error

Envelope = tuple[int | str, dict[str, Any] | None]  # a request's id and _meta
SDK_DEFAULT_BODY_BYTES = 4 * 1024 * 1024  # mcp.server.transport_security.DEFAULT_MAX_REQUEST_BODY_SIZE
ESCAPED = "\x01"  # JSON writes it as \u0001: six bytes for one
ASTRAL = "\U0001f600"  # json.dumps writes it as two \uXXXX escapes: twelve bytes for one character
VALIDATOR = "evidence-auditor@1.0.0"


@dataclass(frozen=True)
class Served:
    args: list[str]
    http: HttpServer


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """1.2.0 with no maxLength on ``objective``, setup's manifest declared at MAX_STEP_ARTIFACT_BYTES and
    validated by evidence-auditor."""
    root = tmp_path_factory.mktemp("call-sizes")
    source = unbounded_objective_source(root)
    workflow = source / "workflows" / "research-decision.toml"
    data = tomllib.loads(workflow.read_text("utf-8"))
    data["steps"][0]["outputs"][0]["max_bytes"] = MAX_STEP_ARTIFACT_BYTES
    data["steps"][0]["validators"] = [VALIDATOR]  # so that setup's submit carries a report
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


def post(
    url: str, name: str, arguments: dict[str, Any], envelope: Envelope = (1, None)
) -> tuple[int, int, dict[str, Any] | str]:
    """A ``tools/call`` as a plain JSON client sends it (``json.dumps``): status, body size, structured result."""
    request_id, meta = envelope
    params = {"name": name, "arguments": arguments, **({"_meta": meta} if meta is not None else {})}
    status, size, result = rpc(url, "tools/call", params, request_id, escaped=(meta or {}).get("progressToken"))
    return status, size, result["structuredContent"] if isinstance(result, dict) else result


def rpc(
    url: str, method: str, params: dict[str, Any], request_id: int | str = 1, escaped: str | None = None
) -> tuple[int, int, dict[str, Any] | str]:
    """One JSON-RPC request as a plain JSON client sends it (``json.dumps``): status, body size, result.

    ``escaped``: an ASCII string in the request written with every character a ``\\uXXXX`` escape (six bytes)."""
    call = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    text = json.dumps(call)
    if escaped:
        text = text.replace(json.dumps(escaped), '"' + "".join(f"\\u{ord(c):04x}" for c in escaped) + '"', 1)
    body = text.encode("ascii")
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
    }
    request = urllib.request.Request(url, data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, len(body), json.loads(response.read())["result"]
    except urllib.error.HTTPError as error:
        return error.code, len(body), error.read().decode()


def refusal(served: Served, transport: str, tool: str, arguments: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    """The error a call is refused with, over ``transport`` (a ``stdio`` client of its own, or a plain HTTP POST)."""
    if transport == "http":
        status, _, answer = post(served.http.url, tool, arguments)
        assert status == 200 and isinstance(answer, dict), answer
        error: dict[str, Any] = answer["error"]
        return error

    async def call() -> dict[str, Any]:
        async with stdio_client_for(served.args, (tmp_path / "stderr.log").open("w")) as client:
            return structured_error(await client.call_tool(tool, arguments))

    return anyio.run(call)


@pytest.mark.parametrize("tool", TOOL_NAMES)
def test_every_call_its_input_schema_accepts_fits_what_http_takes(served: Served, tool: str) -> None:
    """The largest schema-valid call of each tool, as tools/list serves its schema, is within the HTTP body bound.

    Tokens, confirmed states' values, artifact contents and validator reports
    count at their limits constants (code refuses them past it on every
    transport); every other part must be bounded by the schema, and all of them
    together (with the JSON-RPC envelope at its bounds: ``REQUEST_ENVELOPE_BYTES``,
    from ``MAX_REQUEST_ID_CHARS`` and ``MAX_REQUEST_META_BYTES``, which a call
    past is refused on every transport) within ``REQUEST_REST_BYTES``, the
    allowance the body bound's derivation makes for them.
    """
    status, _, listed = rpc(served.http.url, "tools/list", {})
    assert status == 200 and isinstance(listed, dict), listed
    (schema,) = [t["inputSchema"] for t in listed["tools"] if t["name"] == tool]
    worst = WorstCase(schema)
    size = worst.bytes() + REQUEST_ENVELOPE_BYTES
    assert not worst.unbounded, f"{tool}: no bound on {worst.unbounded}"
    elsewhere = sum(BOUNDED_ELSEWHERE[w] for w in worst.elsewhere) + ARTIFACT_CONTENTS * (
        "artifact/properties/content" in worst.elsewhere
    )
    assert size - elsewhere <= REQUEST_REST_BYTES, f"{tool}: the rest of the call may be {size - elsewhere} bytes"
    assert size <= MAX_REQUEST_BODY_BYTES, f"{tool}: a schema-valid call may be {size} bytes"


def largest_envelope() -> Envelope:
    """An id and a ``_meta`` at their bounds, every character one that JSON writes at its longest."""
    meta = {"progressToken": ""}
    room = MAX_REQUEST_META_BYTES - len(json.dumps(meta, separators=(",", ":")))
    meta["progressToken"] = "a" * room  # one byte each as compact JSON, written as \u0061: six
    return ASTRAL * MAX_REQUEST_ID_CHARS, meta


def test_http_takes_a_prepare_at_the_largest_size_a_release_may_declare(served: Served) -> None:
    """With an id and a ``_meta`` at their bounds, so that every part of the call is at its largest but the rest."""
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
    status, size, prepared = post(served.http.url, PREPARE_STEP_VALIDATION, arguments, largest_envelope())
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
    error = refusal(served, transport, START_WORKFLOW, arguments, tmp_path)
    assert error["code"] == "confirmed_state_invalid"
    assert error["message"] == (
        f"the confirmed state is {MAX_CONFIRMED_STATE_BYTES + 1} bytes as canonical JSON (RFC 8785), past the "
        f"{MAX_CONFIRMED_STATE_BYTES} bytes a confirmed state may hold: confirm short facts (an objective, answers, "
        "choices) and keep long texts in files the workflow's steps write"
    )


def reports_of(size: int, bundle: dict[str, Any], host: dict[str, Any]) -> list[dict[str, Any]]:
    """A fail report for the bundle's validator whose findings (escaped characters) make it ``size`` bytes."""
    (summary,) = bundle["validators"]
    report: dict[str, Any] = {
        "validator_id": summary["validator_id"],
        "version": summary["version"],
        "outcome": "fail",
        "instruction_digest": summary["instruction_digest"],
        "input_artifacts": {k: v["sha256"] for k, v in bundle["artifacts"].items()},
        "findings": [],
        "validated_by": {"harness": host["harness"], "adapter_version": host["adapter"]["version"]},
    }
    while True:
        empty = {**report, "findings": [*report["findings"], {"severity": "error", "message": ""}]}
        room = size - reports_size([empty])
        if room <= JSON_BYTES_PER_STRING_BYTE * MAX_FINDING_CHARS:
            message = ESCAPED * (room // JSON_BYTES_PER_STRING_BYTE) + "a" * (room % JSON_BYTES_PER_STRING_BYTE)
            report["findings"].append({"severity": "error", "message": message})
            break
        report["findings"].append({"severity": "error", "message": ESCAPED * MAX_FINDING_CHARS})
    assert reports_size([report]) == size
    return [report]


def prepared_setup(served: Served, tmp_path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """A run started with a state at its bound, its setup prepared: the submit's arguments but the reports."""
    kit = StepKit(tmp_path)
    state = state_of(MAX_CONFIRMED_STATE_BYTES)
    status, _, started = post(
        served.http.url, START_WORKFLOW, {"workflow": "research", "confirmed_state": state, "host": kit.host()}
    )
    assert status == 200 and isinstance(started, dict), started
    base = {"checkpoint": started["checkpoint"], "confirmed_state": state}
    arguments = {**base, "host": kit.host(), "artifacts": kit.deliver_workspace(started["step"])}
    status, _, prepared = post(served.http.url, PREPARE_STEP_VALIDATION, arguments)
    assert status == 200 and isinstance(prepared, dict) and prepared["status"] == "ready_for_semantic_validation"
    return {**base, "validation_bundle": prepared["validation_bundle"]}, kit.host()


def test_http_takes_a_submit_with_reports_at_their_bound(served: Served, tmp_path: Path) -> None:
    """The reports at MAX_VALIDATOR_REPORTS_BYTES, every character one JSON escapes: judged, findings returned."""
    arguments, host = prepared_setup(served, tmp_path)
    reports = reports_of(MAX_VALIDATOR_REPORTS_BYTES, arguments["validation_bundle"], host)
    status, size, submitted = post(served.http.url, SUBMIT_STEP_VALIDATION, {**arguments, "reports": reports})
    assert size <= MAX_REQUEST_BODY_BYTES
    assert status == 200, (status, submitted)
    assert isinstance(submitted, dict) and submitted["status"] == "validation_failed", submitted
    sent = [f["message"] for f in reports[0]["findings"]]
    assert [f["message"] for f in submitted["findings"]] == sent


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_reports_past_their_bound_are_refused_on_every_transport(
    served: Served, transport: str, tmp_path: Path
) -> None:
    arguments, host = prepared_setup(served, tmp_path)
    past = MAX_VALIDATOR_REPORTS_BYTES + 1
    arguments["reports"] = reports_of(past, arguments["validation_bundle"], host)
    error = refusal(served, transport, SUBMIT_STEP_VALIDATION, arguments, tmp_path)
    assert error["code"] == "invalid_arguments", error
    assert error["path"] == "/reports"
    assert error["message"] == (
        f"the validator reports are {past} bytes as JSON, past the {MAX_VALIDATOR_REPORTS_BYTES} one submit carries: "
        "report each problem once, in a sentence or two"
    )
