"""What a workflow needs is said up front: every missing field at once, the
available workflows on an unknown name, and the migration target's id and
needs before the user confirms a migration. All against real signed releases.
"""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from rimthan_workflow_mcp.workflow_engine import WorkflowEngineQueryModule
from rimthan_workflow_registry.errors import FailureCode, WorkflowProtocolError
from rimthan_workflow_registry.release.trust import load_trust
from rimthan_workflow_registry.release.verify import verify_release
from rimthan_workflow_registry.run.requirements import available_workflows, describe_available
from support.engines import Engines, TickingClock, WireEngine, example_state, make_engines
from support.releases import build_release, make_keypair, packaged_source, trust_dir

SCHEMA_OWNER = "The one person (name or role) accountable for making and owning the decision."


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory) -> Engines:
    return make_engines(tmp_path_factory.mktemp("requirements"), TickingClock())


def test_start_lists_every_missing_required_field_with_what_it_expects(engines: Engines) -> None:
    engine, harness = engines.wire("1.3.0"), engines.harness("missing")
    weak_host = {**harness.host(), "capabilities": ["skills"]}
    result = engine.start_workflow({"workflow": "research", "confirmed_state": harness.confirm({}), "host": weak_host})
    assert result["status"] == "blocked" and result["checkpoint"] is None
    missing = [f for f in result["failures"] if f["code"] == "confirmed_field_missing"]
    assert [f["details"]["field"] for f in missing] == ["objective", "decision_owner", "risk_tolerance"]
    assert [f["pointer"] for f in missing] == ["/objective", "/decision_owner", "/risk_tolerance"]
    owner = missing[1]
    assert owner["details"]["expects"]["description"] == SCHEMA_OWNER and SCHEMA_OWNER in owner["message"]
    assert missing[2]["details"]["expects"]["enum"] == ["low", "medium", "high"]
    assert "one of low, medium, high" in missing[2]["message"]
    # host blockers are still reported in the same refusal
    assert "host_capability_missing" in {f["code"] for f in result["failures"]}


def test_start_with_some_fields_lists_only_the_absent_ones_and_unconfirmed_present_ones(engines: Engines) -> None:
    engine, harness = engines.wire("1.2.0"), engines.harness("partial")
    state = harness.confirm({"objective": example_state("1.2.0")["objective"]})
    state["confirmations"] = {}
    result = engine.start_workflow({"workflow": "research", "confirmed_state": state, "host": harness.host()})
    assert [(f["code"], f["pointer"]) for f in result["failures"]] == [
        ("confirmed_field_missing", "/decision_owner"),
        ("confirmation_required", "/objective"),
    ]


def test_other_schema_errors_still_refuse_and_name_the_missing_fields(engines: Engines) -> None:
    engine, harness = engines.wire("1.2.0"), engines.harness("bad-value")
    state = harness.confirm({"objective": ""})
    with pytest.raises(WorkflowProtocolError) as err:
        engine.start_workflow({"workflow": "research", "confirmed_state": state, "host": harness.host()})
    assert err.value.code is FailureCode.CONFIRMED_STATE_INVALID
    assert err.value.details["missing"] == ["decision_owner"] and "decision_owner" in err.value.message


@pytest.mark.parametrize(
    ("name", "version"), [("astrology", None), ("research", "9.0.0"), ("research-decision", "0.1.0")]
)
def test_workflow_not_found_lists_the_available_workflows(engines: Engines, name: str, version: str | None) -> None:
    engine, harness = engines.wire("1.2.0"), engines.harness("unknown")
    arguments: dict[str, Any] = {"workflow": name, "confirmed_state": harness.confirm({}), "host": harness.host()}
    if version:
        arguments["workflow_version"] = version
    with pytest.raises(WorkflowProtocolError) as err:
        engine.start_workflow(arguments)
    assert err.value.code is FailureCode.WORKFLOW_NOT_FOUND
    assert err.value.details["available"] == [
        {
            "id": "research-decision",
            "owner": "rimthan.research",
            "title": "Research decision",
            "aliases": ["decide", "research"],
            "versions": ["1.2.0"],
        }
    ]
    assert "research-decision (aliases: decide, research; versions: 1.2.0)" in err.value.message


