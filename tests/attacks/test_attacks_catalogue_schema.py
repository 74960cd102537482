"""Catalogue schemas: the fast path never accepts an artifact or a state that Python jsonschema refuses.

``release.catalogue_schema.CatalogueSchema`` lets jsonschema-rs say "valid"
and asks Python jsonschema (the reference) for everything else. That is sound
only if the fast "valid" never covers a value Python jsonschema refuses, so
hypothesis throws mutations of the packaged catalogues' example artifacts
(and strings aimed at the known dialect differences: a final newline before
``$``, non-ASCII digits, impossible dates) at both, for every schema of every
packaged catalogue. A refusal is always Python jsonschema's own.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rimthan_workflow_registry.jsonschema_formats import FORMAT_CHECKER
from rimthan_workflow_registry.release.catalogue_schema import CatalogueSchema
from support.json_edits import pointers, replaced_at
from test_attacks_fuzz_depth import cheap_mutation
from test_attacks_tools import TOOLS, _get

CATALOGUES = Path(__file__).resolve().parents[2] / "catalogues"
SCHEMAS = sorted(CATALOGUES.glob("*/*/schemas/*.schema.json"))
# Where ECMA-262 / jsonschema-rs and Python read a string differently, and values a format checker refuses.
DIALECT = ("S1\n", "E12\n", "R3\n", "2024-01-31\n", "S\u0661", "E\uff11", "2024-02-30", "2024-13-01", "x\r", "\ufeff")


# The harness writes the workspace manifest at setup; the catalogues ship no example of it.
WORKSPACE_MANIFEST = {
    "harness": "claude-code",
    "adapter": {"id": "claude-code", "version": "1.0.0"},
    "capabilities": ["subagents", "file-write"],
    "delivered": [{"asset": "critic", "kind": "subagent", "path": ".claude/agents/critic.md", "sha256": "0" * 64}],
    "symlink_free": True,
}


def _examples(schema_path: Path) -> list[Any]:
    """The catalogue's valid example documents for this schema (by name)."""
    name = schema_path.name.removesuffix(".schema.json")
    found = sorted((schema_path.parent.parent / "examples").glob(f"{name}.json"))
    return [json.loads(p.read_text(encoding="utf-8")) for p in found] or [WORKSPACE_MANIFEST]


def _agree(schema: CatalogueSchema, value: Any) -> None:
    slow = sorted((e.message, list(e.absolute_path)) for e in schema.explain.iter_errors(value))
    ours = sorted((e.message, list(e.absolute_path)) for e in schema.iter_errors(value))
    assert ours == slow, repr(value)[:400]
    assert schema.is_valid(value) == (not slow)


def _dialect_mutation(rng: random.Random, base: Any) -> Any:
    strings = [p for p in pointers(base) if isinstance(_get(base, p), str)]
    if not strings:
        return base
    path = rng.choice(strings)
    current = _get(base, path)
    return replaced_at(base, path, rng.choice((current + "\n", *DIALECT)))


@pytest.mark.parametrize("schema_path", SCHEMAS, ids=lambda p: "/".join(p.parts[-4:]))
def test_examples_pass_and_the_fast_path_is_used(schema_path: Path) -> None:
    schema = CatalogueSchema(json.loads(schema_path.read_text(encoding="utf-8")))
    assert schema.fast is not None, "a packaged schema fell back to Python jsonschema alone"
    for example in _examples(schema_path):
        assert schema.explain.is_valid(example) and list(schema.iter_errors(example)) == []


@pytest.mark.parametrize("schema_path", SCHEMAS, ids=lambda p: "/".join(p.parts[-4:]))
def test_fast_and_python_verdicts_agree_on_mutated_documents(schema_path: Path) -> None:
    schema = CatalogueSchema(json.loads(schema_path.read_text(encoding="utf-8")))
    bases = _examples(schema_path)

    @settings(max_examples=12, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(seed=st.integers(0, 2**32), pick=st.integers(0, 10**6))
    def agree(seed: int, pick: int) -> None:
        rng = random.Random(seed)
        base = bases[pick % len(bases)]
        for _ in range(10):
            mutated, _how = cheap_mutation(rng, dict.fromkeys(TOOLS, base), TOOLS[0])
            _agree(schema, mutated)
            _agree(schema, _dialect_mutation(rng, base))

    agree()


def test_a_final_newline_before_dollar_is_python_jsonschemas_answer() -> None:
    """Python's ``$`` matches before a final newline (ECMA-262's does not): the reference answer stands."""
    schema = CatalogueSchema({"type": "string", "pattern": "^S[1-9][0-9]*$"})
    assert schema.explain.is_valid("S1\n")
    assert list(schema.iter_errors("S1\n")) == []
    assert [e.message for e in schema.iter_errors("S0")] == [e.message for e in schema.explain.iter_errors("S0")]


def test_formats_are_python_jsonschemas() -> None:
    schema = CatalogueSchema({"type": "string", "format": "date"})
    assert schema.fast is not None
    assert schema.is_valid("2024-02-29") and not schema.is_valid("2024-02-30")
    # jsonschema-rs asks a format only about strings: every checker must pass anything else, as it does
    for name in FORMAT_CHECKER.checkers:
        others: tuple[object, ...] = (7, 2.5, None, True, [], {})
        for other in others:
            assert FORMAT_CHECKER.conforms(other, name), (name, other)


@pytest.mark.parametrize(
    ("keyword", "schema", "value"),
    [
        ("multipleOf", {"type": "number", "multipleOf": 0.1}, 0.3),  # jsonschema-rs accepts, Python refuses
        ("patternProperties", {"type": "object", "patternProperties": {"^a$": {"type": "string"}}}, {"a\n": 1}),
    ],
)
def test_keywords_read_differently_keep_the_schema_python_only(keyword: str, schema: Any, value: Any) -> None:
    compiled = CatalogueSchema({"$defs": {"deep": schema}, "$ref": "#/$defs/deep"})
    assert compiled.fast is None, keyword
    _agree(compiled, value)


@pytest.mark.parametrize("odd", ["\ud800", {"x": "\udfff"}, 2**80], ids=["lone-surrogate", "nested", "huge"])
def test_values_the_fast_validator_cannot_read_are_decided_by_python(odd: Any) -> None:
    schema = CatalogueSchema({"type": "object", "properties": {"v": {"type": "string", "maxLength": 3}}})
    _agree(schema, {"v": odd})
