"""The dataclasses a build only carries values in are made without ``__eq__``, ``__hash__`` or ``__repr__``.

Python writes and compiles each method a dataclass generates when its module is imported: for a frozen
dataclass, ``__init__``, ``__repr__``, ``__eq__``, ``__hash__``, ``__setattr__`` and ``__delattr__``. Every
``rimthan-pack build`` imports the classes below, and nothing compares, hashes or shows one of them, so they
are made with ``eq=False, repr=False`` (1.1-1.3 M instructions each, measured under callgrind): frozen still,
compared by identity. A type whose value is compared or shown keeps both, as the manifest's identity types
do (a manifest that differs from its catalogue is refused with both values in the message). A type compared
(a verified release's equality compares its schemas and files) but never shown keeps ``__eq__`` and has no
``__repr__``: a loaded catalogue, its schema set, a release's files (a verified release's repr leaves the last
two out).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from rimthan_packager.build import BuildResult, CheckedSource
from rimthan_packager.signing import SigningKey
from rimthan_packager.source import SourceFiles
from rimthan_packager.staging import Copied
from rimthan_workflow_registry.release.format import HostAdapterEntry, ReleaseIdentity, WorkflowEntry
from rimthan_workflow_registry.release.loader import LoadedCatalogue, SchemaSet
from rimthan_workflow_registry.release.tree_walk import ReleaseTree
from rimthan_workflow_registry.release.verified import ReleaseFiles
from rimthan_workflow_registry.run.example_layout import WorkflowExamples
from support.pack_probe import pack_probe
from support.releases import KeyPair, packaged_source

CARRIERS = (SigningKey, SourceFiles, Copied, BuildResult, CheckedSource, ReleaseTree, WorkflowExamples)
COMPARED_AND_SHOWN = (ReleaseIdentity, WorkflowEntry, HostAdapterEntry)
COMPARED_NEVER_SHOWN = (LoadedCatalogue, SchemaSet, ReleaseFiles)

# Wraps each carrier's __eq__, __hash__ and __repr__ in the probe's process: a call is recorded, then answered.
_WATCH = """
from rimthan_packager.build import BuildResult, CheckedSource
from rimthan_packager.signing import SigningKey
from rimthan_packager.source import SourceFiles
from rimthan_packager.staging import Copied
from rimthan_workflow_registry.release.tree_walk import ReleaseTree
from rimthan_workflow_registry.run.example_layout import WorkflowExamples
report["touched"] = []
def _watch(cls, name):
    method = getattr(cls, name)
    def watched(self, *args):
        report["touched"].append(cls.__name__ + "." + name)
        return method(self, *args)
    setattr(cls, name, watched)
for cls in (SigningKey, SourceFiles, Copied, BuildResult, CheckedSource, ReleaseTree, WorkflowExamples):
    for name in ("__eq__", "__hash__", "__repr__"):
        _watch(cls, name)
"""


@pytest.mark.parametrize("cls", CARRIERS, ids=lambda cls: cls.__name__)
def test_a_carrier_generates_no_eq_hash_or_repr_and_stays_frozen(cls: type) -> None:
    assert dataclasses.is_dataclass(cls)
    params = cls.__dataclass_params__  # type: ignore[attr-defined]
    assert params.frozen and not params.eq and not params.repr
    assert not {"__eq__", "__hash__", "__repr__"} & set(vars(cls)), "a generated method is back"
    assert {"__setattr__", "__delattr__"} <= set(vars(cls))


@pytest.mark.parametrize("cls", COMPARED_AND_SHOWN, ids=lambda cls: cls.__name__)
def test_a_type_compared_and_shown_keeps_eq_and_repr(cls: type) -> None:
    assert {"__eq__", "__hash__", "__repr__"} <= set(vars(cls))


@pytest.mark.parametrize("cls", COMPARED_NEVER_SHOWN, ids=lambda cls: cls.__name__)
def test_a_type_compared_but_never_shown_keeps_eq_and_generates_no_repr(cls: type) -> None:
    params = cls.__dataclass_params__  # type: ignore[attr-defined]
    assert params.frozen and params.eq and not params.repr
    assert {"__eq__", "__hash__", "__setattr__", "__delattr__"} <= set(vars(cls))
    assert "__repr__" not in vars(cls), "a generated __repr__ is back"


def test_a_build_never_compares_hashes_or_shows_a_carrier(tmp_path: Path, keypair: KeyPair) -> None:
    out = tmp_path / "releases"
    run = pack_probe("build", packaged_source("1.2.0"), "--key", keypair.private_path, "--out", out, prelude=_WATCH)
    assert run.code == 0, run.stderr
    assert (out / "research-decision-1.2.0" / "manifest.json").is_file()
    assert run.report["touched"] == []