def test_describe_available_orders_versions_semantically(engines: Engines) -> None:
    workflows = engines.releases["1.2.0"].catalogue.workflows
    assert describe_available(available_workflows(workflows)).endswith("versions: 1.2.0)")
    assert describe_available([]) == "none"


def _at_interview(engines: Engines) -> tuple[WireEngine, dict[str, Any], dict[str, Any], Any]:
    source, harness = engines.wire("1.2.0"), engines.harness("preview")
    state = harness.confirm(example_state("1.2.0"))
    started = source.start_workflow({"workflow": "research-decision", "confirmed_state": state, "host": harness.host()})
    advanced = harness.pass_setup(source, started, state)
    engines.clock.tick()
    return source, state, advanced, harness


def test_migration_preview_says_what_the_target_needs_before_new_fields_are_supplied(engines: Engines) -> None:
    source, state, advanced, harness = _at_interview(engines)
    target = engines.module("1.3.0")
    # the 1.2.0 state, freshly re-confirmed, still lacks 1.3.0's new required risk_tolerance
    reconfirmed = harness.confirm(example_state("1.2.0"))
    request = {"target_release": "research-decision@1.3.0", "confirmed_state": reconfirmed, "confirm": False}
    arguments = {"checkpoint": advanced["checkpoint"], "confirmed_state": state, "migration": request}
    preview = source.migrate_workflow(target, arguments)
    assert preview["status"] == "blocked" and preview["checkpoint"] == advanced["checkpoint"]
    assert [(f["code"], f.get("pointer")) for f in preview["failures"]] == [
        ("confirmed_field_missing", "/risk_tolerance")
    ]
    impact = preview["migration"]
    assert (impact["to"]["release"], impact["to"]["workflow"]) == ("research-decision@1.3.0", "research-decision@1.3.0")
    needs = impact["target_needs"]
    assert needs["workflow"] == {"id": "research-decision", "version": "1.3.0"}
    fields = {f["field"]: f for f in needs["confirmed_state"]}
    assert fields["risk_tolerance"]["required"] is True and fields["risk_tolerance"]["present"] is False
    assert fields["risk_tolerance"]["expects"]["enum"] == ["low", "medium", "high"]
    assert fields["objective"]["present"] is True and fields["stakeholders"]["required"] is False
    # what the run's own host needs: the workflow's capabilities and its claude-code adapter's (skills)
    assert needs["capabilities"] == ["skills", "subagents", "workspace.write"]
    assert needs["validator_capabilities"] == ["subagent.isolated-context"]
    assert needs["host_adapter"] == "claude-code@1.0.0"
    assert needs["host_adapters"] == ["claude-code@1.0.0", "opencode@1.0.0"]
    # confirming a migration with the field still missing is refused outright (fail closed)
    confirmed = {**arguments, "migration": {**request, "confirm": True}}
    with pytest.raises(WorkflowProtocolError) as err:
        source.migrate_workflow(target, confirmed)
    assert err.value.code is FailureCode.CONFIRMED_STATE_INVALID and err.value.details["missing"] == ["risk_tolerance"]


def test_migration_preview_names_what_the_migrating_hosts_adapter_needs_as_its_blockers_do(engines: Engines) -> None:
    """A preview for an opencode host lacking ``skills`` (its adapter's, not the workflow's) says so up front:
    ``target_needs`` lists what ``host_blockers`` refuses, not only the workflow's own capabilities."""
    source, state, advanced, harness = _at_interview(engines)
    opencode = {
        **harness.host(),
        "harness": "opencode",
        "adapter": {"id": "opencode", "version": "1.0.0"},
        "capabilities": ["subagents", "workspace.write"],
    }
    reconfirmed = harness.confirm({**example_state("1.2.0"), "risk_tolerance": "low"})
    request = {"target_release": "research-decision@1.3.0", "confirmed_state": reconfirmed, "host": opencode}
    arguments = {
        "checkpoint": advanced["checkpoint"],
        "confirmed_state": state,
        "migration": {**request, "confirm": False},
    }

    preview = source.migrate_workflow(engines.module("1.3.0"), arguments)

    assert preview["status"] == "blocked"
    assert [(f["code"], f["details"]) for f in preview["failures"]] == [
        ("host_capability_missing", {"missing": ["skills"]})
    ]
    needs = preview["migration"]["target_needs"]
    assert needs["host_adapter"] == "opencode@1.0.0"
    assert set(needs["capabilities"]) - set(opencode["capabilities"]) == {"skills"}
    # a harness the target pins no adapter for: the workflow's own needs, no host_adapter, and the blocker says why
    other = {**opencode, "harness": "aider", "adapter": {"id": "aider", "version": "1.0.0"}}
    elsewhere = {**arguments, "migration": {**request, "host": other, "confirm": False}}
    unpinned = source.migrate_workflow(engines.module("1.3.0"), elsewhere)
    assert "host_adapter" not in unpinned["migration"]["target_needs"]
    assert unpinned["migration"]["target_needs"]["capabilities"] == ["subagents", "workspace.write"]
    assert [f["code"] for f in unpinned["failures"]] == ["host_adapter_incompatible"]


