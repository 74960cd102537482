"""Catalogue rules on what a catalogue names: the host adapters (their install paths, the ones each workflow
pins) and, within a workflow, its steps, assets, validators, artifacts and output paths.

Each problem is a failure of its own, with its code and file, said in the order the catalogue lists what it is
about (adapters, then workflows; within a workflow its ids, validators, then steps): an author who misnamed
three steps sees three failures in one build, not one a build. ``ReleaseLoader._validate_workflow_catalogue``
runs these with the other rules of :mod:`catalogue_rules`, at build time and load time alike.
"""

from __future__ import annotations

from collections.abc import Iterator

from rimthan_workflow_registry.errors import CatalogueError, FailureCode, RegistryError, collected
from rimthan_workflow_registry.protocol_names import SETUP_STEP_ID
from rimthan_workflow_registry.release.catalogue import Catalogue, HostAdapter, StepDefinition, WorkflowDefinition
from rimthan_workflow_registry.release.catalogue_rules import one_of, project_path_problem, unresolved
from rimthan_workflow_registry.release.format import CATALOGUE_MANIFEST_NAME


def check_host_adapters(catalogue: Catalogue) -> None:
    """Adapters are unique, their install paths project-local, and pinned ones exist, one per harness."""
    failures = list(_adapter_problems(catalogue))
    for workflow in catalogue.workflows:
        failures += _pin_problems(workflow, catalogue)
    if failures:
        raise collected(failures)


def _adapter_problems(catalogue: Catalogue) -> Iterator[RegistryError]:
    keys = [a.key for a in catalogue.host_adapters]
    for key in sorted({k for k in keys if keys.count(k) > 1}):
        yield CatalogueError(
            FailureCode.CATALOGUE_INVALID, f"host adapter {key} is defined twice", path=CATALOGUE_MANIFEST_NAME
        )
    for adapter in catalogue.host_adapters:
        yield from _adapter_path_problems(adapter)


def _adapter_path_problems(adapter: HostAdapter) -> Iterator[RegistryError]:
    for kind, template in adapter.paths.items():
        problem = project_path_problem(template.replace("{id}", "x"))
        if "{id}" not in template or problem is not None:
            yield CatalogueError(
                FailureCode.CATALOGUE_INVALID,
                f"paths.{kind} = {template!r} must be a project-local path containing {{id}} ({problem or 'no {id}'})",
                path=adapter.source,
            )


def _pin_problems(workflow: WorkflowDefinition, catalogue: Catalogue) -> Iterator[RegistryError]:
    """Each adapter ``workflow`` pins exists (it pins one at least), and no two are of one harness.

    A run's host binding names a harness and an adapter version, never an adapter id: two pinned adapters of
    one harness could not be told apart, and the run would be bound to whichever comes first.
    """
    if not workflow.host_adapters:
        adapters = one_of(a.key for a in catalogue.host_adapters)
        fix = f"in {workflow.source}, list in host_adapters the adapter(s) it runs with (this catalogue's: {adapters})"
        yield unresolved(workflow.source, f"workflow {workflow.key} pins no host adapter", fix=fix)
    pinned: dict[str, str] = {}
    for key in workflow.host_adapters:
        adapter = catalogue.adapter(key)
        if adapter is None:
            known = [a.key for a in catalogue.host_adapters]
            fix = (
                f"in {workflow.source}, pin one of this catalogue's adapters ({one_of(known)}) instead of {key!r}, "
                f"or add adapter {key!r} (its TOML in catalogue.toml's host_adapters)"
            )
            message = f"workflow {workflow.key} pins unknown host adapter {key!r}"
            yield unresolved(workflow.source, message, key, known, fix=fix)
            continue
        other = pinned.setdefault(adapter.harness, key)
        if other != key:
            yield CatalogueError(
                FailureCode.CATALOGUE_INVALID,
                f"workflow {workflow.key} pins host adapters {other} and {key} of one harness "
                f"{adapter.harness!r}; a run binds a harness, so pin one adapter per harness",
                path=workflow.source,
            )


