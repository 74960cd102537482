"""What the server adds around the engine: resources, refusals and its own guards.

In-process SDK client sessions against ``create_mcp_application`` over real
verified releases. The last test swaps in an engine subclass that misbehaves
on purpose - the real engine cannot be made to return an off-schema result or
crash, and those are exactly the guards under test.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest
from jsonschema import Draft202012Validator
from mcp import types
from mcp.shared.exceptions import MCPError
from rimthan_host.harness import HostProfile, client_caller
from rimthan_workflow_mcp.provider import ReleaseProvider
from rimthan_workflow_mcp.results import ToolResult
from rimthan_workflow_mcp.server import create_mcp_application
from rimthan_workflow_mcp.tool_contracts import workflow_engine_tool_contracts
from rimthan_workflow_mcp.workflow_engine import WorkflowEngineQueryModule
from rimthan_workflow_registry.release.trust import load_trust
from rimthan_workflow_registry.run.tokens import CheckpointKeyring
from support.checked_client import CheckedClient
from support.servers import ServerWorld, build_world, harness, structured_error, text_of


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("guards-world"))


def _run(provider: ReleaseProvider, body: Any) -> Any:
    async def go() -> Any:
        async with CheckedClient(create_mcp_application(provider), mode="auto") as client:
            return await body(client)

    return anyio.run(go)


def test_release_resources_are_the_verified_bytes_at_digest_uris(world: ServerWorld) -> None:
    provider = world.provider("1.2.0", migration_target="1.3.0")
    release = world.built["1.2.0"]

    async def body(client: CheckedClient) -> None:
        templates = (await client.list_resource_templates()).resource_templates
        assert {t.uri_template for t in templates} == {
            "rimthan://releases/{manifest_hex}/{+path}",
            "rimthan://manifests/{manifest_hex}/manifest.json",
        }
        listed = {r.uri: r for r in (await client.list_resources()).resources}
        for loaded in provider.held.values():
            hex_digest = loaded.digest[7:]
            manifest_uri = f"rimthan://manifests/{hex_digest}/manifest.json"
            manifest_text = text_of(await client.read_resource(manifest_uri))
            assert hashlib.sha256(manifest_text.encode()).hexdigest() == hex_digest
            for entry in json.loads(manifest_text)["files"]:
                assert listed[f"rimthan://releases/{hex_digest}/{entry['path']}"].mime_type == entry["media_type"]
        a_hex = provider.active.digest[7:]
        read = (await client.read_resource(f"rimthan://releases/{a_hex}/catalogue.toml")).contents[0]
        assert isinstance(read, types.TextResourceContents)
        assert (read.text, read.mime_type) == (
            (release / "catalogue" / "catalogue.toml").read_text("utf-8"),
            "application/toml",
        )
        for uri, code in (
            (f"rimthan://releases/{'0' * 64}/catalogue.toml", "pinned_release_unavailable"),
            (f"rimthan://releases/{a_hex}/../manifest.json", "invalid_arguments"),
            (f"rimthan://releases/{a_hex}/no-such-file.md", "invalid_arguments"),
            (f"rimthan://releases/{a_hex}/catalogue.toml\n", "invalid_arguments"),  # re's "$" takes this
            (f"rimthan://manifests/{a_hex}/manifest.json\n", "invalid_arguments"),
            ("rimthan://contracts/host/" + "0" * 64 + ".schema.json", "invalid_arguments"),
            ("file:///etc/passwd", "invalid_arguments"),
        ):
            with pytest.raises(MCPError) as refused:
                await client.read_resource(uri)
            assert refused.value.data["code"] == code, uri

    _run(provider, body)


def test_binary_release_file_is_served_as_a_blob(world: ServerWorld, tmp_path: Path) -> None:
    from support.releases import resign_release

    release = world.publish("1.2.0", tmp_path / "releases")
    logo = bytes(range(256))
    resign_release(release, [world.key], edit=lambda cat: (cat / "assets" / "logo.bin").write_bytes(logo))
    provider = ReleaseProvider.open(release, trust=load_trust(world.trust), keyring=CheckpointKeyring.generate())

    async def body(client: CheckedClient) -> None:
        read = (
            await client.read_resource(f"rimthan://releases/{provider.active.digest[7:]}/assets/logo.bin")
        ).contents[0]
        assert isinstance(read, types.BlobResourceContents)
        assert base64.b64decode(read.blob) == logo
        assert read.mime_type == "application/octet-stream"

    _run(provider, body)


def test_migration_without_a_target_is_refused_as_a_structured_error(world: ServerWorld, tmp_path: Path) -> None:
    provider = world.provider("1.2.0")

    async def body(client: CheckedClient) -> dict[str, Any]:
        run = harness(client_caller(client), tmp_path / "p")
        started = await run.start("research", initial_version="1.2.0")
        target = run.state.projection()
        result = await client.call_tool(
            "rimthan.continue_workflow",
            {
                "checkpoint": started.wire["checkpoint"],
                "confirmed_state": run.state.projection(),
                "migration": {"target_release": "research-decision@1.3.0", "confirmed_state": target, "confirm": True},
            },
        )
        return structured_error(result)

    error = _run(provider, body)
    assert error["code"] == "migration_unavailable" and "--migration-target" in error["message"]


def test_checkpoint_garbage_is_refused_by_the_engine_not_routed_blindly(world: ServerWorld) -> None:
    provider = world.provider("1.2.0")

    async def body(client: CheckedClient) -> dict[str, Any]:
        return structured_error(
            await client.call_tool(
                "rimthan.continue_workflow",
                {"checkpoint": "not.a.token", "confirmed_state": {"state": {}, "confirmations": {}}},
            )
        )

    assert _run(provider, body)["code"] == "checkpoint_invalid"


class _Misbehaving(WorkflowEngineQueryModule):
    """An engine that breaks its contract on purpose (the guards' only test double)."""

    def start_workflow(self, arguments: Mapping[str, Any]) -> ToolResult:
        return dataclasses.replace(super().start_workflow(arguments), status="advanced")  # not a start status

    def prepare_step_validation(self, arguments: Mapping[str, Any]) -> ToolResult:
        raise KeyError("engine bug with a secret /home/operator/path in it")


def test_off_schema_results_and_crashes_become_internal_errors_without_tracebacks(
    world: ServerWorld, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    provider = ReleaseProvider.open(
        world.built["1.2.0"],
        trust=load_trust(world.trust),
        keyring=CheckpointKeyring.generate(),
        module_factory=_Misbehaving,
    )

    async def body(client: CheckedClient) -> tuple[dict[str, Any], dict[str, Any]]:
        run = harness(client_caller(client), tmp_path / "p")
        state = run.state
        for name, value in run.scenario.initial_state("1.2.0").items():
            state.confirm(name, value)
        arguments = {"workflow": "research", "confirmed_state": state.projection(), "host": HostProfile().to_json()}
        off_schema = structured_error(await client.call_tool("rimthan.start_workflow", arguments))
        # a genuine checkpoint (the server verifies it before routing), so the call reaches the broken engine
        issued = WorkflowEngineQueryModule.start_workflow(provider.active.module, arguments).checkpoint
        assert issued is not None
        checkpoint = issued.token
        crashed = structured_error(
            await client.call_tool(
                "rimthan.prepare_step_validation",
                {
                    "checkpoint": checkpoint,
                    "confirmed_state": state.projection(),
                    "host": HostProfile().to_json(),
                    "artifacts": [],
                },
            )
        )
        return off_schema, crashed

    with caplog.at_level(logging.INFO, logger="rimthan.mcp"):
        off_schema, crashed = _run(provider, body)
    for error in (off_schema, crashed):
        assert error["code"] == "internal_error"
        assert "Traceback" not in error["message"] and "/home/operator" not in error["message"]
    messages = [r.getMessage() for r in caplog.records]
    assert "result violates the output schema" in messages and "tool failed unexpectedly" in messages


class _NoRelease(ToolResult):
    """A result that names no release: what the protocol never lets a tool answer."""

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "release": None}


class _Unreleased(WorkflowEngineQueryModule):
    def start_workflow(self, arguments: Mapping[str, Any]) -> ToolResult:
        result = super().start_workflow(arguments)
        return _NoRelease(**{part.name: getattr(result, part.name) for part in dataclasses.fields(result)})


def test_a_result_naming_no_release_is_refused_by_every_output_schema(world: ServerWorld, tmp_path: Path) -> None:
    """Every result names the verified release that answered it: ``release: null`` is off every tool's schema."""
    for contract in workflow_engine_tool_contracts():
        release = contract.output_schema["properties"]["release"]
        assert Draft202012Validator(release).is_valid(None) is False, contract.name
    provider = ReleaseProvider.open(
        world.built["1.2.0"],
        trust=load_trust(world.trust),
        keyring=CheckpointKeyring.generate(),
        module_factory=_Unreleased,
    )

    async def body(client: CheckedClient) -> dict[str, Any]:
        run = harness(client_caller(client), tmp_path / "p")
        for name, value in run.scenario.initial_state("1.2.0").items():
            run.state.confirm(name, value)
        arguments = {"workflow": "research", "confirmed_state": run.state.projection(), "host": HostProfile().to_json()}
        return structured_error(await client.call_tool("rimthan.start_workflow", arguments))

    error = _run(provider, body)
    assert error["code"] == "internal_error" and "output schema" in error["message"]


def _broken(schema: dict[str, Any], where: str) -> dict[str, Any]:
    """``schema`` with an invalid keyword value planted at ``where`` (top level or one $defs entry)."""
    if where == "top":
        return {**schema, "type": "not-a-type"}
    name = sorted(schema["$defs"])[0]
    return {**schema, "$defs": {**schema["$defs"], name: {**schema["$defs"][name], "type": "not-a-type"}}}


@pytest.mark.parametrize("where", ["top", "embedded-contract", "inline-contract"])
def test_construction_refuses_a_tool_contract_whose_schema_is_invalid(
    world: ServerWorld, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dataclasses import replace

    from rimthan_workflow_mcp import server as server_module
    from rimthan_workflow_mcp.tool_contracts import workflow_engine_tool_contracts
    from rimthan_workflow_registry.errors import FailureCode, RegistryError

    first, *rest = workflow_engine_tool_contracts()
    if where == "inline-contract":  # the step payload held inline in the output schema, one keyword broken
        properties = first.output_schema["properties"]
        step, null = properties["step"]["anyOf"]
        broken_step = {**step, "properties": {**step["properties"], "title": {"type": "not-a-type"}}}
        broken = {**properties, "step": {"anyOf": [broken_step, null]}}
        bad = replace(first, output_schema={**first.output_schema, "properties": broken})
    else:
        bad = replace(first, input_schema=_broken(first.input_schema, where))
    monkeypatch.setattr(server_module, "workflow_engine_tool_contracts", lambda: (bad, *rest))
    with pytest.raises(RegistryError) as refused:
        create_mcp_application(world.provider("1.2.0"))
    assert refused.value.code is FailureCode.SCHEMA_INVALID
    assert first.name in refused.value.message
