"""The four-tool workflow protocol, tested as the protocol file names it.

Section A (engine, in-process over real signed releases) and section B (the
same protocol through the real MCP server over stdio and HTTP) share the
fixtures in conftest.py and the helpers in tests/support/.
"""

from __future__ import annotations

import hashlib as _hashlib
import json as _json
import signal as _signal
from collections.abc import Callable as _Callable
from pathlib import Path as _Path
from typing import Any as _Any

import anyio as _anyio
import pytest as _pytest
import support.servers as _srv
from rimthan_host.harness import HostProfile, client_caller
from rimthan_workflow_mcp.schema_parts import uses
from rimthan_workflow_mcp.server import create_mcp_application
from rimthan_workflow_mcp.tool_contracts import contract_documents, workflow_engine_tool_contracts
from rimthan_workflow_registry.canonical import canonical_bytes as _canonical_bytes
from rimthan_workflow_registry.errors import FailureCode, WorkflowProtocolError
from rimthan_workflow_registry.run.token_wire import peek_claims, token_digest
from rimthan_workflow_registry.run.tokens import CheckpointKeyring
from support.checked_client import CheckedClient
from support.engines import Engines, TickingClock, WireEngine, drive, example_state, examples, make_engines
from support.servers import (
    CORRUPTIONS,
    HttpServer,
    ServerWorld,
    http_client_for,
    http_server,
    mcp_client,
    serve_args,
    structured_error,
    text_of,
)


@_pytest.fixture(scope="module")
def engines(tmp_path_factory: _pytest.TempPathFactory) -> Engines:
    return make_engines(tmp_path_factory.mktemp("engine"), TickingClock())


def _claims(token: str) -> dict[str, _Any]:
    claims = peek_claims(token)
    assert claims is not None
    return claims


def _payload_text(token: str) -> str:
    """The claims the token carries, as text (its payload's JSON, escapes decoded)."""
    return _json.dumps(_claims(token), ensure_ascii=False)


NO_ARTIFACTS = {"names": [], "sha256": "", "sizes": []}  # empty receipt tables, in the columns a checkpoint carries
NO_VALIDATORS = {"names": [], "input_sha256": ""}


