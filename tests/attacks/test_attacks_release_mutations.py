"""Signed releases mutated one value at a time by an insider: refused with a code at load, or they run.

The insider holds the release key and skips the packager: whatever the
catalogue rules at load do not refuse, a hand-made manifest can publish.
Once per module the packaged 1.2.0 catalogue is built with the real
packager; per example Hypothesis copies that release and changes ONE thing
in ``manifest.json`` (half of the examples) or in one of the catalogue's
TOML, JSON or Markdown files (the last changed as bytes only):

- a value replaced by an odd one (:data:`support.mutations.ODD_VALUES`, of
  the old value's type where one is, so it gets past the type checks);
- a value replaced by another of the same type from elsewhere in the file
  (another file's digest, size, path or media type, another step's id);
- a key or item deleted;
- a raw spelling no serialiser writes (nesting 100,000 deep, ``1e400``,
  ``-0``, ``NaN``, a lone surrogate, an integer of 5,000 digits, a TOML date);
- a key written twice, the old value then an odd one;
- the file's bytes (a BOM, a NUL, invalid UTF-8, nothing, half of it,
  CRLF line ends, a lone surrogate).

A catalogue file's new digest and size go into the manifest, and every
manifest is re-signed with the real key (``sign_manifest``, as the insider
attacks do), so the change reaches the content rules. The release is then
loaded through the server's own path (``load_release`` ->
``verify_release``). Each mutation must end one of two ways:

- refused: a ``RegistryError`` with a code from the closed list (never
  ``internal_error``) naming a file;
- served: its manifest is exactly what the packager writes for its files
  (nothing the packager could not have signed), every prompt and resource
  lists and reads through the server's catalogues, and a whole run driven
  through the server's ``tools/call`` (results checked against the output
  schemas) completes or stops on a protocol answer, never ``internal_error``.

Anything else (a ``TypeError``, ``RecursionError``, ``KeyError`` from a
parser or the engine) fails the test. The fuzz found one hole (a file listed
with another media type than its name gives it, now ``manifest_invalid``);
a hidden or ``__pycache__`` file signed into a release (not a one-value
change) is now ``path_unsafe``. Both are fixed cases at the end.

The same mutations of the 1.3.0 release, loaded as a migration target
(``load_release(..., migration=True)``), must be refused with a code or
let a 1.2.0 run migrate to them (a preview, then confirmed) and go on to a
protocol answer.

``make test`` runs ``SLICE`` mutations (and a quarter as many migration
targets); ``make fuzz-long`` runs ``RIMTHAN_FUZZ_RELEASE_MUTATIONS`` (1,000
by default, and a quarter as many migration targets).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import rfc8785
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rimthan_workflow_mcp.loading import LoadedRelease, ReleaseLoader, load_release
from rimthan_workflow_mcp.prompts import PromptCatalogue
from rimthan_workflow_mcp.provider import ReleaseProvider
from rimthan_workflow_mcp.resources import ResourceCatalogue
from rimthan_workflow_mcp.tool_contracts import contract_documents
from rimthan_workflow_registry.canonical import canonical_bytes
from rimthan_workflow_registry.errors import FailureCode, RegistryError
from rimthan_workflow_registry.release.format import (
    CATALOGUE_DIR,
    CHECKSUMS_NAME,
    MANIFEST_NAME,
    FileEntry,
    manifest_for,
    render_checksums,
)
from rimthan_workflow_registry.release.manifest_parse import parse_manifest
from rimthan_workflow_registry.release.trust import TrustStore, load_trust
from rimthan_workflow_registry.release.verified import VerifiedRelease
from rimthan_workflow_registry.release.verify import verify_release
from rimthan_workflow_registry.run.tokens import CheckpointKeyring
from support.json_edits import delete_at, set_at
from support.mutations import (
    ODD_VALUES,
    ROUTES,
    VERSION,
    dumped,
    locations,
    migrate_to_a_protocol_answer,
    mutated,
    odd_value,
    refused_with_a_code,
    run_to_a_protocol_answer,
)
from support.releases import (
    KeyPair,
    build_release,
    make_keypair,
    packaged_source,
    resign_release,
    sign_manifest,
    trust_dir,
)

SLICE = 80
MUTATIONS = int(os.environ.get("RIMTHAN_FUZZ_RELEASE_MUTATIONS", "1000"))
SOURCE = packaged_source(VERSION)
TARGET_VERSION = "1.3.0"


def _catalogue_files(source: Path) -> list[str]:
    """The TOML, JSON and Markdown files of a packaged catalogue source, but its examples (no release reads them)."""
    return sorted(
        str(p.relative_to(source))
        for p in source.rglob("*")
        if p.suffix in (".toml", ".json", ".md") and p.is_file() and "examples" not in p.parts
    )


CATALOGUE_FILES = _catalogue_files(SOURCE)
TARGET_FILES = _catalogue_files(packaged_source(TARGET_VERSION))
_DEEP = 100_000
RAW_JSON = [
    "[" * _DEEP + "]" * _DEEP,
    '{"a":' * 1000 + "0" + "}" * 1000,
    "[" * 40 + "]" * 40,
    "1e400",
    "-0",
    "1.0",
    "1E2",
    "9" * 5000,
    "NaN",
    "-Infinity",
    '"\\ud800"',
    '"\\u0000"',
    '"\\u202e"',
]
RAW_TOML = [
    "[" * _DEEP + "]" * _DEEP,
    "{a = " * 1000 + "0" + "}" * 1000,
    "[" * 40 + "]" * 40,
    "inf",
    "nan",
    "-0.0",
    "9" * 5000,
    "0x7fffffffffffffff",
    "1979-05-27T07:32:00Z",
    "00:00:00",
    '"\\u0000"',
    "'''a\nb'''",
    '"\\ud800"',
]
KINDS = ("value", "value", "borrow", "borrow", "delete", "raw", "duplicate", "bytes")  # value edits most often
_MARK = "rimthan-mutation-mark"


@dataclass(frozen=True)
class Pristine:
    """The releases built once by the real packager (1.2.0, and 1.3.0 as a migration target), verified 1.2.0,
    the key that signed them and the trust store that knows it."""

    release: Path
    target: Path
    source: VerifiedRelease
    key: KeyPair
    trust: TrustStore


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Pristine:
    root = tmp_path_factory.mktemp("release-mutations")
    key = make_keypair(root / "keys", "release-engineer")
    release = build_release(SOURCE, root / "releases", [key])
    target = build_release(packaged_source(TARGET_VERSION), root / "releases", [key])
    trust = load_trust(trust_dir(root / "trust", key))
    return Pristine(release, target, verify_release(release, trust), key, trust)


# --------------------------------------------------------------------------- the mutated bytes


def _parsed(rel: str, data: bytes) -> Any:
    return tomllib.loads(data.decode("utf-8")) if rel.endswith(".toml") else json.loads(data)


def _written(rel: str, document: Any) -> str | None:
    """``document`` as the file ``rel`` holds it: the manifest canonical where it can be, so it reaches the rules."""
    if rel != MANIFEST_NAME:
        return dumped(rel, document)
    try:
        return canonical_bytes(document).decode("utf-8")
    except (rfc8785.CanonicalizationError, TypeError, ValueError):  # no canonical form: JSON all the same
        return dumped(rel, document)


def _borrowed(document: Any, target: tuple[Any, ...], index: int) -> Any:
    """``document`` with the value at ``target`` replaced by another location's value of the same type.

    What a signer's slip looks like: another file's digest or size, another
    path, another media type, another step's id, the value the packager would
    have written elsewhere; the type checks cannot tell it from the real one.
    """
    old = _at(document, target)
    alike = [p for p in locations(document) if p != target and type(_at(document, p)) is type(old)]
    return set_at(document, target, _at(document, alike[index % len(alike)])) if alike else document


def _at(document: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        document = document[step]
    return document


def _fragment(rel: str, value: Any) -> str | None:
    """``value`` as it is spelled in ``rel``'s format, on its own (``None`` where it has no inline form)."""
    if rel.endswith(".toml"):
        text = dumped(rel, {"k": value})
        return text[len("k = ") :].rstrip("\n") if text and text.startswith("k = ") and text.count("\n") == 1 else None
    return dumped(rel, value)


