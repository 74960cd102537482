"""Catalogue sources mutated one value at a time: refused with a code at build, or they run; never a crash.

A release engineer's catalogue is input the packager has never seen, and a
signed release is only as sound as what its rules let through. Hypothesis
takes the packaged 1.2.0 source, replaces one value of one TOML or JSON
Schema file with something a hand or a script might write (an integer past
2^53 - 1 or of 5,000 digits, ``inf``, ``nan``, a TOML date, a table, an empty
list, control characters, a path that escapes), builds it with the real
packager and, if it builds, verifies it and drives a whole run through the
engine. Each mutation must end one of two ways:

- refused at build or load: a ``RegistryError`` with a code from the closed
  list (never ``internal_error``) naming a file;
- a release that serves: the run completes, or stops on a protocol answer
  (a blocked step, a branch no choice meets), never ``internal_error``.

Anything else (a ``ValueError`` from a parser, an RFC 8785 error at
``start_workflow``) fails the test. Before this suite a TOML integer of 5,000
digits and ``one_of = 3`` were tracebacks, and an integer past 2^53 - 1 or an
``inf`` choice built, verified, then failed every start.

``make test`` runs ``SLICE`` mutations; ``make fuzz-long`` runs
``RIMTHAN_FUZZ_CATALOGUE_MUTATIONS`` (1,000 by default).
"""

from __future__ import annotations

import json
import os
import shutil
import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rimthan_workflow_registry.errors import RegistryError
from rimthan_workflow_registry.release.trust import load_trust
from rimthan_workflow_registry.release.verify import verify_release
from support.mutations import (
    ODD_VALUES,
    ROUTES,
    VERSION,
    dumped,
    mutated,
    refused_with_a_code,
    run_to_a_protocol_answer,
)
from support.releases import KeyPair, build_release, make_keypair, packaged_source, trust_dir

SLICE = 80
MUTATIONS = int(os.environ.get("RIMTHAN_FUZZ_CATALOGUE_MUTATIONS", "1000"))
SOURCE = packaged_source(VERSION)
FILES = sorted(
    str(p.relative_to(SOURCE))
    for p in SOURCE.rglob("*")
    if p.suffix in (".toml", ".json") and p.is_file() and "examples" not in p.parts
)


def _mutated_text(rel: str, path_index: int, value_index: int, same_type: bool) -> str | None:
    """The file ``rel`` with one value replaced (``None`` where the value has no form in that file type)."""
    text = (SOURCE / rel).read_text("utf-8")
    document = tomllib.loads(text) if rel.endswith(".toml") else json.loads(text)
    return dumped(rel, mutated(document, path_index, value_index, same_type)[1])


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> tuple[KeyPair, Path]:
    root = tmp_path_factory.mktemp("mutation-keys")
    key = make_keypair(root / "keys", "release-engineer")
    return key, trust_dir(root / "trust", key)


def _build_and_run(work: Path, keys: tuple[KeyPair, Path], rel: str, text: str, route: str) -> None:
    """Build the mutated source and, if it builds, run it: any exception but a coded refusal fails the test."""
    shutil.rmtree(work, ignore_errors=True)
    source = work / "source"
    shutil.copytree(SOURCE, source)
    (source / rel).write_text(text, "utf-8")
    key, trust_path = keys
    trust = load_trust(trust_path)
    try:
        release = verify_release(build_release(source, work / "releases", [key]), trust)
    except RegistryError as exc:
        refused_with_a_code(exc)
        return
    run_to_a_protocol_answer(release, trust, work, route)


Mutation = tuple[str, int, int, bool, str]  # file, which value (mod their count), which odd value, same type, route


def _mutation() -> st.SearchStrategy[Mutation]:
    return st.tuples(
        st.sampled_from(FILES),
        st.integers(0, 10_000),
        st.integers(0, len(ODD_VALUES) - 1),
        st.booleans(),
        st.sampled_from(ROUTES),
    )


def _check(tmp_path: Path, keys: tuple[KeyPair, Path], mutation: Mutation) -> None:
    rel, path_index, value_index, same_type, route = mutation
    text = _mutated_text(rel, path_index, value_index, same_type)
    if text is not None:
        _build_and_run(tmp_path / "case", keys, rel, text, route)


@settings(max_examples=SLICE, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutation=_mutation())
def test_a_mutated_catalogue_is_refused_with_a_code_or_runs(
    tmp_path: Path, keys: tuple[KeyPair, Path], mutation: Mutation
) -> None:
    _check(tmp_path, keys, mutation)


@pytest.mark.long
@settings(max_examples=MUTATIONS, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutation=_mutation())
def test_long_a_mutated_catalogue_is_refused_with_a_code_or_runs(
    tmp_path: Path, keys: tuple[KeyPair, Path], mutation: Mutation
) -> None:
    _check(tmp_path, keys, mutation)
