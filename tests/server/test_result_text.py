"""Every tool result's text is ``rfc8785.dumps`` of its structured content, byte for byte.

The server composes a result's text from the RFC 8785 bytes of the step
payload's release-constant parts, made once per release (``StepPayloads``,
``CanonicalParts``). Packaged runs go through the server's own ``call_tool``
over real signed releases: every result (steps, questions, failures, repairs,
refusals) is compared with the library's serialisation of the whole.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import anyio
import pytest
import rfc8785
from rimthan_workflow_mcp.server import RuntimeState, call_tool, runtime_state
from rimthan_workflow_registry import canonical
from rimthan_workflow_registry.canonical import member_digests, recurring_member_digests
from rimthan_workflow_registry.release.verified import ReleaseFiles
from rimthan_workflow_registry.run import ArtifactReceipt, Checkpoint, StepPayloads, peek_claims
from support.servers import ServerWorld, build_world, harness


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("result-text-world"))


def _run(state: RuntimeState, project: Path, route: str, fail_once: frozenset[str]) -> list[dict[str, Any]]:
    """A packaged run through ``call_tool``; each result's text checked against rfc8785 of its structured content."""
    results: list[dict[str, Any]] = []

    async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = call_tool(state, name, dict(arguments))
        structured: dict[str, Any] | None = result.structured_content
        assert structured is not None
        assert result.content[0].text.encode("utf-8") == rfc8785.dumps(structured), name  # type: ignore[union-attr]
        results.append(structured)
        return structured

    async def go() -> None:
        run = harness(call, project, route, fail_once)
        await run.run(await run.start("research", initial_version="1.2.0"))

    anyio.run(go)
    return results


@pytest.mark.parametrize(
    ("route", "fail_once"), [("desk-research", frozenset({"decision-critic"})), ("experiment", frozenset())]
)
def test_every_result_text_of_a_packaged_run_is_rfc8785_of_the_whole(
    world: ServerWorld, tmp_path: Path, route: str, fail_once: frozenset[str]
) -> None:
    provider = world.provider("1.2.0")
    state = runtime_state(provider)
    results = _run(state, tmp_path / "first", route, fail_once)
    assert results[-1]["status"] == "completed"
    assert ("validation_failed" in {r["status"] for r in results}) == bool(fail_once)
    # a second run on the same process reuses the kept parts: same texts, shared step values
    again = _run(state, tmp_path / "second", route, fail_once)
    first_step = next(r["step"] for r in results if r["step"])
    assert next(r["step"] for r in again if r["step"])["instruction"] is first_step["instruction"]
    assert provider.active.module.step_payloads.canonical.bytes_of(first_step["instruction"]) == rfc8785.dumps(
        first_step["instruction"]
    )
    refused = call_tool(state, "rimthan.continue_workflow", {"checkpoint": "x.y.z", "confirmed_state": {}})
    assert refused.is_error
    assert refused.content[0].text.encode("utf-8") == rfc8785.dumps(refused.structured_content)  # type: ignore[union-attr]


def test_a_step_whose_files_are_read_from_disk_is_built_on_every_call(world: ServerWorld) -> None:
    provider = world.provider("1.2.0")
    release = provider.active.release
    workflow = release.catalogue.workflows[0]
    step = workflow.steps[0]
    adapter = release.catalogue.host_adapters[0]
    kept = StepPayloads(release)
    assert (
        kept.payload(workflow, step, adapter, None)["instruction"]
        is kept.payload(workflow, step, adapter, None)["instruction"]
    )
    files = release.files
    on_disk = dataclasses.replace(release, files=ReleaseFiles(root=files.root, entries=files.entries, cache={}))
    rebuilt = StepPayloads(on_disk)
    first, second = (rebuilt.payload(workflow, step, adapter, None) for _ in range(2))
    assert first == second == kept.payload(workflow, step, adapter, None)
    assert first["instruction"] is not second["instruction"]
    assert rebuilt.canonical.dumps(first) == rfc8785.dumps(first)


def test_a_step_without_inputs_is_one_kept_part_and_inputs_make_a_new_payload(world: ServerWorld) -> None:
    provider = world.provider("1.2.0")
    release = provider.active.release
    workflow = release.catalogue.workflows[0]
    adapter = release.catalogue.host_adapters[0]
    payloads = StepPayloads(release)
    step = workflow.steps[1]
    payload = payloads.payload(workflow, step, adapter, None)
    assert payload["inputs"] == []
    assert payloads.payload(workflow, step, adapter, None) is payload  # the kept payload itself
    assert payloads.canonical.bytes_of(payload) == rfc8785.dumps(payload)
    # a step whose checkpoint holds receipts of its inputs: a new payload with them, the kept values shared
    consuming = dataclasses.replace(step, inputs=("workspace-manifest", "not-yet-produced"))
    receipt = ArtifactReceipt(sha256="ab" * 32, size=3)
    cp = Checkpoint(1, workflow.id, workflow.version, release.release_id, release.manifest_digest, step.id, "", None)
    cp = dataclasses.replace(cp, artifacts=cp.artifacts.merged({"workspace-manifest": receipt}))
    with_inputs = payloads.payload(workflow, consuming, adapter, cp)
    assert with_inputs["inputs"] == [{"artifact_id": "workspace-manifest", "sha256": "ab" * 32}]
    assert with_inputs["instruction"] is payloads.payload(workflow, consuming, adapter, None)["instruction"]
    assert payloads.payload(workflow, consuming, adapter, None)["inputs"] == []
    assert payload["inputs"] == []  # the kept payload was not touched
    envelope: dict[str, Any] = {"status": "active", "step": with_inputs, "again": payload}
    assert payloads.canonical.dumps(envelope) == rfc8785.dumps(envelope)


def test_a_proposed_next_state_is_never_remembered(world: ServerWorld, tmp_path: Path) -> None:
    """A ``next_confirmed_state`` is not what the checkpoint binds: other runs in the same state must not find it.

    Two runs whose confirmed states are equal hold checkpoints of the same state
    digest; were a proposed state remembered under that digest, a faster call
    would tell one run what the other proposed.
    """
    state = runtime_state(world.provider("1.2.0"))
    proposed: list[tuple[str, Any]] = []

    async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if arguments.get("next_confirmed_state") is not None:
            claims = peek_claims(arguments["checkpoint"])
            assert claims is not None
            scope = claims["state"]
            proposed.append((scope, arguments["next_confirmed_state"]["state"]))  # what the checkpoint's state is not
        structured: dict[str, Any] | None = call_tool(state, name, dict(arguments)).structured_content
        assert structured is not None
        return structured

    async def go() -> None:
        run = harness(call, tmp_path, "desk-research", frozenset())
        await run.run(await run.start("research", initial_version="1.2.0"))

    anyio.run(go)
    assert proposed
    for scope, value in proposed:
        before = canonical._digests_of_marshalled.cache_info().hits
        assert recurring_member_digests(value, scope) == member_digests(value)
        assert canonical._digests_of_marshalled.cache_info().hits == before, value
