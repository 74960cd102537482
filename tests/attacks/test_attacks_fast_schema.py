"""The per-call schema checks: the fast verdict (jsonschema-rs) agrees with Python jsonschema.

``schema_validation.CompiledSchema`` lets jsonschema-rs decide and asks Python
jsonschema only to explain a refusal. That is only sound if the two agree on
every value a client can send and every result the server builds, so
hypothesis throws the fuzz's mutations of real arguments, and mutations of
real results from a complete packaged run (every status the run reaches), at
both, for every tool's input and output schema. The one known difference is
where the fast validator is stricter (ECMA-262 ``$`` does not match before a
final newline), and there the stricter answer wins.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rimthan_workflow_mcp.call_scope import once, one_call
from rimthan_workflow_mcp.schema_validation import CompiledSchema, compiled_schema
from rimthan_workflow_mcp.server import call_tool, runtime_state
from rimthan_workflow_mcp.tool_contracts import workflow_engine_tool_contracts
from rimthan_workflow_registry.run.tokens import CheckpointKeyring
from support.servers import build_world, harness
from test_attacks_fuzz_depth import cheap_mutation

CONTRACTS = {c.name: c for c in workflow_engine_tool_contracts()}
TOOLS = tuple(CONTRACTS)
Recorded = dict[str, list[tuple[dict[str, Any], dict[str, Any]]]]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    """Every call of a complete packaged run (one validator repair drill) through the server's ``call_tool``."""
    root = tmp_path_factory.mktemp("schema-validation")
    world = build_world(root)
    state = runtime_state(world.provider("1.2.0", keyring=CheckpointKeyring.generate(), migration_target="1.3.0"))
    calls: Recorded = {tool: [] for tool in TOOLS}

    async def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = call_tool(state, tool, arguments)
        assert not result.is_error, result.structured_content
        calls[tool].append((arguments, result.structured_content))
        return dict(result.structured_content)

    project = root / "project"
    project.mkdir()
    run = harness(call, project, fail_once=frozenset({"decision-critic"}))

    async def go() -> None:
        final = await run.run(await run.start("research", initial_version="1.2.0"))
        assert final.status == "completed"

    anyio.run(go)
    assert all(calls.values()), {t: len(c) for t, c in calls.items()}
    return calls


def _agree(schema: CompiledSchema, value: Any) -> None:
    try:
        fast = schema.fast.is_valid(value)
    except (ValueError, TypeError, OverflowError):
        fast = None  # unreadable by the fast validator: Python jsonschema alone decides
    slow = schema.explain.is_valid(value)
    assert fast is None or fast == slow, (fast, slow, repr(value)[:400])
    assert (schema.problem(value) is None) == slow


def _examples(recorded: Recorded, tool: str, which: int) -> list[dict[str, Any]]:
    return [call[which] for call in recorded[tool]]


@pytest.mark.parametrize("tool", TOOLS)
def test_real_arguments_and_results_pass_both(recorded: Recorded, tool: str) -> None:
    for arguments, result in recorded[tool]:
        assert compiled_schema(CONTRACTS[tool].input_schema).problem(arguments) is None
        assert compiled_schema(CONTRACTS[tool].output_schema).problem(result) is None


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("side", ["input", "output"])
def test_fast_and_python_verdicts_agree_on_mutated_values(recorded: Recorded, tool: str, side: str) -> None:
    which = 0 if side == "input" else 1
    schema = compiled_schema(getattr(CONTRACTS[tool], f"{side}_schema"))
    bases = _examples(recorded, tool, which)

    @settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(seed=st.integers(0, 2**32), pick=st.integers(0, 10**6))
    def agree(seed: int, pick: int) -> None:
        rng = random.Random(seed)
        valid = {tool: bases[pick % len(bases)]}
        for _ in range(20):
            mutated, _how = cheap_mutation(rng, {**_donors(recorded, which), **valid}, tool)
            _agree(schema, mutated)

    agree()


def _donors(recorded: Recorded, which: int) -> dict[str, dict[str, Any]]:
    return {tool: calls[-1][which] for tool, calls in recorded.items()}


DIGEST_NEWLINE = "sha256:" + "a" * 64 + "\n"


def test_where_the_fast_validator_is_stricter_the_value_is_refused(recorded: Recorded) -> None:
    """A digest with a final newline: Python's ``$`` accepts it, ECMA-262's does not; the call is refused."""
    arguments, _ = recorded["rimthan.submit_step_validation"][0]
    bundle = {**arguments["validation_bundle"], "checkpoint_digest": DIGEST_NEWLINE}
    schema = compiled_schema(CONTRACTS["rimthan.submit_step_validation"].input_schema)
    assert schema.explain.is_valid({**arguments, "validation_bundle": bundle})
    problem = schema.problem({**arguments, "validation_bundle": bundle})
    assert problem is not None and problem.pointer == "/validation_bundle/checkpoint_digest"


@pytest.mark.parametrize(
    "odd",
    ["\ud800", {"x": "\udfff"}, {1: "a non-string key"}, 2**80, -(2**80)],
    ids=["lone-surrogate", "lone-surrogate-nested", "int-key", "huge", "huge-negative"],
)
def test_values_the_fast_validator_cannot_read_are_checked_by_python_jsonschema(recorded: Recorded, odd: Any) -> None:
    arguments, _ = recorded["rimthan.start_workflow"][0]
    schema = compiled_schema(CONTRACTS["rimthan.start_workflow"].input_schema)
    state = arguments["confirmed_state"]
    for value in ({**arguments, "workflow": odd}, {**arguments, "confirmed_state": {**state, "state": {"f": odd}}}):
        _agree(schema, value)


def test_one_schema_is_compiled_once() -> None:
    start, cont = CONTRACTS["rimthan.start_workflow"], CONTRACTS["rimthan.continue_workflow"]
    assert compiled_schema(start.output_schema) is compiled_schema(cont.output_schema)  # the same statuses
    assert compiled_schema(start.input_schema) is not compiled_schema(cont.input_schema)


def test_a_call_remembers_answers_but_never_a_refusal() -> None:
    key: Mapping[str, Any] = {"checkpoint": "t"}
    answers = iter(range(10))
    assert once("x", (key,), lambda: next(answers)) == 0
    assert once("x", (key,), lambda: next(answers)) == 1  # outside a call nothing is remembered
    with one_call():
        assert once("x", (key,), lambda: next(answers)) == 2
        assert once("x", (key,), lambda: next(answers)) == 2
        assert once("x", (dict(key),), lambda: next(answers)) == 3  # an equal but other object is another key

        def refuse() -> int:
            raise ValueError("refused")

        for _ in range(2):
            with pytest.raises(ValueError):
                once("y", (key,), refuse)
    with one_call():
        assert once("x", (key,), lambda: next(answers)) == 4