def test_complete_stateless_validation_loop_fails_repairs_and_advances(engines: Engines) -> None:
    engine = engines.wire("1.2.0")
    harness = engines.harness("loop")
    values = example_state("1.2.0")
    state = harness.confirm(values)

    # start: setup-workspace with prompt/skill/subagent/adapter assets, no objective in the token
    started = engine.start_workflow({"workflow": "research", "confirmed_state": state, "host": harness.host()})
    assert started["status"] == "active" and started["step"]["id"] == "setup-workspace"
    assert {a["kind"] for a in started["step"]["host_assets"]} == {"prompt", "skill", "subagent", "adapter"}
    token = started["checkpoint"]
    assert values["objective"] not in token and values["objective"] not in _payload_text(token)
    claims = _claims(token)
    assert (claims["seq"], claims["step"], claims["parent"], claims["artifacts"], claims["validators"]) == (
        1,
        "setup-workspace",
        None,
        NO_ARTIFACTS,
        NO_VALIDATORS,
    )
    assert set(claims["host"]) == {"harness", "adapter_version", "capabilities", "validator_capabilities"}
    assert claims["host"]["capabilities"] == sorted(harness.capabilities)

    # deterministic failure before any semantic validation: a tampered workspace manifest
    setup = started["step"]
    artifacts = harness.deliver_workspace(setup)
    tampered = _json.loads(artifacts[0]["content"])
    tampered["delivered"][0]["sha256"] = "0" * 64
    del tampered["symlink_free"]
    bad = [{**artifacts[0], "content": _json.dumps(tampered)}]
    failed = engine.prepare_step_validation(
        {"checkpoint": token, "confirmed_state": state, "host": harness.host(), "artifacts": bad}
    )
    assert failed["status"] == "deterministic_validation_failed"
    assert failed["validation_bundle"] is None and failed["validators"] == []
    codes = {f["code"] for f in failed["failures"]}
    assert {"json_schema_failed", "workspace_manifest_contract_mismatch"} <= codes
    assert failed["checkpoint"] == token

    ready = engine.prepare_step_validation(
        {"checkpoint": token, "confirmed_state": state, "host": harness.host(), "artifacts": artifacts}
    )
    assert ready["status"] == "ready_for_semantic_validation" and ready["validators"] == []
    advanced = engine.submit_step_validation(
        {"checkpoint": token, "confirmed_state": state, "validation_bundle": ready["validation_bundle"], "reports": []}
    )
    assert advanced["status"] == "advanced" and advanced["step"]["id"] == "interview"
    assert _claims(advanced["checkpoint"])["parent"] == token_digest(token)
    assert "workspace-manifest" in _claims(advanced["checkpoint"])["artifacts"]["names"]

    # ungated interview and confirm-contract, then the route question
    cp = advanced["checkpoint"]
    for expected in ("confirm-contract", "select-route"):
        moved = engine.continue_workflow({"checkpoint": cp, "confirmed_state": state})
        assert (moved["status"], moved["step"]["id"]) == ("active", expected)
        cp = moved["checkpoint"]
    asked = engine.continue_workflow({"checkpoint": cp, "confirmed_state": state})
    assert asked["status"] == "input_required" and asked["question"]["field"] == "research_route"
    engines.clock.tick()
    routed_state = harness.confirm({**values, "research_route": "desk-research"}, previous=state)
    routed = engine.continue_workflow(
        {"checkpoint": cp, "confirmed_state": state, "next_confirmed_state": routed_state}
    )
    assert (routed["status"], routed["step"]["id"]) == ("active", "desk-research")
    state, cp, step = routed_state, routed["checkpoint"], routed["step"]

    # continue never advances a gated step
    again = engine.continue_workflow({"checkpoint": cp, "confirmed_state": state})
    assert (again["status"], again["step"]["id"], again["checkpoint"]) == ("active", "desk-research", cp)

    # deterministic: a JSON artifact that breaks its schema, and a missing attestation
    outputs = harness.write_outputs(step, examples("1.2.0"))
    broken = [dict(outputs[0], content='{"route": "desk-research"}'), {**outputs[1], "attestation": None}]
    broken[1].pop("attestation")
    failed = engine.prepare_step_validation(
        {"checkpoint": cp, "confirmed_state": state, "host": harness.host(), "artifacts": broken}
    )
    assert failed["status"] == "deterministic_validation_failed" and failed["validators"] == []
    assert {"json_schema_failed", "output_attestation_required"} <= {f["code"] for f in failed["failures"]}

    ready = engine.prepare_step_validation(
        {"checkpoint": cp, "confirmed_state": state, "host": harness.host(), "artifacts": outputs}
    )
    assert ready["status"] == "ready_for_semantic_validation"
    assert sorted(v["validator_id"] for v in ready["validators"]) == ["decision-critic", "evidence-auditor"]
    bundle = ready["validation_bundle"]
    reports = harness.reports(ready)

    def submit(reps: list[dict[str, _Any]]) -> dict[str, _Any]:
        return engine.submit_step_validation(
            {"checkpoint": cp, "confirmed_state": state, "validation_bundle": bundle, "reports": reps}
        )

    # report-set rejection: missing, extra (duplicate), and a validator the bundle does not name
    for wrong_set in (reports[:1], [*reports, reports[0]]):
        with _pytest.raises(WorkflowProtocolError) as err:
            submit(wrong_set)
        assert err.value.code is FailureCode.REPORT_SET_MISMATCH
    ghost = dict(reports[0], validator_id="ghost-auditor")
    with _pytest.raises(WorkflowProtocolError) as err:
        submit([*reports, ghost])
    assert err.value.code is FailureCode.REPORT_SET_MISMATCH
    assert err.value.details == {"missing": [], "extra": ["ghost-auditor@1.0.0"]}
    # wrong-host rejection
    foreign = [dict(r, validated_by={"harness": "opencode", "adapter_version": "1.0.0"}) for r in reports]
    with _pytest.raises(WorkflowProtocolError) as err:
        submit(foreign)
    assert err.value.code is FailureCode.REPORT_HOST_MISMATCH
    # stale: a report on other bytes
    stale = [dict(reports[0], input_artifacts={k: "f" * 64 for k in reports[0]["input_artifacts"]}), reports[1]]
    with _pytest.raises(WorkflowProtocolError) as err:
        submit(stale)
    assert err.value.code is FailureCode.REPORT_STALE

    # failure loop on the same step: one validator fails
    verdicts = {"decision-critic@1.0.0": "fail"}
    failed = submit(harness.reports(ready, verdicts))
    assert failed["status"] == "validation_failed" and failed["step"]["id"] == "desk-research"
    assert failed["findings"] and failed["findings"][0]["validator"] == "decision-critic@1.0.0"
    assert failed["checkpoint"] != cp and _claims(failed["checkpoint"])["step"] == "desk-research"
    assert _claims(failed["checkpoint"])["validators"]["names"] == ["evidence-auditor@1.0.0"]

    # failed-validator-only retry: the passed validator is reused for identical inputs
    cp = failed["checkpoint"]

    def prepare(artifacts: list[dict[str, _Any]]) -> dict[str, _Any]:
        return engine.prepare_step_validation(
            {"checkpoint": cp, "confirmed_state": state, "host": harness.host(), "artifacts": artifacts}
        )

    retry = prepare(outputs)
    assert [v["validator_id"] for v in retry["validators"]] == ["decision-critic"]
    reused = {v["validator_id"]: v["report_required"] for v in retry["validation_bundle"]["validators"]}
    assert reused == {"evidence-auditor": False, "decision-critic": True}
    # a report for the reused validator is not expected either
    with _pytest.raises(WorkflowProtocolError) as err:
        engine.submit_step_validation(
            {
                "checkpoint": cp,
                "confirmed_state": state,
                "validation_bundle": retry["validation_bundle"],
                "reports": harness.reports(ready),
            }
        )
    assert err.value.code is FailureCode.REPORT_SET_MISMATCH

    # repair: the critic's finding is fixed in findings.md - changed bytes on disk, a new digest
    def repaired_text(artifact_id: str, media_type: str) -> str:
        text = examples("1.2.0")(artifact_id, media_type)
        return text + "\nRepaired after the decision critic's review.\n" if artifact_id == "findings" else text

    repaired = harness.write_outputs(step, repaired_text)
    before = {a["artifact_id"]: a["attestation"]["sha256"] for a in outputs}
    after = {a["artifact_id"]: a["attestation"]["sha256"] for a in repaired}
    assert after["findings"] != before["findings"] and after["evidence-log"] == before["evidence-log"]
    assert {a["artifact_id"]: a["attestation"]["write"] for a in repaired}["findings"] == "replaced"
    fixed = prepare(repaired)
    assert fixed["status"] == "ready_for_semantic_validation"
    assert fixed["validation_bundle"]["artifacts"]["findings"]["sha256"] == after["findings"]
    # the inputs changed, so the validator that passed on the old bytes is re-run too
    assert sorted(v["validator_id"] for v in fixed["validators"]) == ["decision-critic", "evidence-auditor"]
    assert all(v["report_required"] for v in fixed["validation_bundle"]["validators"])
    fixed_reports = harness.reports(fixed)
    # reports judging the pre-repair bytes are stale
    on_old_bytes = [dict(r, input_artifacts=before) for r in fixed_reports]
    with _pytest.raises(WorkflowProtocolError) as err:
        engine.submit_step_validation(
            {
                "checkpoint": cp,
                "confirmed_state": state,
                "validation_bundle": fixed["validation_bundle"],
                "reports": on_old_bytes,
            }
        )
    assert err.value.code is FailureCode.REPORT_STALE
    done = engine.submit_step_validation(
        {
            "checkpoint": cp,
            "confirmed_state": state,
            "validation_bundle": fixed["validation_bundle"],
            "reports": fixed_reports,
        }
    )
    assert done["status"] == "completed"
    final = _claims(done["checkpoint"])
    assert final["artifacts"]["names"] == ["evidence-log", "findings", "workspace-manifest"]
    assert final["artifacts"]["sha256"][64:128] == after["findings"]
    assert final["validators"]["names"] == ["decision-critic@1.0.0", "evidence-auditor@1.0.0"]


