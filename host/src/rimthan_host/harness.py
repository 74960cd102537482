"""A scripted harness: drive one workflow run to completion through any tool caller.

This is what an agent harness does around the four tools, minus the model:
deliver the setup assets into a project directory and attest them, keep the
confirmed state with a confirmation per field, answer questions, write each
gated step's artifacts, read them back symlink-free and attest them, run the
semantic validators (a :class:`Scenario`'s scripted reviews) and submit their
reports, repairing and re-validating on failure. The demo, the end-to-end and
engine tests and the load/benchmark tools all drive runs through it.

It depends only on a :data:`ToolCaller` - ``(tool name, arguments) ->
structured result`` - so the same run goes through stdio, HTTP, an in-process
SDK session (:func:`client_caller`) or straight into an engine module.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from rimthan_workflow_registry.canonical import canonical_text, digest_value
from rimthan_workflow_registry.protocol_names import CONTINUE_WORKFLOW as CONTINUE
from rimthan_workflow_registry.protocol_names import PREPARE_STEP_VALIDATION as PREPARE
from rimthan_workflow_registry.protocol_names import SETUP_STEP_ID as SETUP_STEP
from rimthan_workflow_registry.protocol_names import START_WORKFLOW as START
from rimthan_workflow_registry.protocol_names import SUBMIT_STEP_VALIDATION as SUBMIT

ToolCaller = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]
EventSink = Callable[["HarnessEvent"], None]


class ToolRefused(Exception):
    """A tool answered with a structured error (``isError``)."""

    def __init__(self, tool: str, error: Mapping[str, Any]) -> None:
        self.tool = tool
        self.error = dict(error)
        self.code = str(error.get("code"))
        super().__init__(f"{tool} refused: {self.code}: {error.get('message')}")


class HarnessError(Exception):
    """The run cannot go on as scripted (blocked, or a deterministic failure the script cannot repair)."""


def client_caller(client: Any) -> ToolCaller:
    """A :data:`ToolCaller` over an SDK ``Client`` or ``ClientSession`` (anything with ``call_tool``)."""

    async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await client.call_tool(name, arguments)
        payload = result.structured_content
        if result.is_error:
            raise ToolRefused(name, (payload or {}).get("error") or {"code": "unknown", "message": str(result)})
        if not isinstance(payload, dict):
            raise HarnessError(f"{name} returned no structured content")
        return payload

    return call


# --------------------------------------------------------------------------- host and state


@dataclass(frozen=True)
class HostProfile:
    """What the harness tells the server about itself (the ``host`` argument)."""

    harness: str = "claude-code"
    adapter_id: str = "claude-code"
    adapter_version: str = "1.0.0"
    capabilities: tuple[str, ...] = ("skills", "subagents", "workspace.write")
    validator_capabilities: tuple[str, ...] = ("subagent.isolated-context",)
    writable_paths: tuple[str, ...] = (".claude/*", ".opencode/*", ".rimthan/*", "research/*")
    protected_paths: tuple[str, ...] = (".git/*",)

    def to_json(self) -> dict[str, Any]:
        return {
            "harness": self.harness,
            "adapter": {"id": self.adapter_id, "version": self.adapter_version},
            "capabilities": sorted(self.capabilities),
            "validator_capabilities": sorted(self.validator_capabilities),
            "repository_policy": {
                "writable_paths": list(self.writable_paths),
                "protected_paths": list(self.protected_paths),
            },
        }


class ConfirmedStateBook:
    """The confirmed state sent on every call, with a confirmation per top-level field."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.values: dict[str, Any] = {}
        self.confirmations: dict[str, dict[str, Any]] = {}

    def confirm(self, name: str, value: Any, by: str = "decision owner") -> None:
        """Record that the user confirmed ``value`` for ``name`` now."""
        self.values[name] = value
        self.confirmations[name] = {
            "value_digest": digest_value(value),
            "confirmed_at": int(self.clock()),
            "confirmed_by": by,
        }

    def projection(self) -> dict[str, Any]:
        return {"state": dict(self.values), "confirmations": {k: dict(v) for k, v in self.confirmations.items()}}


# --------------------------------------------------------------------------- what a scenario sees


@dataclass(frozen=True)
class WrittenFile:
    """A file the harness wrote and read back: project-relative path, text, digest, write kind."""

    artifact_id: str
    path: str
    media_type: str
    text: str
    sha256: str
    write: str

    def to_artifact(self) -> dict[str, Any]:
        """The ``artifact`` contract: the exact text plus the readback attestation."""
        return {
            "artifact_id": self.artifact_id,
            "path": self.path,
            "media_type": self.media_type,
            "content": self.text,
            "attestation": {
                "path": self.path,
                "sha256": self.sha256,
                "size": len(self.text.encode("utf-8")),
                "symlink_free": True,
                "write": self.write,
            },
        }


