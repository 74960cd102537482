"""``check_schema_keywords``: a keyword Draft 2020-12 does not define is refused at every schema position.

The keyword list is jsonschema's own (the 2020-12 vocabulary metaschemas); the
positions walked are checked here against the same metaschemas, so a keyword
that takes a subschema is never skipped.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from jsonschema_specifications import REGISTRY  # type: ignore[import-untyped]
from rimthan_workflow_registry.errors import CatalogueError, FailureCode
from rimthan_workflow_registry.jsonschema_formats import Draft202012Validator, draft202012_keywords
from rimthan_workflow_registry.release import check_schema_keywords
from rimthan_workflow_registry.release.schema_vocabulary import SUBSCHEMA_KEYWORDS

TYPO = {"minItem": 1}
# (the schema, the JSON pointer of the misspelt keyword): every kind of subschema position
POSITIONS = [
    ({**TYPO}, "/minItem"),
    ({"properties": {"a": TYPO}}, "/properties/a/minItem"),
    ({"patternProperties": {"^a": TYPO}}, "/patternProperties/^a/minItem"),
    ({"$defs": {"d": {"items": TYPO}}}, "/$defs/d/items/minItem"),
    ({"prefixItems": [True, TYPO]}, "/prefixItems/1/minItem"),
    ({"allOf": [{}, TYPO]}, "/allOf/1/minItem"),
    ({"anyOf": [TYPO]}, "/anyOf/0/minItem"),
    ({"oneOf": [TYPO]}, "/oneOf/0/minItem"),
    ({"not": TYPO}, "/not/minItem"),
    ({"if": TYPO}, "/if/minItem"),
    ({"then": TYPO}, "/then/minItem"),
    ({"else": TYPO}, "/else/minItem"),
    ({"dependentSchemas": {"a": TYPO}}, "/dependentSchemas/a/minItem"),
    ({"contains": TYPO}, "/contains/minItem"),
    ({"additionalProperties": TYPO}, "/additionalProperties/minItem"),
    ({"propertyNames": TYPO}, "/propertyNames/minItem"),
    ({"unevaluatedItems": TYPO}, "/unevaluatedItems/minItem"),
    ({"unevaluatedProperties": TYPO}, "/unevaluatedProperties/minItem"),
    ({"contentSchema": TYPO}, "/contentSchema/minItem"),
    ({"properties": {"a/b~c": {"items": {"allOf": [TYPO]}}}}, "/properties/a~1b~0c/items/allOf/0/minItem"),
]


def _check(schema: Any) -> None:
    check_schema_keywords({"schemas/s.schema.json": schema}, lambda _path: json.dumps(schema).encode())


@pytest.mark.parametrize(("schema", "pointer"), POSITIONS, ids=[pointer for _, pointer in POSITIONS])
def test_a_misspelt_keyword_is_refused_wherever_a_schema_sits(schema: Any, pointer: str) -> None:
    Draft202012Validator.check_schema(schema)  # the metaschema lets it through

    with pytest.raises(CatalogueError) as refused:
        _check(schema)

    assert refused.value.code is FailureCode.SCHEMA_INVALID
    assert refused.value.path == "schemas/s.schema.json"
    assert f"unknown JSON Schema keyword 'minItem' (did you mean 'minItems'?) at JSON pointer {pointer!r}" in str(
        refused.value.message
    )
    assert refused.value.next_step is not None and refused.value.next_step.startswith("rename it 'minItems'")


# an earlier draft's keyword (the 2020-12 metaschema still lists them, deprecated): its 2020-12 replacement
RETIRED = [
    ({"definitions": {"d": {"type": "string"}}}, "definitions", "'$defs'", "rename it '$defs'"),
    (
        {"dependencies": {"a": ["b"]}},
        "dependencies",
        "'dependentSchemas' or 'dependentRequired'",
        "replace it with 'dependentSchemas' or 'dependentRequired'",
    ),
    ({"$recursiveRef": "#"}, "$recursiveRef", "'$dynamicRef'", "rename it '$dynamicRef'"),
]


@pytest.mark.parametrize(("schema", "keyword", "meant", "fix"), RETIRED, ids=[r[1] for r in RETIRED])
def test_an_earlier_drafts_keyword_is_refused_naming_its_2020_12_replacement(
    schema: Any, keyword: str, meant: str, fix: str
) -> None:
    with pytest.raises(CatalogueError) as refused:
        _check(schema)

    assert f"unknown JSON Schema keyword {keyword!r} (did you mean {meant}?) at JSON pointer '/{keyword}'" in str(
        refused.value.message
    )
    assert refused.value.next_step is not None and refused.value.next_step.startswith(f"{fix}, or, for an annotation")


def test_annotations_data_and_property_names_are_not_keywords() -> None:
    _check(
        {
            "x-owner": {"minItem": 1},
            "properties": {"minItem": {"type": "integer", "x-unit": "results"}},
            "default": {"requird": 1},
            "examples": [{"propertes": {}}],
            "enum": [{"minItem": 1}],
            "const": {"minItem": 1},
            "items": True,
        }
    )


def test_the_keywords_are_the_2020_12_vocabularies_and_the_walk_reaches_every_subschema() -> None:
    """The subschema positions walked are exactly those the vocabulary metaschemas declare as schemas."""
    keywords = draft202012_keywords()
    assert set(Draft202012Validator.VALIDATORS) <= keywords
    assert {"$defs", "then", "else", "title", "examples", "contentSchema", "deprecated"} <= keywords
    assert not {"definitions", "dependencies", "$recursiveRef"} & keywords  # earlier drafts'
    declared = set()
    for vocabulary in ("core", "applicator", "unevaluated", "content"):
        meta = REGISTRY.contents(f"https://json-schema.org/draft/2020-12/meta/{vocabulary}")
        for keyword, value in meta["properties"].items():
            if "#meta" in json.dumps(value) or "schemaArray" in json.dumps(value):
                declared.add(keyword)
    assert declared == SUBSCHEMA_KEYWORDS
