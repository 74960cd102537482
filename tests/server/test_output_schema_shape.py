"""The tool output schemas accept exactly what their referenced form accepts.

Every client validates every result against the tool's output schema, so the
output schemas hold their contracts inline and try a mostly-null part's
``null`` first (cheaper for Python jsonschema, the Python SDK client's
validator). The referenced form (each contract embedded once under ``$defs``
with its ``$id``, reached by ``$ref``, every nullable part tried before
``null``) is rebuilt here from the documents the server serves; both forms
must accept every result of real packaged runs and give the same verdict on
mutations of them, checked the way the SDK client checks (``validator_for`` on
an empty registry).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for
from referencing import Registry
from rimthan_workflow_mcp.server import call_tool, runtime_state
from rimthan_workflow_mcp.tool_contracts import contract_documents, workflow_engine_tool_contracts
from support.json_edits import pointers, replaced_at
from support.servers import ServerWorld, build_world, harness

_COPY = "inline copy of "
_OUTPUTS = {c.name: c.output_schema for c in workflow_engine_tool_contracts()}


def _referenced_form(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with each inline contract a ``$ref`` to the served document under ``$defs``, parts before null."""
    documents = contract_documents()
    by_id = {doc["$id"]: name for name, doc in documents.items()}
    defs: dict[str, Any] = {}

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(v) for v in node]
        if not isinstance(node, dict):
            return node
        comment = node.get("$comment")
        if isinstance(comment, str) and comment.startswith(_COPY):
            name = by_id[comment.removeprefix(_COPY)]
            defs[name] = documents[name]
            return {"$ref": f"#/$defs/{name}"}
        out = {k: walk(v) for k, v in node.items()}
        if "anyOf" in out and out["anyOf"][0] == {"type": "null"}:
            out["anyOf"] = out["anyOf"][::-1]
        return out

    referenced = walk(schema)
    return {**referenced, "$defs": defs}


def _validator(schema: dict[str, Any]) -> Validator:
    cls = validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, registry=Registry())


@functools.cache
def _validators() -> tuple[dict[str, Validator], dict[str, Validator]]:
    """Each tool's output schema and its referenced form, compiled once, as the SDK client keeps them."""
    new = {name: _validator(s) for name, s in _OUTPUTS.items()}
    return new, {name: _validator(_referenced_form(s)) for name, s in _OUTPUTS.items()}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, dict[str, Any]]]:
    """Every result of packaged runs (both routes, with and without the repair drill), by tool."""
    root = tmp_path_factory.mktemp("output-schema-world")
    world: ServerWorld = build_world(root)
    state = runtime_state(world.provider("1.2.0"))
    results: list[tuple[str, dict[str, Any]]] = []

    async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = call_tool(state, name, dict(arguments))
        structured: dict[str, Any] | None = result.structured_content
        assert structured is not None and not result.is_error
        results.append((name, structured))
        return structured

    for index, (route, fail_once) in enumerate(
        [("desk-research", frozenset({"decision-critic"})), ("experiment", frozenset())]
    ):

        async def go(project: Path = root / f"project-{index}", route: str = route, fail: Any = fail_once) -> None:
            run = harness(call, project, route, fail)
            await run.run(await run.start("research", initial_version="1.2.0"))

        anyio.run(go)
    assert {name for name, _ in results} == set(_OUTPUTS)
    return results


def test_output_schemas_hold_no_reference_and_the_served_documents_inline() -> None:
    for name, schema in _OUTPUTS.items():
        referenced = _referenced_form(schema)
        assert referenced["$defs"], name
        assert "$ref" not in str(schema) and "$id" not in str(schema) and "$defs" not in schema, name


def test_every_packaged_result_passes_both_forms(recorded: list[tuple[str, dict[str, Any]]]) -> None:
    new, old = _validators()
    for name, result in recorded:
        assert list(new[name].iter_errors(result)) == [], name
        assert list(old[name].iter_errors(result)) == [], name


_PLANTED: list[Any] = [None, "", 0, True, {}, "sha256:" + "0" * 64]


def _at(value: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        value = value[step]
    return value


def _mutations(result: dict[str, Any]) -> list[Any]:
    """Each node deleted, replaced by each planted value, and each object given an unknown or a known key."""
    out: list[Any] = []
    for path in [(), *pointers(result)]:
        if path:
            out.append(replaced_at(result, path, delete=True))
            out += [replaced_at(result, path, planted) for planted in _PLANTED]
        if isinstance(_at(result, path), dict):
            out += [replaced_at(result, (*path, key), "x") for key in ("extra", "id")]
    return out


def test_every_single_mutation_of_every_result_gets_the_same_verdict(
    recorded: list[tuple[str, dict[str, Any]]],
) -> None:
    new, old = _validators()
    verdicts: set[bool] = set()
    one_per_status = {(name, result["status"]): (name, result) for name, result in recorded}
    for name, result in one_per_status.values():
        for mutated in _mutations(result):
            verdict = new[name].is_valid(mutated)
            assert verdict == old[name].is_valid(mutated), name
            verdicts.add(verdict)
    assert verdicts == {True, False}


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 2) | st.sampled_from(["", "x", "sha256:" + "0" * 64, "0" * 64]),
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.sampled_from(["id", "x", "kind"]), inner, max_size=2)
    ),
    max_leaves=4,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutated_results_get_the_same_verdict_from_both_forms(
    recorded: list[tuple[str, dict[str, Any]]], data: st.DataObject
) -> None:
    name, result = data.draw(st.sampled_from(recorded))
    path = data.draw(st.sampled_from(pointers(result)))
    action = data.draw(st.sampled_from(["replace", "delete", "add", "swap"]))
    if action == "replace":
        mutated = replaced_at(result, path, data.draw(_JSON))
    elif action == "delete":
        mutated = replaced_at(result, path, delete=True)
    elif action == "add" and isinstance(_at(result, path), dict):
        key = data.draw(st.sampled_from(["extra", "id", "text", "sha256"]))
        mutated = replaced_at(result, (*path, key), data.draw(_JSON))
    else:  # a value found elsewhere in a recorded result of the same tool
        donor = data.draw(st.sampled_from([r for n, r in recorded if n == name]))
        mutated = replaced_at(result, path, _at(donor, data.draw(st.sampled_from([(), *pointers(donor)]))))
    new, old = _validators()
    assert new[name].is_valid(mutated) == old[name].is_valid(mutated), (name, path, action)