@dataclass(frozen=True)
class AuthorContext:
    workflow_version: str
    step_id: str
    output: Mapping[str, Any]
    values: Mapping[str, Any]
    attempt: int
    findings: Sequence[Mapping[str, Any]]
    written: Mapping[str, WrittenFile]


@dataclass(frozen=True)
class ReviewContext:
    workflow_version: str
    step_id: str
    validator_id: str
    validator_version: str
    instruction: str
    artifacts: Mapping[str, WrittenFile]
    values: Mapping[str, Any]
    project_dir: Path


@dataclass(frozen=True)
class Review:
    outcome: str  # "pass" | "fail"
    findings: tuple[Mapping[str, Any], ...] = ()


class Scenario(Protocol):
    """The user's answers and the scripted authoring and reviews a model would otherwise do."""

    def initial_state(self, workflow_version: str) -> dict[str, Any]: ...

    def updates(self, step_id: str, workflow_version: str, values: Mapping[str, Any]) -> dict[str, Any]: ...

    def answer(self, question: Mapping[str, Any], workflow_version: str) -> Any: ...

    def migration_state(self, values: Mapping[str, Any], target_version: str) -> dict[str, Any]: ...

    def author(self, ctx: AuthorContext) -> str: ...

    def review(self, ctx: ReviewContext) -> Review: ...


class CatalogueExamples:
    """A :class:`Scenario` built from the example files a catalogue ships under ``examples/``.

    ``examples/confirmed-state.json`` holds the values the example decision
    owner confirms; ``examples/<artifact-id>.json|md`` the artifact text. The
    scripted validators re-hash every artifact on disk (a changed file fails
    them) and the ones named in ``fail_once`` (id or ``id@version``) fail
    once, to exercise the repair loop.
    """

    def __init__(self, examples: Mapping[str, Path], route: str, fail_once: Collection[str] = ()) -> None:
        self.examples = {version: Path(path) for version, path in examples.items()}
        self.route = route
        self.fail_once = set(fail_once)

    def _dir(self, version: str) -> Path:
        if version not in self.examples:
            raise HarnessError(f"no examples for workflow version {version!r}")
        return self.examples[version]

    def initial_state(self, workflow_version: str) -> dict[str, Any]:
        value = json.loads((self._dir(workflow_version) / "confirmed-state.json").read_text("utf-8"))
        return dict(value.get("state", value)) if "state" in value and "confirmations" in value else dict(value)

    def updates(self, step_id: str, workflow_version: str, values: Mapping[str, Any]) -> dict[str, Any]:
        return {}

    def answer(self, question: Mapping[str, Any], workflow_version: str) -> Any:
        if question["field"] != "research_route":
            raise HarnessError(f"no scripted answer for {question['field']!r}")
        return self.route

    def migration_state(self, values: Mapping[str, Any], target_version: str) -> dict[str, Any]:
        state = self.initial_state(target_version)
        return {**state, "research_route": values["research_route"]} if "research_route" in values else state

    def author(self, ctx: AuthorContext) -> str:
        ext = "json" if ctx.output["media_type"] == "application/json" else "md"
        return (self._dir(ctx.workflow_version) / f"{ctx.output['id']}.{ext}").read_text("utf-8")

    def review(self, ctx: ReviewContext) -> Review:
        changed = [
            {
                "severity": "error",
                "artifact_id": a.artifact_id,
                "message": f"{a.path} on disk no longer has the SHA-256 that was submitted",
            }
            for a in ctx.artifacts.values()
            if hashlib.sha256((ctx.project_dir / a.path).read_bytes()).hexdigest() != a.sha256
        ]
        if changed:
            return Review("fail", tuple(changed))
        key = f"{ctx.validator_id}@{ctx.validator_version}"
        drill = {ctx.validator_id, key} & self.fail_once
        if drill:
            self.fail_once -= drill
            target = sorted(ctx.artifacts)[-1]
            return Review(
                "fail",
                (
                    {
                        "severity": "error",
                        "artifact_id": target,
                        "message": f"scripted repair drill: {key} asks for one repair of {target}",
                    },
                ),
            )
        return Review("pass")


