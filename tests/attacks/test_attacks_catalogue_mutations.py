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

import datetime
import json
import os
import shutil
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rimthan_host.protocol import HarnessError
from rimthan_workflow_registry.errors import FailureCode, RegistryError, WorkflowProtocolError
from rimthan_workflow_registry.release.trust import load_trust
from rimthan_workflow_registry.release.verify import verify_release
from rimthan_workflow_registry.run.tokens import CheckpointKeyring
from support.engines import Engines, TickingClock, drive
from support.releases import KeyPair, build_release, make_keypair, packaged_source, trust_dir

SLICE = 80
MUTATIONS = int(os.environ.get("RIMTHAN_FUZZ_CATALOGUE_MUTATIONS", "1000"))
VERSION = "1.2.0"
ROUTES = ("desk-research", "user-interviews", "experiment")
SOURCE = packaged_source(VERSION)
FILES = sorted(
    str(p.relative_to(SOURCE))
    for p in SOURCE.rglob("*")
    if p.suffix in (".toml", ".json") and p.is_file() and "examples" not in p.parts
)
_TOO_LONG = 424242424242  # written in its place: an integer of 5,000 digits, which no serialiser here writes
ODD_VALUES: list[Any] = [
    _TOO_LONG,
    2**53,
    -(2**63),
    float("inf"),
    float("nan"),
    1.5,
    -0.0,
    True,
    0,
    -1,
    "",
    "\x00",
    "a\nb",
    "\u202e",
    "../outside",
    "/absolute",
    "x" * 5000,
    "x" * 300,
    "research/\u00e9\u0301.json",
    "\U0001f600",
    "desk-research",
    "{id}",
    "#/$defs/nowhere",
    "https://example.com/x.json",
    [],
    {},
    [1, [2]],
    {"a": {"b": {}}},
    ["x", "x"],
    datetime.datetime(1979, 5, 27, 7, 32),
    datetime.date(2026, 12, 5),
    datetime.time(1, 2),
]


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path to a value inside ``value`` (containers included), the root excluded."""
    if path:
        yield path
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _leaves(child, (*path, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _leaves(child, (*path, index))


def _mutated_text(rel: str, path_index: int, value_index: int, same_type: bool) -> str | None:
    """The file ``rel`` with one value replaced (``None`` where the value has no form in that file type).

    With ``same_type``, the new value has the old one's type where one of
    :data:`ODD_VALUES` does: such a catalogue gets past the type checks more
    often, so its release is built and run.
    """
    text = (SOURCE / rel).read_text("utf-8")
    document = tomllib.loads(text) if rel.endswith(".toml") else json.loads(text)
    paths = list(_leaves(document))
    target = paths[path_index % len(paths)]
    holder = document
    for step in target[:-1]:
        holder = holder[step]
    alike = [v for v in ODD_VALUES if type(v) is type(holder[target[-1]])] if same_type else []
    candidates = alike or ODD_VALUES
    value = candidates[value_index % len(candidates)]
    holder[target[-1]] = value
    try:
        written = tomli_w.dumps(document) if rel.endswith(".toml") else json.dumps(document, default=str)
    except (TypeError, ValueError):  # JSON has no NaN; tomli_w writes no lone surrogate
        return None
    return written.replace(str(_TOO_LONG), "9" * 5000)


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
    key, trust = keys
    try:
        release = verify_release(build_release(source, work / "releases", [key]), load_trust(trust))
    except RegistryError as exc:
        assert exc.code is not FailureCode.INTERNAL_ERROR and exc.path, exc.one_line()
        return
    engines = Engines({VERSION: release}, CheckpointKeyring.generate(), work, TickingClock())
    try:
        drive(engines, VERSION, route, name="mutated")
    except WorkflowProtocolError as exc:  # the engine's answer to the scripted user (the server sends it as a result)
        assert exc.code is not FailureCode.INTERNAL_ERROR, exc.one_line()
    except HarnessError as exc:  # the scripted user stops where the changed catalogue asks what it cannot answer
        assert FailureCode.INTERNAL_ERROR.value not in str(exc), str(exc)


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