def _marked(rel: str, document: Any, target: tuple[Any, ...]) -> tuple[str, str] | None:
    """``document`` written with a mark at ``target``, and the mark as spelled in the text."""
    text = _written(rel, set_at(document, target, _MARK))
    token = f'"{_MARK}"'
    return (text, token) if text is not None and text.count(token) == 1 else None


def _raw(rel: str, document: Any, target: tuple[Any, ...], index: int) -> str | None:
    """The text with a raw spelling no serialiser writes at ``target``."""
    marked = _marked(rel, document, target)
    raws = RAW_TOML if rel.endswith(".toml") else RAW_JSON
    return marked[0].replace(marked[1], raws[index % len(raws)]) if marked else None


def _duplicate(rel: str, document: Any, target: tuple[Any, ...], index: int, same_type: bool) -> str | None:
    """The text with the key at ``target`` written twice: its old value, then an odd one."""
    marked = _marked(rel, document, target)
    old = _at(document, target)
    first, second = _fragment(rel, old), _fragment(rel, odd_value(old, index, same_type))
    if marked is None or first is None or second is None or not isinstance(target[-1], str):
        return None
    text, token = marked
    if rel.endswith(".toml"):  # the whole line again, below: ``key = old`` then ``key = new``
        start = text.rfind("\n", 0, text.index(token)) + 1
        end = text.find("\n", start)
        line = text[start:end]
        return text[:start] + line.replace(token, first) + "\n" + line.replace(token, second) + text[end:]
    return text.replace(token, f"{first},{json.dumps(target[-1])}:{second}")


