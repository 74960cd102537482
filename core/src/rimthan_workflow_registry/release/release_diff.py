"""What changed from one release of a catalogue to another, by their signed manifests (``inspect --against``).

Files are compared by path and SHA-256; workflows by ``id``: a version
changed, or kept while a file it names changed (its runs could not migrate:
``migration_not_newer``), added or dropped (``workflow_not_found`` for runs
of it). Plain Python over two manifests and the newer catalogue.

:func:`changed_workflow_files` is the one reading of what a workflow's files
were in an older release: ``inspect --against`` asks it of two manifests,
``check --releases-dir`` and ``build`` (the packager's ``kept_versions``) of
an older release's manifest and the source's bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from rimthan_workflow_registry.release.catalogue import Catalogue, WorkflowDefinition
from rimthan_workflow_registry.release.format import Manifest


@dataclass(frozen=True)
class WorkflowChange:
    """One workflow id in either release: its version in each (``None`` where it is absent), and whether a file it
    names in the newer release changed while it kept its version."""

    id: str
    before: str | None
    after: str | None
    changed_files: tuple[str, ...] = ()

    @property
    def kept_but_changed(self) -> bool:
        return self.before == self.after and bool(self.changed_files)


@dataclass(frozen=True)
class ReleaseDiff:
    """From the older release (``against``) to the newer: files added, removed and changed, and each workflow whose
    version or files differ."""

    against: str  # the older release's id
    against_digest: str
    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[str, ...]
    workflows: tuple[WorkflowChange, ...]


def diff_releases(old: Manifest, old_digest: str, new: Manifest, catalogue: Catalogue) -> ReleaseDiff:
    """``new`` (whose catalogue is ``catalogue``) against ``old``."""
    before, after = file_digests(old), file_digests(new)
    changed = tuple(sorted(p for p in after.keys() & before.keys() if after[p] != before[p]))
    return ReleaseDiff(
        against=old.release.id,
        against_digest=old_digest,
        added=tuple(sorted(after.keys() - before.keys())),
        removed=tuple(sorted(before.keys() - after.keys())),
        changed=changed,
        workflows=_workflow_changes(old, catalogue, before, after),
    )


def _workflow_changes(
    old: Manifest, catalogue: Catalogue, before: Mapping[str, str], after: Mapping[str, str]
) -> tuple[WorkflowChange, ...]:
    versions = {w.id: w.version for w in old.workflows}
    found = []
    for workflow in catalogue.workflows:
        files = changed_workflow_files(workflow, before, after.get)
        change = WorkflowChange(workflow.id, versions.pop(workflow.id, None), workflow.version, files)
        if change.before != change.after or change.kept_but_changed:
            found.append(change)
    found += [WorkflowChange(wid, version, None) for wid, version in sorted(versions.items())]
    return tuple(found)


def workflow_files(workflow: WorkflowDefinition) -> list[str]:
    """Every file ``workflow`` names, once each: its TOML, schemas, instructions, assets, validator instructions."""
    paths = [workflow.source, workflow.confirmed_state_schema]
    paths += [a.file for a in workflow.assets] + [v.instruction for v in workflow.validators]
    for step in workflow.steps:
        paths += [step.instruction] + [o.schema for o in step.outputs if o.schema is not None]
    return list(dict.fromkeys(paths))


def changed_workflow_files(
    workflow: WorkflowDefinition, older: Mapping[str, str], digest_of: Callable[[str], str | None]
) -> tuple[str, ...]:
    """The files ``workflow`` names (:func:`workflow_files`) whose SHA-256 now (``digest_of(path)``) is not the one
    an older release lists for that path (``older``: :func:`file_digests` of its manifest), or that it lacks."""
    return tuple(p for p in workflow_files(workflow) if older.get(p) != digest_of(p))


def file_digests(manifest: Manifest) -> dict[str, str]:
    """Each file a manifest lists, by path: its SHA-256 (hex)."""
    return {f.path: f.sha256 for f in manifest.files}
