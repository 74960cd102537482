"""Fast shape checks never accept what the JSON Schema they stand in for refuses.

Manifest file entries and checkpoint receipts grow with a release or a run,
so they are checked by plain loops instead of jsonschema; the rest of a
manifest by a plain walk of its schema (so a verify never imports jsonschema).
Hypothesis throws near-miss values at each and asserts the fast check is at
least as strict.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from rimthan_workflow_registry.errors import TokenError
from rimthan_workflow_registry.release.format import MANIFEST_FORMAT
from rimthan_workflow_registry.release.manifest_parse import (
    _SKELETON_SCHEMA,
    FILE_ENTRY_SCHEMA,
    conforms,
    file_entry_problem,
)
from rimthan_workflow_registry.run.checkpoints import Checkpoint, HostBinding
from support.json_edits import delete_at, pointers, set_at

HEX = "0123456789abcdef"
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-5, max_value=2**40),
    st.floats(allow_nan=False),
    st.text(max_size=5),
    st.text(alphabet=HEX, min_size=63, max_size=65),
    st.just("a" * 64),
    st.just("a" * 64 + "\n"),
    st.just("A" * 64),
)
paths = st.one_of(st.text(min_size=0, max_size=3), st.just("x" * 1025), st.just("ok/file.md"))
media = st.one_of(
    st.sampled_from(
        ["application/json", "text/markdown", "application/toml", "application/octet-stream", "text/plain", ""]
    ),
    scalars,
)
entries = st.one_of(
    st.fixed_dictionaries(
        {
            "path": st.one_of(paths, scalars),
            "sha256": scalars,
            "size": st.one_of(st.integers(min_value=-2, max_value=10), scalars),
            "media_type": media,
        },
        optional={"extra": scalars},
    ),
    st.dictionaries(st.sampled_from(["path", "sha256", "size", "media_type", "x"]), scalars, max_size=5),
    scalars,
    st.lists(scalars, max_size=2),
)
ENTRY = Draft202012Validator(FILE_ENTRY_SCHEMA)


@settings(max_examples=400, deadline=None)
@given(entries)
def test_file_entry_fast_check_is_never_looser_than_the_schema(entry: Any) -> None:
    if file_entry_problem(entry) is None:
        assert ENTRY.is_valid(entry)
    if not ENTRY.is_valid(entry):
        assert file_entry_problem(entry) is not None


def test_file_entry_fast_check_accepts_a_real_entry_and_refuses_a_trailing_newline() -> None:
    good = {"path": "catalogue.toml", "sha256": "a" * 64, "size": 3, "media_type": "application/toml"}
    assert file_entry_problem(good) is None
    assert file_entry_problem({**good, "sha256": "a" * 64 + "\n"}) is not None
    assert file_entry_problem({**good, "size": 3.0}) is not None
    assert file_entry_problem({**good, "size": True}) is not None


SKELETON = Draft202012Validator(_SKELETON_SCHEMA)
_MANIFEST: dict[str, Any] = {
    "format": MANIFEST_FORMAT,
    "release": {
        "catalogue": "research",
        "version": "1.2.0",
        "id": "research@1.2.0",
        "title": "Research",
        "scope": {"name": "research", "profile": "rimthan.workflow-engine/1"},
        "created": 0,
    },
    "workflows": [{"id": "w", "version": "1.0.0", "owner": "o", "entry_aliases": ["a", "b"], "title": ""}],
    "host_adapters": [{"id": "h", "version": "1.0.0", "harness": "x"}],
    "files": [{"path": "catalogue.toml", "sha256": "a" * 64, "size": 3, "media_type": "application/toml"}],
}
near_misses = st.one_of(
    scalars,
    st.just("a" * 64 + "\n"),
    st.just("A-1"),
    st.just("x" * 257),
    st.just("x" * 4097),
    st.just([]),
    st.just(["a", "a"]),
    st.just({}),
    st.lists(st.one_of(st.text(max_size=3), scalars), max_size=3),
    st.dictionaries(st.sampled_from(["id", "version", "name", "profile", "x"]), scalars, max_size=3),
)


@settings(max_examples=600, deadline=None)
@given(st.data(), st.sampled_from(["replace", "delete", "add"]), near_misses)
def test_manifest_skeleton_plain_check_is_never_looser_than_the_schema(data: Any, action: str, new: Any) -> None:
    path = data.draw(st.sampled_from(pointers(_MANIFEST)))
    if action == "replace":
        value = set_at(_MANIFEST, path, new)
    elif action == "delete":
        value = delete_at(_MANIFEST, path)
    else:  # a key no schema allows, beside this one (if this is a key, not an array index)
        value = set_at(_MANIFEST, (*path[:-1], f"{path[-1]}-extra"), new) if isinstance(path[-1], str) else _MANIFEST
    if conforms(value, _SKELETON_SCHEMA):
        assert SKELETON.is_valid(value)


def test_manifest_skeleton_plain_check_accepts_a_conforming_manifest() -> None:
    """The fast path must actually be taken for a well-formed manifest (else every verify imports jsonschema)."""
    assert SKELETON.is_valid(_MANIFEST)
    assert conforms(_MANIFEST, _SKELETON_SCHEMA)
    assert not conforms({**_MANIFEST, "format": MANIFEST_FORMAT + "\n"}, _SKELETON_SCHEMA)
    assert not conforms({**_MANIFEST, "release": {**_MANIFEST["release"], "created": True}}, _SKELETON_SCHEMA)


_BASE = Checkpoint(
    1,
    "w",
    "1.0.0",
    "r@1.0.0",
    "sha256:" + "0" * 64,
    "s",
    "sha256:" + "1" * 64,
    None,
    host=HostBinding.of("h", "1.0.0", ["c"], []),
).to_claims()
receipts = st.dictionaries(
    st.text(min_size=1, max_size=4), st.one_of(st.lists(scalars, max_size=3), scalars), max_size=3
)


@settings(max_examples=300, deadline=None)
@given(receipts, receipts)
def test_receipt_checks_refuse_every_malformed_receipt(artifacts: dict[str, Any], validators: dict[str, Any]) -> None:
    claims = {**_BASE, "artifacts": artifacts, "validators": validators}
    well_formed = all(
        isinstance(r, list)
        and len(r) == 2
        and isinstance(r[0], str)
        and len(r[0]) == 64
        and set(r[0]) <= set(HEX)
        and type(r[1]) is int
        and r[1] >= 0
        for r in artifacts.values()
    ) and all(
        isinstance(r, list)
        and len(r) == 2
        and r[0] == "pass"
        and isinstance(r[1], str)
        and len(r[1]) == 64
        and set(r[1]) <= set(HEX)
        for r in validators.values()
    )
    try:
        Checkpoint.from_claims(claims)
        accepted = True
    except TokenError:
        accepted = False
    assert accepted == well_formed