@_pytest.mark.parametrize("route", ["desk-research", "user-interviews", "experiment"])
def test_packaged_research_workflow_executes_every_mvp_gate(engines: Engines, route: str) -> None:
    log = drive(engines, "1.2.0", route, name=f"mvp-{route}", fail_once=frozenset({"evidence-auditor@1.0.0"}))
    path = [(tool.rsplit(".", 1)[1], status, step) for tool, status, step in log.statuses]
    assert path[0] == ("start_workflow", "active", "setup-workspace")
    assert ("submit_step_validation", "advanced", "interview") in path
    assert ("continue_workflow", "active", "confirm-contract") in path
    assert ("continue_workflow", "active", "select-route") in path
    assert ("continue_workflow", "input_required", "select-route") in path
    assert ("continue_workflow", "active", route) in path
    assert ("submit_step_validation", "validation_failed", route) in path
    assert path[-1][:2] == ("submit_step_validation", "completed")
    sequences = [_claims(t)["seq"] for t in log.checkpoints]
    assert sequences == list(range(1, len(sequences) + 1))
    for parent, child in zip(log.checkpoints, log.checkpoints[1:], strict=False):
        assert _claims(child)["parent"] == token_digest(parent)
    assert all(_claims(t)["release"]["id"] == "research-decision@1.2.0" for t in log.checkpoints)


