"""A scripted model: what a model in a host does with the bridge's tools, without the model.

It may only do what a model can: call the bridge's tools, write files under
the project with text it composes (here: a catalogue's example texts),
answer questions, and return validator verdicts after reading each
instruction in the bridge's words. Everything it sends and receives is kept
so the tests and ``make agent-demo`` can count what a model had to handle:
no checkpoint, token, digest or attestation, and zero opaque bytes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp import Client
from rimthan_workflow_registry.run import CONFIRMED_STATE_EXAMPLE

from .words import TEXT_FIELD, TOKEN_PATTERN

OPAQUE = re.compile(rf"[0-9a-fA-F]{{64}}|{TOKEN_PATTERN}")
ROUTE_FILES = tuple(  # research-decision's route steps' two files each, as a decision record's basis names them
    ((json_id, f"research/{json_id}.json"), (md_id, f"research/{md_id}.md"))
    for json_id, md_id in (
        ("evidence-log", "findings"),
        ("interview-synthesis", "interview-report"),
        ("experiment-results", "experiment-report"),
    )
)
FORBIDDEN_KEYS = {"checkpoint", "validation_bundle", "validation_token", "attestation", "checkpoint_digest"}


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
    """A result as the model gets it: its text content, its structured content's data, and the words that
    structured content carries (its :data:`~rimthan_host.words.TEXT_FIELD`, None without one)."""

    text: str
    data: dict[str, Any]
    is_error: bool
    data_text: str | None = None

    def structured(self) -> dict[str, Any]:
        """The structured content as it came: the words first, then the data."""
        return {TEXT_FIELD: self.data_text, **self.data} if self.data_text is not None else dict(self.data)


@dataclass
class StandIn:
    """A model that follows the bridge's words; ``fail_once`` validators fail once (a repair loop)."""

    client: Client
    project: Path
    examples: Mapping[str, Path]  # workflow version -> a catalogue's examples/ directory
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
        data = dict(result.structured_content or {})
        words = data.pop(TEXT_FIELD, None)
        reply = Reply(text, data, bool(result.is_error), words if isinstance(words, str) else None)
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
        state = json.loads((self.examples[self.version] / CONFIRMED_STATE_EXAMPLE).read_text("utf-8"))
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
                field = reply.data["question"]["field"]
                assert f"field {field}" in reply.text  # the reply names the question answered
                reply = await self.call("answer_question", {"answer": route, "field": field})
            elif status == "validators_pending":
                reply = await self._validate(reply)
            elif status == "validation_failed":
                reply = await self._write_and_done(reply)  # the repair: compose the files again
            else:
                reply = await self._write_and_done(reply)
        raise AssertionError(f"the run did not complete in {limit} calls")

    def compose(self, path: str) -> str:
        """The text for ``path``: the example file of that name; a ``basis`` names the route's files, no digests."""
        text = (self.examples[self.version] / Path(path).name).read_text("utf-8")
        document = json.loads(text) if path.endswith(".json") else None
        if not isinstance(document, dict) or "basis" not in document:
            return text
        pair = next((p for p in ROUTE_FILES if all((self.project / f).is_file() for _, f in p)), ROUTE_FILES[0])
        document["basis"] = [{"artifact_id": a, "path": f} for a, f in pair]  # sha256: the bridge fills it in
        return json.dumps(document, indent=2) + "\n"

    async def _write_and_done(self, reply: Reply) -> Reply:
        for path in reply.data.get("files") or []:
            assert path in reply.text
            target = self.project / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(self.compose(path), "utf-8")
        return await self.call("step_done", {"step": reply.data["step"]["id"]} if reply.data.get("step") else {})

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
