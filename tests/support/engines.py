"""In-process engine fixtures shared by the engine tests.

Real releases (built and signed with a real key into a temporary directory,
then verified through the one verification path) served by real
``WorkflowEngineQueryModule`` instances, and the scripted harness from
``rimthan_host.harness`` talking to them through an async call.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import stat
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rimthan_host import Question
from rimthan_host.harness import HostProfile, Review, ReviewFinding, ToolCaller, WorkflowHarness
from rimthan_workflow_mcp.results import ToolResult
from rimthan_workflow_mcp.tool_contracts import workflow_engine_tool_contracts
from rimthan_workflow_mcp.workflow_engine import WorkflowEngineQueryModule
from rimthan_workflow_registry.canonical import digest_value
from rimthan_workflow_registry.release.trust import load_trust
from rimthan_workflow_registry.release.verified import VerifiedRelease
from rimthan_workflow_registry.release.verify import verify_release
from rimthan_workflow_registry.run.token_wire import peek_manifest_digest
from rimthan_workflow_registry.run.tokens import CheckpointKeyring

from support.releases import build_release, make_keypair, packaged_source, trust_dir

# Tool name -> implementing method, as the contracts declare it (what the server's dispatch uses).
TOOLS = {c.name: c.method for c in workflow_engine_tool_contracts()}


def example_state(version: str) -> dict[str, Any]:
    state: dict[str, Any] = json.loads(
        (packaged_source(version) / "examples" / "confirmed-state.json").read_text("utf-8")
    )
    return state


def examples(version: str) -> Callable[[str, str], str]:
    """Artifact text from the catalogue's shipped ``examples/<artifact-id>.<ext>``."""
    directory = packaged_source(version) / "examples"

    def content(artifact_id: str, media_type: str) -> str:
        ext = "json" if media_type == "application/json" else "md"
        return (directory / f"{artifact_id}.{ext}").read_text("utf-8")

    return content


class ExamplesScenario:
    """A harness scenario that submits the shipped examples; listed validators fail once."""

    def __init__(self, route: str, fail_once: frozenset[str] = frozenset()) -> None:
        self.route = route
        self.fail_once = set(fail_once)

    def initial_state(self, workflow_version: str, *, workflow: str = "") -> dict[str, Any]:
        return example_state(workflow_version or "1.2.0")

    def updates(self, step_id: str, workflow_version: str, values: Mapping[str, Any]) -> dict[str, Any]:
        return {}

    def answer(self, question: Question, workflow_version: str) -> Any:
        return self.route

    def migration_state(self, values: Mapping[str, Any], target_version: str, *, workflow: str = "") -> dict[str, Any]:
        return {**example_state(target_version), "research_route": self.route}

    def author(self, ctx: Any) -> str:
        return examples(ctx.workflow_version)(ctx.output.id, ctx.output.media_type)

    def review(self, ctx: Any) -> Review:
        key = f"{ctx.validator_id}@{ctx.validator_version}"
        if key in self.fail_once:
            self.fail_once.discard(key)
            return Review("fail", (ReviewFinding(f"{key}: scripted failure to exercise repair"),))
        return Review("pass")


@dataclass
class Engines:
    """One engine module per verified release, all sharing one checkpoint keyring."""

    releases: dict[str, VerifiedRelease]
    keyring: CheckpointKeyring
    work: Path
    clock: TickingClock

    def module(self, version: str) -> WorkflowEngineQueryModule:
        return WorkflowEngineQueryModule(self.releases[version], self.keyring, clock=self.clock)

    def wire(self, version: str) -> WireEngine:
        """The engine of ``version`` read as an MCP client reads it (each result's wire JSON)."""
        return WireEngine(self.module(version))

    def call(self, version: str) -> Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]:
        """An async tool call routed to the engine of ``version`` (what the server does)."""
        return WireEngine(self.module(version)).call

    def harness(self, name: str) -> StepKit:
        project = self.work / "projects" / name
        project.mkdir(parents=True, exist_ok=True)
        return StepKit(project, clock=self.clock)


