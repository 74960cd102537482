"""Each elicitation form the bridge sends fits the negotiated era's schema: a 2025-06-18 client gets no ``default``
where its schema has none.

In the MCP 2025-06-18 schema only the boolean primitive of an elicitation form may carry a ``default``; string,
number and enum defaults came with 2025-11-25. Before, a fact's own form (the field's choices or type, with the
model's value as default) and a question's choices carried a ``default`` in every era, a key a strict 2025-06-18
client's schema does not have. A real SDK client offering each era drives the real bridge (``rimthan-host serve``)
and its verifier through a start, a routing question and a migration; at 2025-06-18 every request's primitives are
checked against that era's ``PrimitiveSchemaDefinition`` (closed: no key the schema does not declare), at 2025-11-25
the defaults are still sent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import jsonschema
import mcp.client.session
import pytest
from mcp import types
from support.bridge import bridge_params, check_replies, stand_in
from support.checked_client import CheckedClient
from support.servers import ServerWorld, build_world

# The 2025-06-18 elicitation primitives, from modelcontextprotocol/modelcontextprotocol schema/2025-06-18/schema.ts
# (StringSchema, NumberSchema, BooleanSchema, EnumSchema), each closed to the keys its interface declares.
_TEXT = {"title": {"type": "string"}, "description": {"type": "string"}}
PRIMITIVE_2025_06_18 = {
    "anyOf": [
        {"type": "object", "additionalProperties": False, "required": ["type"], "properties": {
            "type": {"const": "string"}, **_TEXT, "minLength": {"type": "number"}, "maxLength": {"type": "number"},
            "format": {"enum": ["email", "uri", "date", "date-time"]}}},
        {"type": "object", "additionalProperties": False, "required": ["type"], "properties": {
            "type": {"enum": ["number", "integer"]}, **_TEXT, "minimum": {"type": "number"},
            "maximum": {"type": "number"}}},
        {"type": "object", "additionalProperties": False, "required": ["type"], "properties": {
            "type": {"const": "boolean"}, **_TEXT, "default": {"type": "boolean"}}},
        {"type": "object", "additionalProperties": False, "required": ["type", "enum"], "properties": {
            "type": {"const": "string"}, **_TEXT, "enum": {"type": "array", "items": {"type": "string"}},
            "enumNames": {"type": "array", "items": {"type": "string"}}}},
    ]
}  # fmt: skip
NEW_FACTS = {"risk_tolerance": "medium", "stakeholders": ["CTO", "Backend team leads"]}
PASSED = {"risk_tolerance": "medium", "deadline": "2026-03-31"}  # what the person keeps where no default is shown


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> ServerWorld:
    return build_world(tmp_path_factory.mktemp("form-eras-world"))


class Person:
    """The user behind the client: keeps every form's primitives, and accepts each with the value shown (the
    default, else the model's value as the message says); the routing question is answered ``experiment``."""

    def __init__(self) -> None:
        self.primitives: list[dict[str, Any]] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        properties: dict[str, Any] = params.requested_schema.get("properties", {})  # type: ignore[union-attr]
        self.primitives.extend(properties.values())
        if "confirm" in properties:
            return types.ElicitResult(action="accept", content={"confirm": True})
        if "answer" in properties:  # the routing question: the route the stand-in's example takes
            return types.ElicitResult(action="accept", content={"answer": "experiment"})
        form, field = properties["value"], params.message.split()[1]
        shown = form["default"] if "default" in form else PASSED.get(field) or _passed(params.message)
        return types.ElicitResult(action="accept", content={"value": shown})


def _passed(message: str) -> str:
    """The model's value as the form's message says it, on its own line after "The model passed:"."""
    return message.split("The model passed:\n", 1)[1].split("\n", 1)[0]


def _run(world: ServerWorld, tmp_path: Path, person: Person) -> str:
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()

    async def go() -> str:
        params = bridge_params(project, world, state)
        async with CheckedClient(params, mode="legacy", elicitation_callback=person) as client:
            model = stand_in(client, project)
            at_question = await model.follow(await model.start(), "", until_question=True)
            routed = await model.call("answer_question", {})
            assert not at_question.is_error and routed.data["step"]["id"] == "experiment", routed.text
            moved = await model.call("migrate_run", {"confirm": True, "facts": NEW_FACTS})
            assert "Migrated run" in moved.text, moved.text
            check_replies(model)
            return client.protocol_version

    return anyio.run(go)


def test_a_2025_06_18_client_gets_only_the_keys_its_schema_has(
    world: ServerWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mcp.client.session, "LATEST_HANDSHAKE_VERSION", "2025-06-18")
    person = Person()
    assert _run(world, tmp_path, person) == "2025-06-18"
    kinds = {(p["type"], "enum" in p) for p in person.primitives}
    assert {("string", True), ("string", False), ("boolean", False)} <= kinds, kinds  # choices, text and yes/no
    for primitive in person.primitives:  # before: {"type": "string", ..., "enum": [...], "default": "medium"}
        jsonschema.validate(primitive, PRIMITIVE_2025_06_18)


def test_a_2025_11_25_client_still_gets_the_defaults(world: ServerWorld, tmp_path: Path) -> None:
    person = Person()
    assert _run(world, tmp_path, person) == "2025-11-25"
    enum = [p for p in person.primitives if p.get("title") == "risk_tolerance"]
    text = [p for p in person.primitives if p.get("title") == "objective"]
    assert enum and enum[0]["default"] == "medium", enum
    assert text and text[0]["default"].startswith("Should we replace"), text
