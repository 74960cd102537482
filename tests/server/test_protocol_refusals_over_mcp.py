"""The protocol's submit and migration refusals, by their precise codes, from the real server process.

The engine tests prove each rule in-process; here an attacker holding a real run's calls edits one of them and
sends it to ``rimthan-mcp serve`` (stdio, 1.2.0 with 1.3.0 as migration target) through the SDK client. The server
is stateless, so an earlier call sent again unedited is accepted: each refusal comes from the edit alone.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from rimthan_host.harness import client_caller
from support.checked_client import CheckedClient
from support.servers import ServerWorld, harness, serve_args, stdio_client_for, structured_error

SUBMIT, CONTINUE = "rimthan.submit_step_validation", "rimthan.continue_workflow"
PREPARE = "rimthan.prepare_step_validation"
OTHER_DIGEST = "sha256:" + "0" * 64
Edit = Callable[[dict[str, Any]], None]


def _report(n: int, **changes: Any) -> Edit:
    return lambda call: call["reports"][n].update(changes)


def _host(**changes: str) -> Edit:
    return lambda call: call["reports"][0]["validated_by"].update(changes)


def _target(version: str) -> Edit:
    return lambda migration: migration.update(target_release=f"research-decision@{version}")


def _extra(call: dict[str, Any]) -> None:
    call["reports"].append({**call["reports"][0], "validator_id": "ghost"})


REPORT_EDITS: dict[str, tuple[Edit, str]] = {  # "Missing, extra, duplicate, stale, or host-mismatched reports"
    "missing": (lambda call: call.update(reports=call["reports"][:1]), "report_set_mismatch"),
    "extra": (_extra, "report_set_mismatch"),
    "duplicate": (lambda call: call["reports"].append(copy.deepcopy(call["reports"][0])), "report_set_mismatch"),
    "another version": (_report(0, version="1.0.1"), "report_set_mismatch"),
    "another instruction": (_report(0, instruction_digest=OTHER_DIGEST), "report_stale"),
    "other input bytes": (lambda call: call["reports"][0]["input_artifacts"].update(findings="0" * 64), "report_stale"),
    "an input left out": (lambda call: call["reports"][0]["input_artifacts"].pop("findings"), "report_stale"),
    "another harness": (_host(harness="opencode"), "report_host_mismatch"),
    "another adapter version": (_host(adapter_version="9.9.9"), "report_host_mismatch"),
    "a bundle edited": (
        lambda call: call["validation_bundle"].update(step_id="interview"),
        "validation_bundle_invalid",
    ),
}

MIGRATION_EDITS: dict[str, tuple[Edit, str]] = {
    "the source release itself": (_target("1.2.0"), "migration_scope_mismatch"),  # not this server's target
    "a release not held": (_target("1.4.0"), "migration_scope_mismatch"),
    "a target field unconfirmed": (
        lambda m: m["confirmed_state"]["confirmations"].pop("risk_tolerance"),
        "blocked: confirmation_required",  # blocked, the run left where it was
    ),
}


def _served(world: ServerWorld, tmp: Path, target: str) -> CheckedClient:
    """``rimthan-mcp serve`` of 1.2.0 over stdio, ``target`` its migration target; every server shares one state
    directory (so one checkpoint key)."""
    args = serve_args(world, world.built["1.2.0"], state_dir=tmp / "state", migration_target=world.built[target])
    return stdio_client_for(args, (tmp / f"serve-{target}.log").open("w"))


def _artifact(n: int, **changes: Any) -> Edit:
    return lambda call: call["artifacts"][n].update(changes)


def _attested(n: int, **changes: Any) -> Edit:
    return lambda call: call["artifacts"][n]["attestation"].update(changes)


def _json_content(text: str) -> Edit:
    """The evidence log's bytes replaced by ``text``, attested truthfully: only the content rules can refuse it."""

    def edit(call: dict[str, Any]) -> None:
        data = text.encode("utf-8")
        call["artifacts"][0]["content"] = text
        call["artifacts"][0]["attestation"].update(sha256=hashlib.sha256(data).hexdigest(), size=len(data))

    return edit


def _host_setting(**changes: Any) -> Edit:
    return lambda call: call["host"].update(changes)


PREPARE_EDITS: dict[str, tuple[Edit, set[str]]] = {  # desk-research: evidence-log (JSON), findings (Markdown)
    "an artifact left out": (lambda call: call.update(artifacts=call["artifacts"][:1]), {"artifact_missing"}),
    "an artifact twice": (lambda call: call["artifacts"].append(call["artifacts"][0]), {"artifact_duplicate"}),
    "an undeclared artifact": (_artifact(1, artifact_id="ghost"), {"artifact_undeclared", "artifact_missing"}),
    "another media type": (_artifact(0, media_type="text/markdown"), {"media_type_mismatch"}),
    "JSON off its schema": (_json_content("{}"), {"json_schema_failed"}),
    "JSON over its bound": (_json_content('{"x": "' + "y" * (2 << 20) + '"}'), {"artifact_too_large"}),
    "bytes other than attested": (_attested(0, sha256="0" * 64), {"output_attestation_mismatch"}),
    "read back through a symlink": (_attested(0, symlink_free=False), {"output_attestation_mismatch"}),
    "attested at another path": (_attested(0, path="research/other.json"), {"output_attestation_mismatch"}),
    "a policy forbidding the write": (
        lambda call: call["host"]["repository_policy"].update(writable_paths=[".claude/*"]),
        {"repository_policy_conflict"},
    ),
    "no validator capability": (_host_setting(validator_capabilities=[]), {"validator_capabilities_mismatch"}),
}


