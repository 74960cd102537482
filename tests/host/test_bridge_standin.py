"""A model stand-in completes every path of research-decision through ``rimthan-host serve``.

The bridge runs as a real process over stdio (the SDK client starts it) and
starts the real verifier as its child; releases are built and signed with a
real key under tmp. The stand-in never sees or sends a checkpoint, a token,
a digest or an attestation, and ``rimthan-mcp audit`` verifies every run log.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import anyio
import pytest
from mcp import StdioServerParameters
from rimthan_host.standin import StandIn
from support.bridge import BIN, audit, bridge_params, stand_in
from support.checked_client import CheckedClient
from support.releases import packaged_source
from support.servers import ServerWorld, build_world, server_env

ROUTE_SCHEMAS = {
    "desk-research": "evidence-log.schema.json",
    "user-interviews": "interview-synthesis.schema.json",
    "experiment": "experiment-results.schema.json",
}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("bridge-world"))


def _only_log(project: Path) -> Path:
    (log,) = sorted((project / ".rimthan" / "runs").glob("*.log"))
    return log


def _the_audit_told_says_the_run_completed(text: str, project: Path, env: dict[str, str] | None = None) -> None:
    """The completion names the audit command for this bridge's verifier (its releases, trust and state directory);
    run as told, from the project, it verifies the log and says the run completed. Before, it said only
    ``rimthan-mcp audit``, which without the releases cannot tell how the run ended ("outcome: not told")."""
    (told,) = [line for line in text.splitlines() if line.startswith("Run log: ")]
    command = told.split(" (", 1)[1].removesuffix(" verifies it and says how the run ended).")
    program = shlex.split(command)[0]  # rimthan-mcp if the bridge had it on PATH, else the one it started
    assert program in ("rimthan-mcp", str(BIN / "rimthan-mcp")), told
    assert command.startswith(f"{shlex.quote(program)} audit .rimthan/runs/") and "--release" in command, told
    env = {**(env or server_env()), "PATH": _path(with_bin=program == "rimthan-mcp")}
    done = subprocess.run(command, shell=True, cwd=project, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert "completed" in done.stdout and "not told" not in done.stdout, done.stdout


def _path(*, with_bin: bool) -> str:
    """The test's PATH with the installed console scripts' folder first, or without it."""
    rest = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and Path(p).resolve() != BIN.resolve()]
    return os.pathsep.join([str(BIN), *rest] if with_bin else rest)


def _completed(params: StdioServerParameters, project: Path) -> str:
    """The reply completing a desk-research run the stand-in drives through the bridge ``params`` starts."""

    async def go() -> str:
        async with CheckedClient(params, mode="legacy") as client:
            model = stand_in(client, project)
            final = await model.follow(await model.start(), "desk-research")
            assert final.data["status"] == "completed", final.text
            return final.text

    return anyio.run(go)


@pytest.mark.parametrize("on_path", [True, False])
def test_the_audit_told_names_the_verifier_the_bridge_started_unless_it_is_on_path(
    world: ServerWorld, tmp_path: Path, on_path: bool
) -> None:
    """A bridge installed as the Claude Code plugin's README says, ``rimthan-host`` alone on PATH (``uv tool
    install`` without ``--with-executables-from rimthan-workflow-mcp``), finds its verifier beside itself; the
    audit command it names is that verifier's path, which runs from a shell whose PATH lacks it. Before, it said
    ``rimthan-mcp audit``, which that shell does not find (command not found). With rimthan-mcp on PATH (the
    same program), it says ``rimthan-mcp``."""
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()
    params = bridge_params(project, world, state)
    params.env = {**os.environ, "PATH": _path(with_bin=on_path)}

    completed = _completed(params, project)
    program = "rimthan-mcp" if on_path else shlex.quote(str(BIN / "rimthan-mcp"))
    assert f" ({program} audit .rimthan/runs/" in completed, completed
    _the_audit_told_says_the_run_completed(completed, project)


_STATE_VARIABLES = ("RIMTHAN_STATE_DIR", "XDG_STATE_HOME")


@pytest.mark.parametrize("variable", _STATE_VARIABLES)
def test_the_audit_told_carries_the_state_dir_and_trust_the_bridge_s_environment_gave_its_verifier(
    world: ServerWorld, tmp_path: Path, variable: str
) -> None:
    """A bridge configured as docs/host-kit.md and the README allow, its verifier's checkpoint keys and trust in the
    ``env`` of ``.mcp.json`` (RIMTHAN_STATE_DIR, RIMTHAN_TRUST): the audit command it names runs as told from a shell
    without them. Before, it named neither, so that shell's audit looked for the checkpoint keys in
    ~/.local/state/rimthan and refused the log (``key_invalid`` or ``checkpoint_key_unknown``). The same for a
    state directory the verifier takes from ``XDG_STATE_HOME`` (``$XDG_STATE_HOME/rimthan``), which the command
    left out (before, only RIMTHAN_STATE_DIR was said)."""
    project, home = tmp_path / "project", tmp_path / "xdg"
    state = home / "rimthan" if variable == "XDG_STATE_HOME" else tmp_path / "state"
    project.mkdir()
    params = bridge_params(project, world, state)
    verifier = ["--release", str(world.built["1.2.0"]), "--log-level", "warning"]
    params.args = ["serve", "--project", str(project), "--", *verifier]
    bare = {k: v for k, v in os.environ.items() if k not in _STATE_VARIABLES}
    told = str(home if variable == "XDG_STATE_HOME" else state)
    params.env = {**bare, variable: told, "RIMTHAN_TRUST": str(world.trust)}

    completed = _completed(params, project)
    assert f"--state-dir {state} " in completed, completed  # the directory the verifier used
    assert (state / "checkpoint-keys.json").is_file()
    shell = {k: v for k, v in server_env().items() if k not in (*_STATE_VARIABLES, "RIMTHAN_TRUST")}
    _the_audit_told_says_the_run_completed(completed, project, {**shell, "HOME": str(tmp_path / "home")})


@pytest.mark.parametrize("route", ["desk-research", "user-interviews", "experiment"])
def test_the_stand_in_completes_each_route(world: ServerWorld, tmp_path: Path, route: str) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()

    async def go() -> tuple[StandIn, str]:
        async with CheckedClient(bridge_params(project, world, state), mode="legacy") as client:
            tools = await client.list_tools()
            assert {t.name for t in tools.tools} >= {"start_run", "step_done", "record_verdict", "migrate_run"}
            model = stand_in(client, project)
            final = await model.follow(await model.start(), route)
            assert final.data["status"] == "completed" and f"Run {final.data['run']} is complete." in final.text
            return model, final.text

    model, completed = anyio.run(go)
    _the_audit_told_says_the_run_completed(completed, project)
    assert model.leaks() == []
    assert model.opaque_bytes_sent() == 0
    assert (project / ".claude").is_dir()  # the bridge delivered the release's assets itself
    # The route's JSON output comes with its schema: a copy from the verified release, and its required fields.
    name = ROUTE_SCHEMAS[route]
    copy = f".rimthan/schemas/research-decision@1.2.0/{name}"
    asked = next(r for r in model.received if f"JSON Schema: {copy}" in r.text)
    assert f'required fields: decision_question (string), route (= "{route}")' in asked.text
    assert (project / copy).read_bytes() == (packaged_source("1.2.0") / "schemas" / name).read_bytes()
    history = audit(_only_log(project), state)
    assert history["ok"] is True and route in history["steps"]
    assert history["steps"][0] == "setup-workspace"


def test_a_repair_reruns_only_the_failed_validator(world: ServerWorld, tmp_path: Path) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()

    async def go() -> StandIn:
        async with CheckedClient(bridge_params(project, world, state), mode="legacy") as client:
            model = stand_in(client, project, fail_once={"decision-critic"})
            await model.follow(await model.start(), "desk-research")
            return model

    model = anyio.run(go)
    assert model.rounds == [["evidence-auditor", "decision-critic"], ["decision-critic"]]
    failed = next(r for r in model.received if r.data.get("status") == "validation_failed")
    assert "The recommendation cites no source." in failed.text  # the files written again unchanged:
    assert "with the files unchanged, only the ones that failed" in failed.text
    assert model.leaks() == []
    assert audit(_only_log(project), state)["ok"] is True


def test_a_run_migrates_from_1_2_0_to_1_3_0_with_preview_and_confirmation(world: ServerWorld, tmp_path: Path) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()
    new_facts = {"risk_tolerance": "medium", "stakeholders": ["CTO", "Backend team leads"]}

    async def go() -> StandIn:
        async with CheckedClient(bridge_params(project, world, state), mode="legacy") as client:
            model = stand_in(client, project)
            at_question = await model.follow(await model.start(), "desk-research", until_question=True)
            assert at_question.data["step"]["id"] == "select-route"
            # The verifier's offer reaches the model in words and data: the target id and the facts it needs.
            assert "A newer release is offered for this run: research-decision@1.3.0" in at_question.text
            offered = at_question.data["migration"]
            assert offered["to_release"] == "research-decision@1.3.0"
            assert offered["needs"] == ["risk_tolerance"]  # the one field 1.3.0 requires that 1.2.0 lacks
            bare = await model.call("migrate_run", {"confirm": False})  # no id to invent
            assert bare.is_error and "risk_tolerance" in bare.text and "pass it as facts" in bare.text
            preview = await model.call("migrate_run", {"confirm": False, "facts": new_facts})
            assert not preview.is_error and "restarts at setup-workspace" in preview.text, preview.text
            assert "research-decision@1.3.0" in preview.text
            moved = await model.call(
                "migrate_run", {"to_release": "research-decision@1.3.0", "confirm": True, "facts": new_facts}
            )
            assert "newer release is offered" not in moved.text  # taken: no longer offered
            assert "Migrated run" in moved.text and moved.data["step"]["id"] == "interview", moved.text
            model.version = "1.3.0"
            final = await model.follow(moved, "desk-research")
            assert final.data["status"] == "completed"
            return model

    model = anyio.run(go)
    assert model.leaks() == []
    history = audit(_only_log(project), state)
    assert len(history["migrations"]) == 1 and history["releases"][-1]["id"] == "research-decision@1.3.0"


def test_the_setup_reply_names_every_file_the_delivery_installed_adapter_included(
    world: ServerWorld, tmp_path: Path
) -> None:
    """The reply to start_run lists what the workspace manifest says was delivered: each kind, id and path."""
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()

    async def go() -> StandIn:
        async with CheckedClient(bridge_params(project, world, state), mode="legacy") as client:
            model = stand_in(client, project)
            await model.start()
            return model

    model = anyio.run(go)
    said = next(r.text for r in model.received if "The workspace is set up" in r.text)
    manifest = json.loads((project / ".rimthan" / "workspace-manifest.json").read_text("utf-8"))
    kinds = {d["kind"] for d in manifest["delivered"]}
    assert kinds == {"prompt", "skill", "subagent", "adapter"}, kinds  # the control: this release has an adapter
    for entry in manifest["delivered"]:
        assert f"{entry['asset']} ({entry['path']})" in said, said
    assert "the adapter claude-code (" in said and "the subagents " in said and "the prompt " in said, said
    # the prompt (a slash command) asks for checkpoint tokens and rimthan.start_workflow: not with the bridge
    assert "never ask the user for a checkpoint token" in said and "use its tools instead" in said, said