def _migration(
    engines: Engines,
    target_state: dict[str, _Any],
    *,
    confirm: bool,
    release: str = "research-decision@1.3.0",
    host: dict[str, _Any] | None = None,
) -> dict[str, _Any]:
    request = {"target_release": release, "confirmed_state": target_state, "confirm": confirm}
    if host is not None:
        request["host"] = host
    return request


def test_checkpoint_migration_previews_impact_then_restarts_on_new_release(engines: Engines, tmp_path: _Path) -> None:
    source, target = engines.wire("1.2.0"), engines.wire("1.3.0")
    harness = engines.harness("migration")
    state = harness.confirm(example_state("1.2.0"))
    started = source.start_workflow({"workflow": "research-decision", "confirmed_state": state, "host": harness.host()})
    advanced = harness.pass_setup(source, started, state)
    cp = advanced["checkpoint"]
    engines.clock.tick()
    target_values = {**example_state("1.2.0"), "risk_tolerance": "medium"}
    target_state = harness.confirm(target_values)

    def migrate(request: dict[str, _Any], src: WireEngine = source, dst: WireEngine = target) -> dict[str, _Any]:
        return src.migrate_workflow(dst.module, {"checkpoint": cp, "confirmed_state": state, "migration": request})

    # preview: blocked until the user confirms, listing everything invalidated
    preview = migrate(_migration(engines, target_state, confirm=False))
    assert preview["status"] == "blocked" and preview["checkpoint"] == cp
    assert [f["code"] for f in preview["failures"]] == ["migration_confirmation_required"]
    impact = preview["migration"]
    assert impact["invalidated_artifacts"] == ["workspace-manifest"] and impact["restart_step"] == "setup-workspace"
    assert impact["to"]["release"] == "research-decision@1.3.0" and impact["confirmed"] is False

    # fail-closed rules
    refusals: dict[str, _Callable[[], object]] = {
        "migration_scope_mismatch": lambda: migrate(
            _migration(engines, target_state, confirm=True, release="research-decision@9.9.9")
        ),
        "migration_same_release": lambda: migrate(
            _migration(engines, state, confirm=True, release="research-decision@1.2.0"), dst=source
        ),
    }
    for code, attempt in refusals.items():
        with _pytest.raises(WorkflowProtocolError) as err:
            attempt()
        assert err.value.code.value == code
    # every target field must be explicitly (and freshly) confirmed
    before = {**target_state["confirmations"]["objective"], "confirmed_at": _claims(cp)["iat"] - 1}
    stale = dict(target_state, confirmations={**target_state["confirmations"], "objective": before})
    blocked = migrate(_migration(engines, stale, confirm=True))
    assert blocked["status"] == "blocked" and {f["code"] for f in blocked["failures"]} == {"confirmation_required"}
    missing = harness.confirm(example_state("1.2.0"))  # no risk_tolerance: fails the 1.3.0 schema
    with _pytest.raises(WorkflowProtocolError) as err:
        migrate(_migration(engines, missing, confirm=True))
    assert err.value.code is FailureCode.CONFIRMED_STATE_INVALID
    # target adapter and capabilities must pass _host_blockers
    weak_host = dict(
        harness.host(), capabilities=["workspace.write"], adapter={"id": "claude-code", "version": "0.9.0"}
    )
    blocked = migrate(_migration(engines, target_state, confirm=True, host=weak_host))
    assert {"host_adapter_incompatible", "host_capability_missing"} <= {f["code"] for f in blocked["failures"]}

    # confirmed: restart at setup-workspace on the target with a parent link
    moved = migrate(_migration(engines, target_state, confirm=True))
    assert moved["status"] == "active" and moved["step"]["id"] == "setup-workspace"
    assert moved["release"]["id"] == "research-decision@1.3.0" and moved["migration"]["confirmed"] is True
    claims = _claims(moved["checkpoint"])
    assert claims["parent"] == token_digest(cp) and claims["seq"] == _claims(cp)["seq"] + 1
    assert (claims["artifacts"], claims["validators"], claims["workflow"]["version"]) == (
        NO_ARTIFACTS,
        NO_VALIDATORS,
        "1.3.0",
    )
    # the migrated run is served by the target release, not the source
    with _pytest.raises(WorkflowProtocolError) as err:
        source.continue_workflow({"checkpoint": moved["checkpoint"], "confirmed_state": target_state})
    assert err.value.code is FailureCode.PINNED_RELEASE_UNAVAILABLE
    resumed = target.continue_workflow({"checkpoint": moved["checkpoint"], "confirmed_state": target_state})
    assert resumed["step"]["id"] == "setup-workspace"
    # and a module without a target refuses migration outright
    with _pytest.raises(WorkflowProtocolError) as err:
        source.continue_workflow(
            {"checkpoint": cp, "confirmed_state": state, "migration": _migration(engines, target_state, confirm=True)}
        )
    assert err.value.code is FailureCode.MIGRATION_UNAVAILABLE


