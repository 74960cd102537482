"""The model stand-in: drives ``rimthan-host serve`` over stdio with the official SDK client.

It may only do what a model in a host can: call the bridge's tools, write
files under the project with text it composes (the catalogue's example
texts), answer questions, and return validator verdicts after reading each
instruction in the bridge's words. Everything it sends and receives is
recorded so tests can assert that no checkpoint, token, digest or
attestation ever reached it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp import Client, types
from mcp.client.stdio import StdioServerParameters

from support.releases import packaged_source
from support.servers import ServerWorld

BIN = Path(sys.executable).parent
OPAQUE = re.compile(r"[0-9a-fA-F]{64}|eyJ[A-Za-z0-9_-]{10,}\.")
FORBIDDEN_KEYS = {"checkpoint", "validation_bundle", "validation_token", "attestation", "checkpoint_digest"}

ElicitFn = Callable[[Any, types.ElicitRequestParams], Awaitable[types.ElicitResult | types.ErrorData]]


def verifier_args(world: ServerWorld, state: Path) -> list[str]:
    return [
        "--release",
        str(world.built["1.2.0"]),
        "--migration-target",
        str(world.built["1.3.0"]),
        "--trust",
        str(world.trust),
        "--state-dir",
        str(state),
        "--log-level",
        "warning",
    ]


def bridge_params(project: Path, world: ServerWorld, state: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=str(BIN / "rimthan-host"),
        args=["serve", "--project", str(project), "--", *verifier_args(world, state)],
    )


def example_text(version: str, path: str) -> str:
    """What the stand-in composes for ``path``: the catalogue's example with that file name."""
    return (packaged_source(version) / "examples" / Path(path).name).read_text("utf-8")


def audit(log: Path, state: Path) -> dict[str, Any]:
    """``rimthan-mcp audit`` on a run log, with the verifier's own checkpoint keys."""
    out = subprocess.run(
        [str(BIN / "rimthan-mcp"), "audit", str(log), "--state-dir", str(state), "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    history: dict[str, Any] = json.loads(out.stdout)
    return history


def opaque_in(value: Any, where: str = "") -> list[str]:
    """Every place in ``value`` that holds a digest, a token, or a key naming one."""
    found: list[str] = []
    if isinstance(value, Mapping):
        for k, v in value.items():
            if str(k) in FORBIDDEN_KEYS:
                found.append(f"{where}.{k}")
            found += opaque_in(v, f"{where}.{k}")
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            found += opaque_in(v, f"{where}[{i}]")
    elif isinstance(value, str) and OPAQUE.search(value):
        found.append(f"{where}: {OPAQUE.search(value).group(0)[:20]}...")  # type: ignore[union-attr]
    return found


@dataclass
class Reply:
    text: str
    data: dict[str, Any]
    is_error: bool


@dataclass
class StandIn:
    """A model that follows the bridge's words; ``fail_once`` validators fail once (a repair loop)."""

    client: Client
    project: Path
    version: str = "1.2.0"
    fail_once: set[str] = field(default_factory=set)
    sent: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    received: list[Reply] = field(default_factory=list)
    calls: int = 0
    rounds: list[list[str]] = field(default_factory=list)  # validators asked for, per validation round

    async def call(self, name: str, arguments: dict[str, Any] | None = None) -> Reply:
        arguments = arguments or {}
        self.sent.append((name, arguments))
        self.calls += 1
        result = await self.client.call_tool(name, arguments)
        text = "\n".join(getattr(c, "text", "") for c in result.content)
        reply = Reply(text, dict(result.structured_content or {}), bool(result.is_error))
        self.received.append(reply)
        return reply

    def leaks(self) -> list[str]:
        out: list[str] = []
        for i, (name, arguments) in enumerate(self.sent):
            out += opaque_in(arguments, f"sent[{i}]:{name}")
        for i, reply in enumerate(self.received):
            out += opaque_in(reply.text, f"received[{i}].text") + opaque_in(reply.data, f"received[{i}].data")
        return out

    def opaque_bytes_sent(self) -> int:
        return sum(len(m.group(0)) for _, a in self.sent for m in OPAQUE.finditer(json.dumps(a)))

    async def start(self, facts: Mapping[str, Any] | None = None) -> Reply:
        state = json.loads((packaged_source(self.version) / "examples" / "confirmed-state.json").read_text("utf-8"))
        return await self.call("start_run", {"workflow": "research", "facts": dict(facts or state)})

    async def follow(self, reply: Reply, route: str, *, until_question: bool = False, limit: int = 60) -> Reply:
        """Do what each reply says until the run completes (or, if asked, stops at a question)."""
        for _ in range(limit):
            assert not reply.is_error, reply.text
            status = reply.data.get("status")
            if status == "completed":
                return reply
            if reply.data.get("question"):
                if until_question:
                    return reply
                assert reply.data["question"]["prompt"] in reply.text
                reply = await self.call("answer_question", {"answer": route})
            elif status == "validators_pending":
                reply = await self._validate(reply)
            elif status == "validation_failed":
                reply = await self._write_and_done(reply)  # the repair: compose the files again
            else:
                reply = await self._write_and_done(reply)
        raise AssertionError(f"the run did not complete in {limit} calls")

    async def _write_and_done(self, reply: Reply) -> Reply:
        for path in reply.data.get("files") or []:
            assert path in reply.text
            target = self.project / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(example_text(self.version, path), "utf-8")
        return await self.call("step_done")

    async def _validate(self, reply: Reply) -> Reply:
        validators = reply.data["validators"]
        self.rounds.append([v["name"] for v in validators])
        for v in validators:
            assert f"Validator {v['name']} (subagent {v['subagent']})" in reply.text  # it read the instruction
            if v["name"] in self.fail_once:
                self.fail_once.discard(v["name"])
                reply = await self.call(
                    "record_verdict",
                    {"validator": v["name"], "verdict": "fail", "findings": ["The recommendation cites no source."]},
                )
            else:
                reply = await self.call("record_verdict", {"validator": v["name"], "verdict": "pass"})
            assert not reply.is_error, reply.text
        return reply

    def version_after_migration(self, version: str) -> None:
        self.version = version
