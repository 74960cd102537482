"""Every file the host writes for one run is a file of its own.

A run writes every step's outputs and, at ``setup-workspace``, every asset it
delivers and the adapter's own instruction at the bound adapter's install
paths (``{id}`` replaced by the asset or adapter id). Two of these at one path
overwrite each other (the workspace manifest then lists the path twice with
two digests); one under another's file path can be written on no file system.
:func:`check_write_paths` refuses both at build and load, for each pinned
adapter, naming both paths and where they come from: each clash a failure of
its own (one between two outputs is said once, whatever the adapters).
"""

from __future__ import annotations

from collections.abc import Iterator

from rimthan_workflow_registry.errors import CatalogueError, FailureCode, collected
from rimthan_workflow_registry.protocol_names import SETUP_STEP_ID
from rimthan_workflow_registry.release.catalogue import Catalogue, HostAdapter, WorkflowDefinition

Write = tuple[str, str]
"""A path the host writes and what writes it (``step desk-research output findings``)."""


def check_write_paths(catalogue: Catalogue, workflow: WorkflowDefinition) -> None:
    """No two paths a run of ``workflow`` writes are one file (case aside), and none lies inside another.

    Case is folded as a case-insensitive file system (macOS, Windows) folds
    it. The same asset listed twice is one write, not two.
    """
    clashes: dict[str, None] = {}
    for key in workflow.host_adapters:
        adapter = catalogue.adapter(key)
        assert adapter is not None  # check_host_adapters resolved every pin
        clashes.update(dict.fromkeys(_clashes([*_output_writes(workflow), *_install_writes(workflow, adapter)])))
    if clashes:
        raise collected([_clash(workflow, problem) for problem in clashes])


def _output_writes(workflow: WorkflowDefinition) -> Iterator[Write]:
    for step in workflow.steps:
        for output in step.outputs:
            yield output.path, f"step {step.id} output {output.id}"


def _install_writes(workflow: WorkflowDefinition, adapter: HostAdapter) -> Iterator[Write]:
    setup = workflow.step(SETUP_STEP_ID)
    delivered = dict.fromkeys(setup.host_assets if setup is not None else ())
    for asset_id in delivered:
        asset = workflow.asset(asset_id)
        assert asset is not None  # check_workflow_references resolved every delivered asset
        yield adapter.install_path(asset.kind, asset.id), f"{asset.kind} asset {asset.id} (adapter {adapter.key})"
    yield adapter.install_path("adapter", adapter.id), f"adapter {adapter.key}'s instruction"


def _clashes(writes: list[Write]) -> Iterator[str]:
    """Each pair of ``writes`` at one path, then each write inside another's file, in the order written."""
    seen: dict[str, Write] = {}
    for path, origin in writes:
        other = seen.setdefault(path.casefold(), (path, origin))
        if other[1] != origin:
            yield f"{other[1]} writes {other[0]!r} and {origin} writes {path!r}: one would overwrite the other"
    for folded, (path, origin) in seen.items():
        segments = folded.split("/")
        for depth in range(1, len(segments)):
            parent = seen.get("/".join(segments[:depth]))
            if parent is not None:
                yield f"{origin} writes {path!r} inside {parent[0]!r}, which {parent[1]} writes as a file"


def _clash(workflow: WorkflowDefinition, problem: str) -> CatalogueError:
    return CatalogueError(
        FailureCode.CATALOGUE_INVALID,
        f"workflow {workflow.key}: {problem}; give each file the host writes a path of its own",
        path=workflow.source,
    )
