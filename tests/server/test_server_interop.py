"""What third-party clients found and what was fixed for them (see interop/ and ``make interop``).

- Tool schemas: the TypeScript SDK compiles every tool's output schema with
  Ajv, which refuses a ``$id`` that occurs twice as ambiguous. Each contract is
  now embedded once per input schema under ``$defs`` (every ``$ref`` resolves) and inline, without
  its ``$id``, in the output schemas.
- Prompts: ``prompts/list`` / ``prompts/get`` serve the active release's prompt assets.
- Logging: ``logging/setLevel`` for 2025-11-25 clients, one notification per tool call.
- ``--http-sessions``: an ``Mcp-Session-Id`` for clients that open SSE streams.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from jsonschema import Draft202012Validator
from jsonschema.validators import validator_for
from mcp import types
from mcp.shared.exceptions import MCPError
from referencing import Registry
from rimthan_host.harness import client_caller
from rimthan_workflow_mcp.schema_parts import DIGEST, contract_id, uses
from rimthan_workflow_mcp.server import create_mcp_application, param_header_schemas
from rimthan_workflow_mcp.tool_contracts import contract_documents, workflow_engine_tool_contracts
from support.checked_client import CheckedClient
from support.servers import ServerWorld, build_world, harness, http_client_for, http_server, serve_args, text_of
from test_server_http import INITIALIZE, _post


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("interop-world"))


def _walk(node: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(node, dict):
        yield path, node
        for key, value in node.items():
            yield from _walk(value, f"{path}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _walk(value, f"{path}/{index}")


@pytest.mark.parametrize("contract", workflow_engine_tool_contracts(), ids=lambda c: c.name)
def test_tool_schemas_embed_each_contract_once_and_every_ref_resolves(contract: Any) -> None:
    documents = contract_documents()
    for schema in (contract.input_schema,):
        ids = [node["$id"] for _, node in _walk(schema) if isinstance(node.get("$id"), str)]
        assert len(ids) == len(set(ids)), f"{contract.name}: a $id occurs twice"
        assert sorted(schema["$defs"]) == sorted(i.rsplit("/", 1)[1].removesuffix(".schema.json") for i in ids)
        for name, embedded in schema["$defs"].items():
            assert embedded == documents[name]
        for where, node in _walk(schema):
            ref = node.get("$ref")
            if isinstance(ref, str):
                assert ref.startswith("#/$defs/") and ref.removeprefix("#/$defs/") in schema["$defs"], (
                    f"{contract.name}{where}: $ref {ref} is not a local one"
                )
        assert schema["additionalProperties"] is False and "$id" not in schema
    # the output schema holds each contract it reaches inline, as the contract that uses another one does
    output = contract.output_schema
    copies = [node for _, node in _walk(output) if str(node.get("$comment", "")).startswith("inline copy of ")]
    for node in copies:
        (name,) = [n for n, d in documents.items() if node["$comment"] == f"inline copy of {d['$id']}"]
        assert node == uses(documents[name])
    assert not [where for where, node in _walk(output) if "$ref" in node or "$id" in node or "$defs" in node]
    assert output["additionalProperties"] is False
    # a contract holds the ones it uses inline (no second $id) and refers to nothing outside itself, so a
    # client resolves no URI: Python `referencing` re-crawled the whole tool schema for each such $ref
    for name, document in documents.items():
        assert [node["$id"] for _, node in _walk(document) if "$id" in node] == [document["$id"]], name
        assert not [where for where, node in _walk(document) if "$ref" in node], name


def test_output_schemas_embed_only_the_contracts_their_tool_returns() -> None:
    """A part a tool never fills is declared null (or an empty list): its contract is not embedded.

    Every real result still passes (the server checks its own results; the
    schema-agreement test replays a complete run), and a client validates
    less: Python jsonschema crawled the whole schema per result that reached
    a contract only prepare returns.
    """
    outputs = {c.name: c.output_schema for c in workflow_engine_tool_contracts()}
    prepare = outputs["rimthan.prepare_step_validation"]
    assert sorted({str(node["$comment"]) for _, node in _walk(prepare) if "$comment" in node}) == [
        f"inline copy of {contract_id(name)}" for name in ("failure", "validation-bundle", "validator-summary")
    ]
    assert outputs["rimthan.start_workflow"] == {
        **outputs["rimthan.continue_workflow"],
        "properties": {
            **outputs["rimthan.continue_workflow"]["properties"],
            "status": outputs["rimthan.start_workflow"]["properties"]["status"],
        },
    }
    for name, schema in outputs.items():
        assert sorted(schema["required"]) == sorted(schema["properties"]), name  # one envelope, every key sent
    submit = outputs["rimthan.submit_step_validation"]["properties"]
    bundle, validators = (
        {k: v for k, v in submit[n].items() if k != "description"} for n in ("validation_bundle", "validators")
    )
    assert bundle == {"type": "null"} and validators == {"type": "array", "maxItems": 0}


def test_a_reference_through_a_contract_still_validates() -> None:
    """validator-summary is inline in validation-bundle: a bad summary inside a bundle is refused."""
    (submit,) = [c for c in workflow_engine_tool_contracts() if c.name == "rimthan.submit_step_validation"]
    validator = Draft202012Validator(submit.input_schema)
    digest = "sha256:" + "0" * 64
    bundle: dict[str, Any] = {
        "workflow": {"id": "w", "version": "1"},
        "release": {"id": "r", "manifest_digest": digest},
        "manifest_digest": digest,
        "step_id": "s",
        "checkpoint_digest": digest,
        "artifacts": {},
        "validators": [
            {
                "validator_id": "v",
                "version": "1",
                "instruction_digest": digest,
                "input_digest": digest,
                "subagent": "a",
                "report_required": True,
            }
        ],
        "issued_at": 1,
        "key_id": "k",
        "validation_token": "t",
    }
    call = {
        "checkpoint": "c",
        "confirmed_state": {"state": {}, "confirmations": {}},
        "validation_bundle": bundle,
        "reports": [],
    }
    assert list(validator.iter_errors(call)) == []
    bundle["validators"][0]["surprise"] = True
    assert [e.message for e in validator.iter_errors(call)] == [
        "Additional properties are not allowed ('surprise' was unexpected)"
    ]


def test_nullable_result_parts_take_null_or_exactly_their_schema() -> None:
    """A nullable part is ``anyOf [part, null]``, the part first (a client stops at the first match),
    but ``null`` first for a question or a migration preview (a run meets those only now and then).

    Checked the way the Python SDK client checks a result (``validator_for``
    on an empty registry).
    """
    (cont,) = [c for c in workflow_engine_tool_contracts() if c.name == "rimthan.continue_workflow"]
    schema = cont.output_schema
    properties = schema["properties"]
    parts = {name: {k: v for k, v in part.items() if k != "description"} for name, part in properties.items()}
    assert parts["checkpoint_digest"] == {"anyOf": [DIGEST, {"type": "null"}]}
    documents = contract_documents()
    assert parts["step"] == {"anyOf": [uses(documents["step-payload"]), {"type": "null"}]}
    assert parts["question"] == {"anyOf": [{"type": "null"}, uses(documents["question"])]}
    assert parts["migration"] == {"anyOf": [{"type": "null"}, uses(documents["migration-preview"])]}
    validator = validator_for(schema)(schema, registry=Registry())
    envelope: dict[str, Any] = {name: None for name in properties} | {
        "release": {"id": "r@1.0.0", "manifest_digest": "sha256:" + "0" * 64},  # never null: names the release
        "status": "active",
        "failures": [],
        "findings": [],
        "validators": [],
        "message": "m",
    }
    assert list(validator.iter_errors(envelope)) == []
    refused: dict[str, Any] = {
        "workflow": {"id": "", "version": "1"},
        "release": {"id": "r"},
        "checkpoint": "",
        "checkpoint_digest": "sha256:00",
        "sequence": 0,
        "step": {},
        "question": {"field": "f", "prompt": "p", "choices": [], "extra": 1},
        "migration": [],
    }
    for name, value in refused.items():
        assert list(validator.iter_errors({**envelope, name: value})), name
    for name in ("sequence", "checkpoint", "workflow"):
        assert list(validator.iter_errors({**envelope, name: True})), name


def test_no_tool_declares_mcp_param_headers_so_the_sdk_walks_no_schema_for_them() -> None:
    """``get_tool_input_schema`` answers only for tools declaring ``x-mcp-header``: none of the four does."""
    contracts = {c.name: c for c in workflow_engine_tool_contracts()}
    assert param_header_schemas(contracts) == {}
    (start,) = [c for c in contracts.values() if c.name == "rimthan.start_workflow"]
    annotated = {**start.input_schema, "properties": {**start.input_schema["properties"]}}
    annotated["properties"]["workflow"] = {**annotated["properties"]["workflow"], "x-mcp-header": "Workflow"}
    headed = dataclasses.replace(start, input_schema=annotated)
    assert param_header_schemas({headed.name: headed}) == {headed.name: annotated}


def test_prompts_serve_the_release_prompt_assets(world: ServerWorld) -> None:
    source = (world.built["1.2.0"] / "catalogue" / "assets" / "prompts" / "research-brief.md").read_text("utf-8")

    async def check() -> None:
        for mode in ("legacy", "auto"):
            async with CheckedClient(create_mcp_application(world.provider("1.2.0")), mode=mode) as client:
                (prompt,) = (await client.list_prompts()).prompts
                assert prompt.name == "research-brief"
                assert prompt.description == "Start or resume a Rimthan research-decision run for one product decision"
                assert [a.name for a in prompt.arguments or []] == ["arguments"]
                got = await client.get_prompt("research-brief", {"arguments": "Should we price per seat?"})
                text = got.messages[0].content.text  # type: ignore[union-attr]
                assert text.startswith(
                    "Run the Rimthan `research-decision` workflow for this decision: Should we price per seat?"
                )
                assert "$ARGUMENTS" not in text and "---" not in text.splitlines()[0]
                body = source.split("---\n", 2)[2].lstrip("\n")
                assert text == body.replace("$ARGUMENTS", "Should we price per seat?")
                # usable before setup-workspace: it names no file only setup delivers, and it
                # carries every pinned adapter as an embedded resource at its release URI
                assert ".claude/" not in text and ".opencode/" not in text
                attached = [m.content.resource for m in got.messages[1:]]  # type: ignore[union-attr]
                assert [r.uri.rsplit("/", 2)[-2:] for r in attached] == [
                    ["adapters", "claude-code.md"],
                    ["adapters", "opencode.md"],
                ]
                for resource in attached:
                    assert isinstance(resource, types.TextResourceContents), resource
                    adapter = world.built["1.2.0"] / "catalogue" / "adapters" / resource.uri.rsplit("/", 1)[1]
                    assert resource.text == adapter.read_text("utf-8") and resource.mime_type == "text/markdown"
                    assert text_of(await client.read_resource(resource.uri)) == resource.text
                with pytest.raises(MCPError) as unknown:
                    await client.get_prompt("test_simple_prompt")
                error = unknown.value.error
                assert error.code == -32602 and "no prompt 'test_simple_prompt'" in error.message
                with pytest.raises(MCPError):
                    await client.get_prompt("research-brief", {"arguments": "x", "arg2": "y"})

    anyio.run(check)


def test_logging_set_level_sends_one_notification_per_call_at_or_above_it(world: ServerWorld, tmp_path: Path) -> None:
    received: list[Any] = []

    async def on_log(params: Any) -> None:
        received.append(params)

    async def check() -> None:
        app = create_mcp_application(world.provider("1.2.0"))
        async with CheckedClient(app, mode="legacy", logging_callback=on_log) as client:
            assert (await client.call_tool("rimthan.start_workflow", {"workflow": "research"})).is_error
            await anyio.sleep(0.05)
            assert received == []  # nothing until the client chose a level
            await client.set_logging_level("warning")
            assert (await client.call_tool("rimthan.start_workflow", {"workflow": "research"})).is_error
            run = harness(client_caller(client), tmp_path / "project")
            await run.start("research", initial_version="1.2.0")  # served: info, below the level
            await anyio.sleep(0.05)
            assert [(m.level, m.logger, m.data) for m in received] == [
                ("warning", "rimthan", {"tool": "rimthan.start_workflow", "refused": "invalid_arguments"})
            ]
            await client.set_logging_level("info")
            await run.start("research", initial_version="1.2.0")
            await anyio.sleep(0.05)
            served = received[-1]
            assert served.level == "info" and served.data == {
                "tool": "rimthan.start_workflow",
                "status": "active",
                "step": "setup-workspace",
                "sequence": 1,
            }
            assert "Head of Platform" not in json.dumps([m.data for m in received])  # never state values

    anyio.run(check)


def test_http_sessions_issue_a_session_id_and_serve_both_eras(world: ServerWorld, tmp_path: Path) -> None:
    args = serve_args(world, world.built["1.2.0"], state_dir=tmp_path / "state", extra=["--http-sessions"])
    with http_server(args) as server:
        status, headers, body = _post(server.url, INITIALIZE)
        assert status == 200 and json.loads(body)["result"]["capabilities"]["logging"] == {}
        assert {k.lower(): v for k, v in headers.items()}.get("mcp-session-id")
        assert "transport http (Streamable HTTP with sessions)" in server.stderr()

        async def both_eras() -> None:
            for mode, version in (("legacy", "2025-11-25"), ("auto", "2026-07-28")):
                async with http_client_for(server.url, mode=mode) as client:
                    assert client.protocol_version == version
                    assert len((await client.list_tools()).tools) == 4
                    started = await harness(client_caller(client), tmp_path / mode).start(
                        "research", initial_version="1.2.0"
                    )
                    assert started.status == "active" and started.step_id == "setup-workspace"

        anyio.run(both_eras)