def _byte_edit(data: bytes, index: int) -> bytes:
    """The whole file changed: a BOM, a NUL, invalid UTF-8, nothing, half of it, CRLF, a lone surrogate."""
    edits = (
        b"\xef\xbb\xbf" + data,
        data + b"\x00",
        b"\xff" + data[1:],
        b"",
        data[: len(data) // 2],
        data.replace(b"\n", b"\r\n"),
        "\u202e\ud800".encode("utf-8", "surrogatepass") + data,  # a bidi override, then a lone surrogate
    )
    return edits[index % len(edits)]


Mutation = tuple[str, str, int, int, bool, str]  # file, kind, which location, which odd value, same type, route


def mutated_bytes(original: bytes, mutation: Mutation) -> bytes | None:
    """The file's new bytes (``None`` where the mutation has no form in that file)."""
    rel, kind, path_index, value_index, same_type, _ = mutation
    if kind == "bytes" or rel.endswith(".md"):  # instructions and assets: text, changed as bytes
        return _byte_edit(original, value_index)
    document = _parsed(rel, original)
    paths = locations(document)
    target = paths[path_index % len(paths)]
    if kind == "value":
        text = _written(rel, mutated(document, path_index, value_index, same_type)[1])
    elif kind == "borrow":
        text = _written(rel, _borrowed(document, target, value_index))
    elif kind == "delete":
        text = _written(rel, delete_at(document, target))
    elif kind == "raw":
        text = _raw(rel, document, target, value_index)
    else:
        text = _duplicate(rel, document, target, value_index, same_type)
    return None if text is None else text.encode("utf-8", "surrogatepass")


# --------------------------------------------------------------------------- publish, load, run


def publish(release: Path, key: KeyPair, rel: str, data: bytes) -> None:
    """What the insider signs: the new manifest as it is, or the catalogue file with its digest in the manifest.

    A hand-made manifest that parses gets the SHA256SUMS it implies, so the
    refusal, if any, comes from what the manifest says.
    """
    if rel != MANIFEST_NAME:
        resign_release(release, [key], edit=lambda catalogue: (catalogue / rel).write_bytes(data))
        return
    sign_manifest(release, [key], data)
    with contextlib.suppress(RegistryError):  # a manifest that does not parse implies no SHA256SUMS
        (release / CHECKSUMS_NAME).write_bytes(render_checksums(parse_manifest(data)))


def packager_would_write(release: VerifiedRelease) -> None:
    """A served release's manifest is the one the packager writes for its catalogue and files."""
    catalogue = release.root / CATALOGUE_DIR
    files = [
        FileEntry.for_bytes(p.relative_to(catalogue).as_posix(), p.read_bytes())
        for p in catalogue.rglob("*")
        if p.is_file()
    ]
    expected = manifest_for(release.catalogue, files, release.manifest.release.created)
    assert release.manifest == expected, (release.manifest, expected)


def prompts_and_resources_serve(loaded: LoadedRelease, pristine: Pristine) -> None:
    """Every prompt and resource of a served release lists and reads through the server's catalogues."""
    provider = ReleaseProvider(ReleaseLoader(pristine.trust, loaded.keyring), loaded)
    prompts = PromptCatalogue(provider)
    for prompt in prompts.list_prompts():
        assert prompts.get(prompt.name, {"arguments": "x"}).messages
    resources = ResourceCatalogue(provider, contract_documents())
    for resource in resources.list_resources():
        assert resources.read(str(resource.uri)).contents


def mutated_copy(work: Path, pristine: Path, key: KeyPair, mutation: Mutation) -> Path | None:
    """A copy of the release ``pristine`` with the mutation published (``None``: it has no form in that file)."""
    rel = mutation[0]
    shutil.rmtree(work, ignore_errors=True)
    release = work / pristine.name
    shutil.copytree(pristine, release)
    target = release / rel if rel == MANIFEST_NAME else release / CATALOGUE_DIR / rel
    data = mutated_bytes(target.read_bytes(), mutation)
    if data is None:
        return None
    publish(release, key, rel, data)
    return release


def load_and_run(work: Path, pristine: Pristine, mutation: Mutation) -> None:
    """Copy the release, publish the mutation, load it as the server does and, if it loads, run it."""
    release = mutated_copy(work, pristine.release, pristine.key, mutation)
    if release is None:
        return
    try:
        loaded = load_release(release, pristine.trust, CheckpointKeyring.generate())
    except RegistryError as exc:
        refused_with_a_code(exc)
        return
    packager_would_write(loaded.release)
    prompts_and_resources_serve(loaded, pristine)
    run_to_a_protocol_answer(loaded.release, pristine.trust, work, mutation[-1])


def load_and_migrate(work: Path, pristine: Pristine, mutation: Mutation) -> None:
    """Mutate the 1.3.0 release, load it as the server loads a migration target and, if it loads, migrate to it."""
    release = mutated_copy(work, pristine.target, pristine.key, mutation)
    if release is None:
        return
    scope = pristine.source.manifest.release.scope_name
    try:
        loaded = load_release(
            release, pristine.trust, CheckpointKeyring.generate(), expected_scope=scope, migration=True
        )
    except RegistryError as exc:
        refused_with_a_code(exc)
        return
    packager_would_write(loaded.release)
    migrate_to_a_protocol_answer(pristine.source, loaded.release, pristine.trust, work, mutation[-1])


def _mutation(files: list[str] = CATALOGUE_FILES) -> st.SearchStrategy[Mutation]:
    return st.tuples(
        st.just(MANIFEST_NAME) | st.sampled_from(files),  # the manifest half the time
        st.sampled_from(KINDS),
        st.integers(0, 10_000),
        st.integers(0, len(ODD_VALUES) - 1),
        st.booleans(),
        st.sampled_from(ROUTES),
    )


@settings(max_examples=SLICE, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutation=_mutation())
def test_a_mutated_signed_release_is_refused_with_a_code_or_runs(
    tmp_path: Path, pristine: Pristine, mutation: Mutation
) -> None:
    load_and_run(tmp_path / "case", pristine, mutation)


@pytest.mark.long
@settings(max_examples=MUTATIONS, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutation=_mutation())
def test_long_a_mutated_signed_release_is_refused_with_a_code_or_runs(
    tmp_path: Path, pristine: Pristine, mutation: Mutation
) -> None:
    load_and_run(tmp_path / "case", pristine, mutation)


@settings(max_examples=SLICE // 4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutation=_mutation(TARGET_FILES))
def test_a_mutated_migration_target_is_refused_with_a_code_or_migrated_to(
    tmp_path: Path, pristine: Pristine, mutation: Mutation
) -> None:
    load_and_migrate(tmp_path / "case", pristine, mutation)


@pytest.mark.long
@settings(max_examples=MUTATIONS // 4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutation=_mutation(TARGET_FILES))
def test_long_a_mutated_migration_target_is_refused_with_a_code_or_migrated_to(
    tmp_path: Path, pristine: Pristine, mutation: Mutation
) -> None:
    load_and_migrate(tmp_path / "case", pristine, mutation)


# --------------------------------------------------------------------------- what the fuzz found, as fixed cases


def _published_manifest(work: Path, pristine: Pristine, edit: Callable[[dict[str, Any]], None]) -> Path:
    """A copy of the release whose manifest ``edit`` changed, canonical and re-signed with the real key."""
    release = work / pristine.release.name
    shutil.copytree(pristine.release, release)
    value = json.loads((release / MANIFEST_NAME).read_bytes())
    edit(value)
    publish(release, pristine.key, MANIFEST_NAME, canonical_bytes(value))
    return release


def _refusal(release: Path, pristine: Pristine) -> RegistryError:
    with pytest.raises(RegistryError) as caught:
        load_release(release, pristine.trust, CheckpointKeyring.generate())
    return caught.value


def test_a_file_listed_with_another_media_type_is_refused(tmp_path: Path, pristine: Pristine) -> None:
    """Before: an instruction listed as ``application/json`` loaded, and was served to hosts as JSON."""

    def relabel(manifest: dict[str, Any]) -> None:
        (entry,) = [f for f in manifest["files"] if f["path"] == "assets/instructions/desk-research.md"]
        entry["media_type"] = "application/json"

    refusal = _refusal(_published_manifest(tmp_path, pristine, relabel), pristine)
    assert refusal.code is FailureCode.MANIFEST_INVALID, refusal.one_line()
    assert refusal.path == str(tmp_path / pristine.release.name / MANIFEST_NAME)
    assert "lists 'assets/instructions/desk-research.md' as application/json;" in refusal.message


@pytest.mark.parametrize("name", [".env", "assets/.cache/notes.md", "__pycache__/loader.pyc"])
def test_a_hidden_file_signed_into_a_release_is_refused(tmp_path: Path, pristine: Pristine, name: str) -> None:
    """Before: a hidden or __pycache__ file the packager refuses in a source loaded once listed and signed by hand."""
    release = tmp_path / pristine.release.name
    shutil.copytree(pristine.release, release)

    def add(catalogue: Path) -> None:
        (catalogue / name).parent.mkdir(parents=True, exist_ok=True)
        (catalogue / name).write_bytes(b"x")

    resign_release(release, [pristine.key], edit=add)
    refusal = _refusal(release, pristine)
    assert refusal.code is FailureCode.PATH_UNSAFE, refusal.one_line()
    assert refusal.path == str(release / MANIFEST_NAME)
    assert f"lists path {name!r}: hidden files" in refusal.message