def test_migration_offer_names_the_target_for_a_run_it_can_take(engines: Engines) -> None:
    source, state, advanced, _harness = _at_interview(engines)
    arguments = {"checkpoint": advanced["checkpoint"], "confirmed_state": state}
    preview = source.module.migration_offer(engines.module("1.3.0"), arguments)
    assert preview is not None
    offer = preview.to_json()
    assert offer["confirmed"] is False
    assert offer["to"]["release"] == "research-decision@1.3.0" and offer["to"]["workflow"] == "research-decision@1.3.0"
    assert offer["invalidated_artifacts"] == ["workspace-manifest"]
    assert {f["field"] for f in offer["target_needs"]["confirmed_state"] if not f["present"]} >= {"risk_tolerance"}
    assert offer["target_needs"]["host_adapter"] == "claude-code@1.0.0"  # the run's harness's adapter in the target
    assert "skills" in offer["target_needs"]["capabilities"]
    # no offer for the same release, nor back to an older workflow
    assert source.module.migration_offer(source.module, arguments) is None


def _prerelease_target(engines: Engines, root: Path) -> WorkflowEngineQueryModule:
    """A newer release of the catalogue carrying research-decision 1.2.0 (not newer) and 1.3.0-rc.1 only."""
    source = root / "prerelease"
    shutil.copytree(packaged_source("1.2.0"), source)
    base = tomllib.loads((source / "workflows/research-decision.toml").read_text("utf-8"))
    name = "workflows/research-decision-rc.toml"
    (source / name).write_text(tomli_w.dumps({**base, "version": "1.3.0-rc.1"}), "utf-8")
    catalogue = tomllib.loads((source / "catalogue.toml").read_text("utf-8"))
    catalogue["workflows"] += [name]
    catalogue["catalogue"]["version"] = "1.2.1"
    (source / "catalogue.toml").write_text(tomli_w.dumps(catalogue), "utf-8")
    key = make_keypair(root / "keys", "rc")
    release = verify_release(build_release(source, root / "out", [key]), load_trust(trust_dir(root / "trust", key)))
    return WorkflowEngineQueryModule(release, engines.keyring, clock=engines.clock)


def test_the_offer_names_only_what_a_request_without_a_version_migrates_to(engines: Engines, tmp_path: Path) -> None:
    """A pre-release is never chosen implicitly: not offered, not taken without its version; asked for, it is."""
    source, state, advanced, harness = _at_interview(engines)
    target = _prerelease_target(engines, tmp_path)
    arguments = {"checkpoint": advanced["checkpoint"], "confirmed_state": state}
    assert source.module.migration_offer(target, arguments) is None
    engines.clock.tick()
    request = {"target_release": "research-decision@1.2.1", "confirmed_state": harness.confirm(example_state("1.2.0"))}
    with pytest.raises(WorkflowProtocolError) as err:
        source.migrate_workflow(target, {**arguments, "migration": {**request, "confirm": False}})
    assert err.value.code is FailureCode.MIGRATION_NOT_NEWER
    asked = {**request, "workflow_version": "1.3.0-rc.1", "confirm": False}
    preview = source.migrate_workflow(target, {**arguments, "migration": asked})
    assert [f["code"] for f in preview["failures"]] == ["migration_confirmation_required"]
    assert preview["migration"]["to"]["workflow"] == "research-decision@1.3.0-rc.1"