# ============================================================================ B: MCP server

# Section B: the protocol through the real server (``rimthan-mcp serve`` processes and the SDK client).
# Helpers live in tests/support/servers.py; more server tests are in tests/server/.

_MCP_MODES = [("stdio", "legacy"), ("stdio", "auto"), ("http", "legacy"), ("http", "auto")]


def _embedded(document: dict[str, _Any], schema: _Any) -> bool:
    if schema == document:
        return True
    if isinstance(schema, dict):
        return any(_embedded(document, v) for v in schema.values())
    if isinstance(schema, list):
        return any(_embedded(document, v) for v in schema)
    return False


@_pytest.mark.parametrize(("transport", "mode"), _MCP_MODES)
def test_four_tools_over_stdio_and_http_closed_private_and_identical_to_resources(
    transport: str, mode: str, mcp_world: ServerWorld, mcp_http: HttpServer, tmp_path: _Path
) -> None:
    contracts = workflow_engine_tool_contracts()
    documents = contract_documents()

    async def check() -> None:
        async with mcp_client(transport, mode, mcp_world, mcp_http, tmp_path) as client:
            assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
            listed = await client.list_tools()
            assert (
                [t.name for t in listed.tools]
                == [c.name for c in contracts]
                == [
                    "rimthan.start_workflow",
                    "rimthan.continue_workflow",
                    "rimthan.prepare_step_validation",
                    "rimthan.submit_step_validation",
                ]
            )
            for tool, contract in zip(listed.tools, contracts, strict=True):
                wire = tool.model_dump(by_alias=True, exclude_none=True, mode="json")
                assert wire["inputSchema"] == contract.input_schema and wire["outputSchema"] == contract.output_schema
                assert wire["inputSchema"]["additionalProperties"] is False
                assert wire["outputSchema"]["additionalProperties"] is False
                hints = wire["annotations"]
                assert hints["readOnlyHint"] is True
                assert hints["idempotentHint"] is (contract.name != "rimthan.start_workflow")
            if mode == "auto":  # cache hints reach 2026-07-28 clients only
                assert "cache_scope" in listed.model_fields_set and listed.cache_scope == "private"
            served = {
                r.uri: r for r in (await client.list_resources()).resources if r.uri.startswith("rimthan://contracts/")
            }
            assert len(served) == len(documents)
            for name, document in documents.items():
                digest = _hashlib.sha256(_canonical_bytes(document)).hexdigest()
                uri = f"rimthan://contracts/{name}/{digest}.schema.json"
                assert uri in served
                read = await client.read_resource(uri)
                assert _json.loads(text_of(read)) == document
                # embedded under $defs, or inline in a contract that uses it (``uses``: the body without its $id)
                schemas = [[c.input_schema, c.output_schema] for c in contracts]
                # the refusal contract describes isError results, which no outputSchema covers
                embedded = any(_embedded(document, s) or _embedded(uses(document), s) for s in schemas)
                assert embedded is (name != "refusal"), name
            unknown = structured_error(await client.call_tool("rimthan.delete_workflow", {"checkpoint": "x"}))
            assert unknown["code"] == "method_not_found"
            host = HostProfile().to_json()
            bad = await client.call_tool(
                "rimthan.start_workflow",
                {
                    "workflow": "research",
                    "confirmed_state": {"state": {}, "confirmations": {}},
                    "host": {**host, "harness": 7},
                },
            )
            error = structured_error(bad)
            assert error["code"] == "invalid_arguments" and error["details"]["pointer"] == "/host/harness"
            extra = await client.call_tool(
                "rimthan.continue_workflow",
                {"checkpoint": "x", "confirmed_state": {"state": {}, "confirmations": {}}, "surprise": True},
            )
            assert structured_error(extra)["code"] == "invalid_arguments"

    _anyio.run(check)