@dataclass(frozen=True)
class HarnessEvent:
    """One thing the harness did, for printing (demo) or asserting (tests)."""

    kind: str  # call | deliver | write | review | answer | confirm | migrate | repair
    summary: str
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class RunRecord:
    """How a run went: each call's status, every checkpoint, steps, validators, files, the final result."""

    statuses: list[tuple[str, str, str | None]] = field(default_factory=list)  # (tool, status, step id)
    checkpoints: list[str] = field(default_factory=list)  # every distinct checkpoint, in issue order
    steps_visited: list[str] = field(default_factory=list)
    validation_rounds: dict[str, int] = field(default_factory=dict)
    validators_run: list[tuple[str, str, str]] = field(default_factory=list)  # (step, validator key, outcome)
    written: dict[str, WrittenFile] = field(default_factory=dict)
    final: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------- the driver


class WorkflowHarness:
    """Drives one run through the four tools in one project directory."""

    def __init__(
        self,
        call: ToolCaller,
        scenario: Scenario,
        *,
        project_dir: Path,
        host: HostProfile | None = None,
        on_event: EventSink | None = None,
        clock: Callable[[], float] = time.time,
        max_repairs: int = 3,
    ) -> None:
        self.call_tool = call
        self.scenario = scenario
        self.project_dir = Path(project_dir)
        self.host = host or HostProfile()
        self.state = ConfirmedStateBook(clock)
        self.record = RunRecord()
        self.max_repairs = max_repairs
        self._emit: EventSink = on_event or (lambda event: None)

    # -- tools ----------------------------------------------------------------------------

    async def _call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await self.call_tool(tool, arguments)
        step = (result.get("step") or {}).get("id")
        self.record.statuses.append((tool, result["status"], step))
        token = result.get("checkpoint")
        if token and (not self.record.checkpoints or self.record.checkpoints[-1] != token):
            self.record.checkpoints.append(token)
        self._emit(
            HarnessEvent(
                "call",
                f"{tool} -> {result['status']}" + (f" [{step}]" if step else ""),
                {"tool": tool, "result": result},
            )
        )
        return result

    async def start(
        self, workflow: str, workflow_version: str | None = None, *, initial_version: str | None = None
    ) -> dict[str, Any]:
        """Confirm the scenario's initial state and start ``workflow``."""
        for name, value in self.scenario.initial_state(initial_version or workflow_version or "").items():
            self.state.confirm(name, value)
        arguments: dict[str, Any] = {
            "workflow": workflow,
            "confirmed_state": self.state.projection(),
            "host": self.host.to_json(),
        }
        if workflow_version is not None:
            arguments["workflow_version"] = workflow_version
        return _expect(await self._call(START, arguments), {"active"})

    async def run(
        self, result: dict[str, Any], *, until_step: str | None = None, max_calls: int = 200
    ) -> dict[str, Any]:
        """Follow results until ``completed`` (or until ``until_step`` is the current step)."""
        for _ in range(max_calls):
            step = result.get("step") or {}
            if step.get("id") and (not self.record.steps_visited or self.record.steps_visited[-1] != step["id"]):
                self.record.steps_visited.append(step["id"])
            status = result["status"]
            if status == "completed":
                self.record.final = result
                return result
            if until_step is not None and step.get("id") == until_step:
                return result
            if status == "input_required":
                result = await self._answer(result)
            elif status in ("active", "advanced", "validation_failed") and step:
                result = await (self._gated(result) if step["gated"] else self._ungated(result))
            else:
                raise HarnessError(f"cannot go on from status {status!r}: {_failure_lines(result)}")
        raise HarnessError(f"the run did not complete within {max_calls} tool calls")

    async def _ungated(self, result: dict[str, Any]) -> dict[str, Any]:
        arguments: dict[str, Any] = {"checkpoint": result["checkpoint"], "confirmed_state": self.state.projection()}
        updates = self.scenario.updates(result["step"]["id"], _version(result), self.state.values)
        if updates:
            for name, value in updates.items():
                self.state.confirm(name, value)
                self._emit(HarnessEvent("confirm", f"user confirmed {name}", {"field": name}))
            arguments["next_confirmed_state"] = self.state.projection()
        return _expect(await self._call(CONTINUE, arguments), {"active", "input_required", "completed"})

    async def _answer(self, result: dict[str, Any]) -> dict[str, Any]:
        question = result["question"]
        prior = self.state.projection()
        value = self.scenario.answer(question, _version(result))
        self.state.confirm(question["field"], value)
        self._emit(
            HarnessEvent(
                "answer",
                f"asked: {question['prompt']}\n    user confirmed {question['field']} = {value!r}",
                {"question": question},
            )
        )
        arguments = {
            "checkpoint": result["checkpoint"],
            "confirmed_state": prior,
            "next_confirmed_state": self.state.projection(),
        }
        return _expect(await self._call(CONTINUE, arguments), {"active", "input_required", "completed"})

    async def _gated(self, result: dict[str, Any]) -> dict[str, Any]:
        """Write, attest, prepare, review, submit - repairing until the step advances."""
        step = result["step"]
        checkpoint = result["checkpoint"]
        findings: list[Mapping[str, Any]] = []
        for attempt in range(self.max_repairs + 1):
            if attempt:
                self._emit(HarnessEvent("repair", f"repairing {step['id']} after {len(findings)} finding(s)"))
            self.record.validation_rounds[step["id"]] = self.record.validation_rounds.get(step["id"], 0) + 1
            artifacts = self._produce(step, _version(result), attempt, findings)
            prepared = await self._call(
                PREPARE,
                {
                    "checkpoint": checkpoint,
                    "confirmed_state": self.state.projection(),
                    "host": self.host.to_json(),
                    "artifacts": [a.to_artifact() for a in artifacts],
                    "inputs": list(step.get("inputs") or []),
                },
            )
            if prepared["status"] == "deterministic_validation_failed":
                raise HarnessError(f"step {step['id']}: deterministic validation failed: {_failure_lines(prepared)}")
            _expect(prepared, {"ready_for_semantic_validation"})
            reports = [self._review(step, summary, _version(result), artifacts) for summary in prepared["validators"]]
            submitted = await self._call(
                SUBMIT,
                {
                    "checkpoint": checkpoint,
                    "confirmed_state": self.state.projection(),
                    "validation_bundle": prepared["validation_bundle"],
                    "reports": reports,
                },
            )
            if submitted["status"] != "validation_failed":
                return _expect(submitted, {"advanced", "input_required", "completed"})
            checkpoint = submitted["checkpoint"]
            findings = list(submitted["findings"])
        raise HarnessError(f"step {step['id']} still fails validation after {self.max_repairs} repairs")

    # -- migration ------------------------------------------------------------------------

    async def migrate(
        self, result: dict[str, Any], target_release: str, target_version: str, *, confirm: bool
    ) -> dict[str, Any]:
        """Ask for a migration preview (``confirm=False``) or perform it (``confirm=True``).

        The target state comes from the scenario and every field is confirmed
        afresh: the user re-confirms the whole state for the target release.
        """
        prior = self.state.projection()
        target = ConfirmedStateBook(self.state.clock)
        for name, value in self.scenario.migration_state(self.state.values, target_version).items():
            target.confirm(name, value)
        arguments = {
            "checkpoint": result["checkpoint"],
            "confirmed_state": prior,
            "migration": {
                "target_release": target_release,
                "confirmed_state": target.projection(),
                "host": self.host.to_json(),
                "confirm": confirm,
            },
        }
        migrated = await self._call(CONTINUE, arguments)
        self._emit(
            HarnessEvent(
                "migrate",
                f"migration to {target_release}: {migrated['status']}",
                {"preview": migrated.get("migration")},
            )
        )
        if confirm and migrated["status"] == "active":
            self.state = target
        return migrated

    # -- files ----------------------------------------------------------------------------

    def _produce(
        self, step: Mapping[str, Any], version: str, attempt: int, findings: Sequence[Mapping[str, Any]]
    ) -> list[WrittenFile]:
        if step["id"] == SETUP_STEP:
            return [self._setup_workspace(step)]
        out = []
        for output in step["outputs"]:
            text = self.scenario.author(
                AuthorContext(
                    version, step["id"], output, dict(self.state.values), attempt, findings, dict(self.record.written)
                )
            )
            out.append(self._write(output["id"], output["path"], output["media_type"], text))
        return out

    def _setup_workspace(self, step: Mapping[str, Any]) -> WrittenFile:
        """Deliver every host asset byte for byte, then attest them in the workspace manifest."""
        delivered = []
        for asset in step["host_assets"]:
            if hashlib.sha256(asset["text"].encode("utf-8")).hexdigest() != asset["sha256"]:
                raise HarnessError(f"asset {asset['id']} text does not match its pinned sha256; not delivering it")
            written = self._write(asset["id"], asset["install_path"], asset["media_type"], asset["text"])
            delivered.append(
                {"asset": asset["id"], "kind": asset["kind"], "path": written.path, "sha256": written.sha256}
            )
            self._emit(HarnessEvent("deliver", f"delivered {asset['kind']} {asset['id']} -> {written.path}"))
        manifest = {
            "harness": self.host.harness,
            "adapter": {"id": self.host.adapter_id, "version": self.host.adapter_version},
            "capabilities": sorted(self.host.capabilities),
            "delivered": sorted(delivered, key=lambda d: (d["kind"], d["asset"])),
            "symlink_free": True,
        }
        (output,) = step["outputs"]
        return self._write(output["id"], output["path"], output["media_type"], canonical_text(manifest) + "\n")

    def _write(self, artifact_id: str, rel_path: str, media_type: str, text: str) -> WrittenFile:
        """Write exact bytes, then read them back through a symlink-free path."""
        target = self._safe_path(rel_path)
        existed = target.exists()
        target.parent.mkdir(parents=True, exist_ok=True)
        self._safe_path(rel_path)  # parents may have been created just now: check again
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o644)
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8"))
        data = self._read_back(target)
        written = WrittenFile(
            artifact_id,
            rel_path,
            media_type,
            data.decode("utf-8"),
            hashlib.sha256(data).hexdigest(),
            "replaced" if existed else "created",
        )
        self.record.written[artifact_id] = written
        self._emit(HarnessEvent("write", f"wrote {rel_path} ({len(data)} bytes, {written.write})"))
        return written

    def _safe_path(self, rel_path: str) -> Path:
        relative = Path(rel_path)
        if relative.is_absolute() or ".." in relative.parts:
            raise HarnessError(f"{rel_path} escapes the project directory")
        current = self.project_dir
        for part in relative.parts:
            current = current / part
            if current.is_symlink():
                raise HarnessError(f"{current} is a symbolic link; refusing to write through it")
        return current

    @staticmethod
    def _read_back(path: Path) -> bytes:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise HarnessError(f"{path} is not a regular file")
            with os.fdopen(fd, "rb", closefd=False) as handle:
                return handle.read()
        finally:
            os.close(fd)

    # -- validators -----------------------------------------------------------------------

    def _review(
        self, step: Mapping[str, Any], summary: Mapping[str, Any], version: str, artifacts: Sequence[WrittenFile]
    ) -> dict[str, Any]:
        """Run one validator (scripted) exactly as the bundle binds it, and build its report."""
        payload = next(
            (
                v
                for v in step["validators"]
                if v["id"] == summary["validator_id"] and v["version"] == summary["version"]
            ),
            None,
        )
        if payload is None:
            raise HarnessError(f"the bundle names validator {summary['validator_id']} the step does not list")
        instruction = payload["instruction"]["text"]
        if "sha256:" + hashlib.sha256(instruction.encode("utf-8")).hexdigest() != summary["instruction_digest"]:
            raise HarnessError(f"validator {summary['validator_id']} instruction does not match the bundle digest")
        review = self.scenario.review(
            ReviewContext(
                version,
                step["id"],
                summary["validator_id"],
                summary["version"],
                instruction,
                {a.artifact_id: a for a in artifacts},
                dict(self.state.values),
                self.project_dir,
            )
        )
        key = f"{summary['validator_id']}@{summary['version']}"
        self.record.validators_run.append((step["id"], key, review.outcome))
        self._emit(
            HarnessEvent(
                "review",
                f"validator {key} (subagent {summary['subagent']}): {review.outcome}"
                + "".join(f"\n    - {f['message']}" for f in review.findings),
                {"findings": list(review.findings)},
            )
        )
        return {
            "validator_id": summary["validator_id"],
            "version": summary["version"],
            "outcome": review.outcome,
            "instruction_digest": summary["instruction_digest"],
            "input_artifacts": {a.artifact_id: a.sha256 for a in artifacts},
            "findings": [dict(f) for f in review.findings],
            "validated_by": {"harness": self.host.harness, "adapter_version": self.host.adapter_version},
        }


def _expect(result: dict[str, Any], statuses: set[str]) -> dict[str, Any]:
    if result["status"] not in statuses:
        raise HarnessError(f"expected {sorted(statuses)}, got {result['status']}: {_failure_lines(result)}")
    return result


def _version(result: Mapping[str, Any]) -> str:
    return str((result.get("workflow") or {}).get("version") or "")


def _failure_lines(result: Mapping[str, Any]) -> str:
    failures = result.get("failures") or []
    return "; ".join(f"{f['code']}: {f['message']}" for f in failures) or str(result.get("message"))