@dataclass(frozen=True)
class WireEngine:
    """An engine module read as an MCP client reads it: every tool result as its wire JSON (``to_json``).

    The engine returns typed :class:`ToolResult` records; tests that check
    what a client sees read that JSON, as the server sends it.
    """

    module: WorkflowEngineQueryModule

    def start_workflow(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        return self.module.start_workflow(arguments).to_json()

    def continue_workflow(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        return self.module.continue_workflow(arguments).to_json()

    def prepare_step_validation(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        return self.module.prepare_step_validation(arguments).to_json()

    def submit_step_validation(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        return self.module.submit_step_validation(arguments).to_json()

    def migrate_workflow(self, target: WorkflowEngineQueryModule, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """An explicit migration of a run on this engine to ``target`` (what the server's dispatch does)."""
        return WorkflowEngineQueryModule.migrate_workflow(self.module, target, arguments).to_json()

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """One tool call by its MCP name (the harness's async call)."""
        result: ToolResult = getattr(self.module, TOOLS[tool])(arguments)
        return result.to_json()


def make_engines(root: Path, clock: TickingClock) -> Engines:
    key = make_keypair(root / "keys", "release-engineer")
    out = root / "releases"
    trust = load_trust(trust_dir(root / "trust", key))
    releases = {v: verify_release(build_release(packaged_source(v), out, [key]), trust) for v in ("1.2.0", "1.3.0")}
    return Engines(releases, CheckpointKeyring.generate(), root, clock)


def engine_for(source: Path, root: Path, engines: Engines) -> WireEngine:
    """An engine over a release built from ``source`` with a fresh key, sharing ``engines``' keyring and clock."""
    key = make_keypair(root / "keys", "k")
    release = verify_release(build_release(source, root / "out", [key]), load_trust(trust_dir(root / "trust", key)))
    return WireEngine(WorkflowEngineQueryModule(release, engines.keyring, clock=engines.clock))


def run(coro: Any) -> Any:
    return asyncio.run(coro)


@dataclass
class DrivenRun:
    harness: WorkflowHarness
    checkpoints: list[str]

    @property
    def statuses(self) -> list[tuple[str, str, str | None]]:
        return self.harness.record.statuses


def drive(
    engines: Engines,
    version: str,
    route: str,
    *,
    name: str,
    fail_once: frozenset[str] = frozenset(),
    until_step: str | None = None,
    scenario: ExamplesScenario | None = None,
    call: ToolCaller | None = None,
) -> DrivenRun:
    """Drive a run in-process with the scripted harness (to its end, or until ``until_step`` is current).

    Every distinct checkpoint is kept, in order: the run's log as a host writes it. ``scenario``: the scripted
    user (by default an :class:`ExamplesScenario` of ``route`` and ``fail_once``); ``call``: how a tool is called
    (by default the engine of ``version`` directly).
    """
    project = engines.work / "projects" / name
    project.mkdir(parents=True, exist_ok=True)
    checkpoints: list[str] = []

    def keep(event: Any) -> None:
        token = event.data.get("result", {}).get("checkpoint") if event.kind == "call" else None
        if token and (not checkpoints or checkpoints[-1] != token):
            checkpoints.append(token)

    harness = WorkflowHarness(
        call or engines.call(version),
        scenario or ExamplesScenario(route, fail_once),
        project_dir=project,
        clock=engines.clock,
        on_event=keep,
    )

    async def go() -> None:
        await harness.run(await harness.start("research", initial_version=version), until_step=until_step)

    run(go())
    return DrivenRun(harness, checkpoints)


def drive_migrated(engines: Engines, *, name: str, scenario: Any = None) -> DrivenRun:
    """A run started on 1.2.0, migrated explicitly to 1.3.0 at select-route, completed there."""
    modules = {engines.releases[v].manifest_digest: engines.module(v) for v in ("1.2.0", "1.3.0")}
    target = engines.module("1.3.0")

    async def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if tool == "rimthan.start_workflow":
            return engines.wire("1.2.0").start_workflow(arguments)
        engine = WireEngine(modules[peek_manifest_digest(arguments["checkpoint"]) or ""])
        if "migration" in arguments:  # what the server's dispatch does with its migration target
            return engine.migrate_workflow(target, arguments)
        return await engine.call(tool, arguments)

    checkpoints: list[str] = []

    def keep(event: Any) -> None:
        token = event.data.get("result", {}).get("checkpoint") if event.kind == "call" else None
        if token and (not checkpoints or checkpoints[-1] != token):
            checkpoints.append(token)

    project = engines.work / "projects" / name
    harness = WorkflowHarness(
        call, scenario or ExamplesScenario("desk-research"), project_dir=project, clock=engines.clock, on_event=keep
    )
    clock = engines.clock

    async def go() -> None:
        result = await harness.run(await harness.start("research", initial_version="1.2.0"), until_step="select-route")
        clock.tick(5)  # the user re-confirms the state for the target release after the last checkpoint
        moved = await harness.migrate(result, "research-decision@1.3.0", "1.3.0", confirm=True)
        assert moved.status == "active" and moved.release == "research-decision@1.3.0"
        await harness.run(moved)

    run(go())
    return DrivenRun(harness, checkpoints)


class TickingClock:
    """A clock the test advances explicitly: confirmations can be made 'after' a checkpoint."""

    def __init__(self, start: int | None = None) -> None:
        # In the past: PyJWT refuses tokens issued in the future.
        self.now = int(time.time()) - 86_400 if start is None else start

    def __call__(self) -> float:
        return float(self.now)

    def tick(self, seconds: int = 1) -> None:
        self.now += seconds


def read_back(project: Path, rel: str) -> tuple[bytes, bool]:
    """Bytes at ``rel`` read without following symlinks, and whether the path is symlink-free."""
    current, symlink_free = project, True
    for part in Path(rel).parts:
        current = current / part
        symlink_free &= not stat.S_ISLNK(os.lstat(current).st_mode)
    fd = os.open(project / rel, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as handle:
        return handle.read(), symlink_free


@dataclass
class StepKit:
    """Fine-grained harness moves for protocol tests that need to break one thing at a time.

    Whole runs use ``WorkflowHarness``; these tests need the individual pieces
    (a confirmation at a chosen time, a workspace manifest to tamper with, a
    report with a chosen verdict), so they build arguments directly.
    """

    project: Path
    profile: HostProfile = field(default_factory=HostProfile)
    clock: Callable[[], float] = time.time

    @property
    def capabilities(self) -> list[str]:
        return list(self.profile.capabilities)

    def with_host(self, **changes: Any) -> StepKit:
        return StepKit(self.project, replace(self.profile, **changes), self.clock)

    def host(self) -> dict[str, Any]:
        return self.profile.to_json()

    def confirm(
        self, values: Mapping[str, Any], *, previous: Mapping[str, Any] | None = None, at: int | None = None
    ) -> dict[str, Any]:
        """Every field confirmed; fields unchanged since ``previous`` keep their confirmation."""
        when = int(self.clock()) if at is None else at
        old_state = (previous or {}).get("state", {})
        old = (previous or {}).get("confirmations", {})
        confirmations = {}
        for name, value in values.items():
            digest = digest_value(value)
            if name in old and name in old_state and digest_value(old_state[name]) == digest:
                confirmations[name] = old[name]
            else:
                confirmations[name] = {"value_digest": digest, "confirmed_at": when, "confirmed_by": "user"}
        return {"state": dict(values), "confirmations": confirmations}

    def _write(self, rel: str, text: str) -> str:
        target = self.project / rel
        existed = target.exists()
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, "utf-8")
        return "replaced" if existed else "created"

    def deliver_workspace(self, step: Mapping[str, Any]) -> list[dict[str, Any]]:
        delivered = []
        for asset in step["host_assets"]:
            self._write(asset["install_path"], asset["text"])
            data, _ = read_back(self.project, asset["install_path"])
            delivered.append(
                {
                    "asset": asset["id"],
                    "kind": asset["kind"],
                    "path": asset["install_path"],
                    "sha256": hashlib.sha256(data).hexdigest(),
                }
            )
        manifest = {
            "harness": self.profile.harness,
            "adapter": {"id": self.profile.adapter_id, "version": self.profile.adapter_version},
            "capabilities": sorted(self.profile.capabilities),
            "delivered": delivered,
            "symlink_free": True,
        }
        (output,) = step["outputs"]
        content = json.dumps(manifest, indent=2) + "\n"
        return [self._attested(output, content)]

    def pass_setup(self, engine: WireEngine, started: Mapping[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        """Deliver the workspace the setup step asks for, prepare and submit it (no validators): the submit result."""
        base = {"checkpoint": started["checkpoint"], "confirmed_state": state}
        ready = engine.prepare_step_validation(
            {**base, "host": self.host(), "artifacts": self.deliver_workspace(started["step"])}
        )
        assert ready["status"] == "ready_for_semantic_validation", ready
        return engine.submit_step_validation({**base, "validation_bundle": ready["validation_bundle"], "reports": []})

    def write_outputs(self, step: Mapping[str, Any], content: Callable[[str, str], str]) -> list[dict[str, Any]]:
        return [self._attested(o, content(o["id"], o["media_type"])) for o in step["outputs"]]

    def _attested(self, output: Mapping[str, Any], content: str) -> dict[str, Any]:
        """Write ``content`` at the output's path, then the artifact with the attestation of its readback."""
        write = self._write(output["path"], content)
        data, symlink_free = read_back(self.project, output["path"])
        return {
            "artifact_id": output["id"],
            "path": output["path"],
            "media_type": output["media_type"],
            "content": data.decode("utf-8"),
            "attestation": {
                "path": output["path"],
                "sha256": hashlib.sha256(data).hexdigest(),
                "size": len(data),
                "symlink_free": symlink_free,
                "write": write,
            },
        }

    def reports(self, prepared: Mapping[str, Any], verdicts: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
        bundle = prepared["validation_bundle"]
        inputs = {k: v["sha256"] for k, v in bundle["artifacts"].items()}
        out = []
        for summary in bundle["validators"]:
            if not summary["report_required"]:
                continue
            key = f"{summary['validator_id']}@{summary['version']}"
            outcome = (verdicts or {}).get(key, "pass")
            findings = [] if outcome == "pass" else [{"severity": "error", "message": f"{key} found a problem"}]
            out.append(
                {
                    "validator_id": summary["validator_id"],
                    "version": summary["version"],
                    "outcome": outcome,
                    "instruction_digest": summary["instruction_digest"],
                    "input_artifacts": inputs,
                    "findings": findings,
                    "validated_by": {"harness": self.profile.harness, "adapter_version": self.profile.adapter_version},
                }
            )
        return out