def _recording(client: CheckedClient, sent: list[tuple[str, dict[str, Any]]]) -> Any:
    inner = client_caller(client)

    async def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        sent.append((tool, copy.deepcopy(arguments)))
        return await inner(tool, arguments)

    return call


async def _prepared(client: CheckedClient, arguments: dict[str, Any]) -> tuple[str, bool, int, set[str]]:
    """(status, whether a bundle came, how many validators, the failure codes) of a prepare call."""
    said = (await client.call_tool(PREPARE, arguments)).structured_content
    codes = {failure["code"] for failure in said["failures"]}
    return said["status"], said["validation_bundle"] is not None, len(said["validators"]), codes


async def _code(client: CheckedClient, tool: str, arguments: dict[str, Any]) -> str:
    said = await client.call_tool(tool, arguments)
    if said.is_error:
        return str(structured_error(said)["code"])
    failures = said.structured_content.get("failures") or [{}]
    return f"{said.structured_content['status']}: {failures[0].get('code')}"


def test_each_edited_report_set_is_refused_with_its_code(mcp_world: ServerWorld, tmp_path: Path) -> None:
    async def scenario() -> dict[str, str]:
        async with _served(mcp_world, tmp_path, "1.3.0") as client:
            sent: list[tuple[str, dict[str, Any]]] = []
            run = harness(_recording(client, sent), tmp_path / "run")
            await run.run(await run.start("research", initial_version="1.2.0"))
            submit = next(a for tool, a in sent if tool == SUBMIT and len(a.get("reports", [])) == 2)
            found = {"unedited": await _code(client, SUBMIT, submit)}
            for name, (edit, _) in REPORT_EDITS.items():
                edited = copy.deepcopy(submit)
                edit(edited)
                found[name] = await _code(client, SUBMIT, edited)
            return found

    found = anyio.run(scenario)
    assert found.pop("unedited") == "completed: None"
    assert found == {name: code for name, (_, code) in REPORT_EDITS.items()}


def test_each_edited_migration_is_refused_with_its_code(mcp_world: ServerWorld, tmp_path: Path) -> None:
    async def scenario() -> dict[str, str]:
        async with _served(mcp_world, tmp_path, "1.3.0") as client:
            sent: list[tuple[str, dict[str, Any]]] = []
            run = harness(_recording(client, sent), tmp_path / "run")
            at_route = await run.run(await run.start("research", initial_version="1.2.0"), until_step="select-route")
            await run.migrate(at_route, "research-decision@1.3.0", "1.3.0", confirm=True)
            migrate = next(a for tool, a in reversed(sent) if tool == CONTINUE and "migration" in a)
            found = {"unedited": await _code(client, CONTINUE, migrate)}
            for name, (edit, _) in MIGRATION_EDITS.items():
                found[name] = await _code(client, CONTINUE, _edited(migrate, edit))
        # "target release must differ from the source release": a server whose migration target is its own release
        async with _served(mcp_world, tmp_path, "1.2.0") as client:
            found["a server offering the source release"] = await _code(
                client, CONTINUE, _edited(migrate, _target("1.2.0"))
            )
        return found

    found = anyio.run(scenario)
    assert found.pop("unedited") == "active: None", json.dumps(found)
    assert found.pop("a server offering the source release") == "migration_same_release"
    assert found == {name: code for name, (_, code) in MIGRATION_EDITS.items()}


def _edited(call: dict[str, Any], edit: Edit) -> dict[str, Any]:
    edited = copy.deepcopy(call)
    edit(edited["migration"])
    return edited


def test_each_edited_prepare_fails_deterministically_with_its_code(mcp_world: ServerWorld, tmp_path: Path) -> None:
    """ "On deterministic failure it returns deterministic_validation_failed, validation_bundle: null, no
    validators, and failure codes": every edit is caught, with no bundle to take to submit."""

    async def scenario() -> dict[str, tuple[str, bool, int, set[str]]]:
        async with _served(mcp_world, tmp_path, "1.3.0") as client:
            sent: list[tuple[str, dict[str, Any]]] = []
            run = harness(_recording(client, sent), tmp_path / "run")
            await run.run(await run.start("research", initial_version="1.2.0"))
            prepare = next(a for tool, a in sent if tool == PREPARE and len(a["artifacts"]) == 2)
            found = {"unedited": await _prepared(client, prepare)}
            for name, (edit, _) in PREPARE_EDITS.items():
                edited = copy.deepcopy(prepare)
                edit(edited)
                found[name] = await _prepared(client, edited)
            return found

    found = anyio.run(scenario)
    assert found.pop("unedited") == ("ready_for_semantic_validation", True, 2, set())
    failed = {name: status[:3] for name, status in found.items()}
    assert failed == {name: ("deterministic_validation_failed", False, 0) for name in PREPARE_EDITS}
    missing = {name: (codes - found[name][3]) for name, (_, codes) in PREPARE_EDITS.items() if codes - found[name][3]}
    assert not missing, found