def test_pinned_release_run_continues_on_a_after_sighup_refresh_activates_b(
    mcp_world: ServerWorld, tmp_path: _Path
) -> None:
    releases = tmp_path / "releases"
    a = mcp_world.publish("1.2.0", releases)
    args = serve_args(mcp_world, a, state_dir=tmp_path / "state", releases_dir=releases)
    with http_server(args) as server:

        async def scenario() -> None:
            async with http_client_for(server.url) as client:
                run_a = _srv.harness(client_caller(client), tmp_path / "run-a")
                at_interview = await run_a.run(
                    await run_a.start("research", initial_version="1.2.0"), until_step="interview"
                )
                assert at_interview.release == "research-decision@1.2.0"
                mcp_world.publish("1.3.0", releases)
                mark = len(server.lines)
                server.process.send_signal(_signal.SIGHUP)
                refreshed = server.wait_for(r'"event": "refresh done".*"outcome": "activated".*', after=mark)
                assert '"active": "research-decision@1.3.0"' in refreshed.group(0)
                run_b = _srv.harness(client_caller(client), tmp_path / "run-b")
                fresh = await run_b.start("research", initial_version="1.3.0")
                assert fresh.release == "research-decision@1.3.0"
                resumed = await run_a.run(at_interview, until_step="select-route")
                assert resumed.wire["release"] == at_interview.wire["release"]
                assert [s for _, _, s in run_a.record.statuses][-2:] == ["confirm-contract", "select-route"]
                manifests = [
                    r.uri for r in (await client.list_resources()).resources if r.uri.startswith("rimthan://manifests/")
                ]
                assert len(manifests) == 2

        _anyio.run(scenario)