def check_workflow_references(workflow: WorkflowDefinition) -> None:
    """Steps, assets, validators and artifacts are unique and every reference resolves."""
    where = workflow.source
    assets = [a.id for a in workflow.assets]
    failures: list[RegistryError] = [
        CatalogueError(
            FailureCode.CATALOGUE_INVALID,
            f"{what} id(s) defined twice: {', '.join(dupes)}",
            path=where,
            next_step=f"in {where}, give each {what} an id of its own (or remove the copy)",
        )
        for what, ids in (
            ("step", [s.id for s in workflow.steps]),
            ("asset", assets),
            ("validator", [v.key for v in workflow.validators]),
            ("artifact", [o.id for s in workflow.steps for o in s.outputs]),
        )
        if (dupes := sorted({i for i in ids if ids.count(i) > 1}))
    ]
    for validator in workflow.validators:
        asset = workflow.asset(validator.subagent)
        if assets.count(validator.subagent) > 1:
            continue  # which of the two it runs as is the duplicate's, said above
        if asset is None or asset.kind != "subagent":
            subagents = one_of(a.id for a in workflow.assets if a.kind == "subagent")
            fix = (
                f"in {where}, set validator {validator.key}'s subagent to one of this workflow's subagent assets "
                f'({subagents}), or add an asset {validator.subagent!r} of kind "subagent" to its assets'
            )
            message = f"validator {validator.key} runs as unknown subagent asset {validator.subagent!r}"
            failures.append(unresolved(where, message, fix=fix))
    for step in workflow.steps:
        failures += _step_problems(workflow, step)
    if failures:
        raise collected(failures)


def _step_problems(workflow: WorkflowDefinition, step: StepDefinition) -> Iterator[RegistryError]:
    """What ``step`` names that resolves to nothing, each output path outside the project, host assets off setup."""
    where = workflow.source
    for target in step.targets:
        if workflow.step(target) is None:
            steps = [s.id for s in workflow.steps]
            fix = f"in {where}, point step {step.id} at one of its steps ({one_of(steps)}), or add a step {target!r}"
            yield unresolved(where, f"step {step.id} leads to unknown step {target!r}", target, steps, fix=fix)
    for key in step.validators:
        if workflow.validator(key) is None:
            validators = [v.key for v in workflow.validators]
            fix = (
                f"in {where}, name one of its [[validators]] in step {step.id} ({one_of(validators)}), or add a "
                f"[[validators]] table for {key!r}"
            )
            yield unresolved(where, f"step {step.id} names unknown validator {key!r}", key, validators, fix=fix)
    for asset_id in step.host_assets:
        if workflow.asset(asset_id) is None:
            assets = [a.id for a in workflow.assets]
            fix = (
                f"in {where}, deliver one of its assets in step {step.id}'s host_assets ({one_of(assets)}), or add "
                f"an asset {asset_id!r} to its assets"
            )
            yield unresolved(where, f"step {step.id} delivers unknown asset {asset_id!r}", asset_id, assets, fix=fix)
    for artifact_id in step.inputs:
        producer = workflow.producing_step(artifact_id)
        if producer is None or producer.id == step.id:
            others = [o.id for s in workflow.steps if s.id != step.id for o in s.outputs]
            message = f"step {step.id} reads artifact {artifact_id!r} no earlier step produces"
            fix = (
                f"in {where}, add an output {artifact_id!r} to a step before {step.id}, or remove it from step "
                f"{step.id}'s inputs"
            )
            yield unresolved(where, message, artifact_id, others, fix=fix)
    for output in step.outputs:
        problem = project_path_problem(output.path)
        if problem is not None:
            yield CatalogueError(
                FailureCode.CATALOGUE_INVALID,
                f"output {output.id} path {output.path!r} is not a project-local path: {problem}",
                path=where,
            )
    if step.host_assets and step.id != SETUP_STEP_ID:
        yield CatalogueError(
            FailureCode.CATALOGUE_INVALID, f"step {step.id}: only setup-workspace delivers host assets", path=where
        )
