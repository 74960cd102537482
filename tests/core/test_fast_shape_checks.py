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
hex64 = st.one_of(st.text(alphabet=HEX, min_size=64, max_size=64), st.just("A" * 64), st.just("a" * 63 + "\n"))
_entries = st.dictionaries(
    st.text(max_size=4), st.tuples(hex64, st.one_of(st.integers(min_value=-2, max_value=10), scalars)), max_size=3
)


def _columns(entries: dict[str, tuple[str, Any]], digests: str, reverse: bool) -> dict[str, Any]:
    names = sorted(entries, reverse=reverse)
    return {"names": names, digests: "".join(entries[n][0] for n in names), "sizes": [entries[n][1] for n in names]}


def _receipts(digests: str, sizes: bool) -> st.SearchStrategy[Any]:
    """Columns, mostly near a well-formed table: unsorted names, odd digests and sizes, members missing or extra."""
    columns = st.builds(_columns, _entries, st.just(digests), st.sampled_from([False, False, False, True]))
    if not sizes:
        columns = columns.map(lambda c: {k: v for k, v in c.items() if k != "sizes"})
    edited = st.tuples(columns, st.sampled_from(["names", digests, "sizes", "extra"]), scalars).map(
        lambda t: {**t[0], t[1]: t[2]}
    )
    return st.one_of(columns, columns, edited, scalars)


def _names_ok(names: Any) -> bool:
    return (
        isinstance(names, list)
        and all(isinstance(n, str) for n in names)
        and all(a < b for a, b in zip(names, names[1:], strict=False))
    )


def _digests_ok(digests: Any, count: int) -> bool:
    return isinstance(digests, str) and len(digests) == 64 * count and set(digests) <= set(HEX)


def _well_formed(table: Any, digests: str, sizes: bool) -> bool:
    """The definition, written out: sorted unique names, 64 hex digits per name, a size >= 0 per artifact."""
    members = {"names", digests, "sizes"} if sizes else {"names", digests}
    if not (isinstance(table, dict) and set(table) == members and _names_ok(table["names"])):
        return False
    count = len(table["names"])
    if not _digests_ok(table[digests], count):
        return False
    column = table["sizes"] if sizes else [0] * count
    return isinstance(column, list) and len(column) == count and all(type(s) is int and s >= 0 for s in column)


@settings(max_examples=300, deadline=None)
@given(_receipts("sha256", sizes=True), _receipts("input_sha256", sizes=False))
def test_receipt_checks_refuse_every_malformed_receipt(artifacts: Any, validators: Any) -> None:
    claims = {**_BASE, "artifacts": artifacts, "validators": validators}
    well_formed = _well_formed(artifacts, "sha256", sizes=True) and _well_formed(
        validators, "input_sha256", sizes=False
    )
    try:
        Checkpoint.from_claims(claims)
        accepted = True
    except TokenError:
        accepted = False
    assert accepted == well_formed