@_pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_corrupt_active_refresh_keeps_a_and_says_why(
    corruption: str, mcp_world: ServerWorld, tmp_path: _Path, caplog: _pytest.LogCaptureFixture
) -> None:
    releases = tmp_path / "releases"
    provider = mcp_world.provider("1.2.0", releases_dir=releases, state_dir=tmp_path / "state")
    a_digest = provider.active.digest
    expected = CORRUPTIONS[corruption](mcp_world.publish("1.3.0", releases))
    with caplog.at_level("WARNING", logger="rimthan.mcp"):
        result = provider.refresh()
    assert (result.outcome, result.active, result.active_digest) == ("rejected", "research-decision@1.2.0", a_digest)
    assert [r.error["code"] for r in result.rejected] == [expected]
    assert result.rejected[0].path == str(releases / "research-decision-1.3.0")
    assert any(getattr(r, "outcome", None) == "rejected" and r.levelname == "WARNING" for r in caplog.records)
    assert provider.active.digest == a_digest and list(provider.held) == [a_digest]

    async def still_a() -> None:
        async with CheckedClient(create_mcp_application(provider)) as client:
            run = _srv.harness(client_caller(client), tmp_path / "p")
            started = await run.start("research", initial_version="1.2.0")
            assert started.wire["release"] == {"id": "research-decision@1.2.0", "manifest_digest": a_digest}
            uris = [r.uri for r in (await client.list_resources()).resources]
            assert not [u for u in uris if u.startswith("rimthan://releases/") and a_digest[7:] not in u]

    _anyio.run(still_a)


def test_pinned_release_unavailable_for_a_checkpoint_of_a_release_not_held(
    mcp_world: ServerWorld, tmp_path: _Path
) -> None:
    keyring = CheckpointKeyring.generate()
    on_a = create_mcp_application(mcp_world.provider("1.2.0", keyring=keyring))
    # B's releases directory holds no 1.2.0 (a server started from its releases dir also holds older releases)
    (tmp_path / "only-b").mkdir()
    on_b = create_mcp_application(mcp_world.provider("1.3.0", keyring=keyring, releases_dir=tmp_path / "only-b"))

    async def scenario() -> None:
        async with CheckedClient(on_a) as a, CheckedClient(on_b) as b:
            run = _srv.harness(client_caller(a), tmp_path / "p")
            started = await run.start("research", initial_version="1.2.0")
            refused = await b.call_tool(
                "rimthan.continue_workflow",
                {"checkpoint": started.wire["checkpoint"], "confirmed_state": run.state.projection()},
            )
            error = structured_error(refused)
            assert error["code"] == "pinned_release_unavailable"
            assert error["details"]["manifest_digest"] == started.wire["release"]["manifest_digest"]
            served = await a.call_tool(
                "rimthan.continue_workflow",
                {"checkpoint": started.wire["checkpoint"], "confirmed_state": run.state.projection()},
            )
            assert not served.is_error and served.structured_content["step"]["id"] == "setup-workspace"

    _anyio.run(scenario)
