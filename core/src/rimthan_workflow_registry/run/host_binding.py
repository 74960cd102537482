"""Which host adapter a harness binds to, and what keeps it from running a workflow.

A workflow pins compatible adapters by ``id@version``; a harness binds to one
of them and must offer every capability the workflow, the adapter and the
workflow's validators require. Blockers are accumulated so the harness learns
everything missing at once; ``binding_drift`` holds a host at a later step to
the binding its run started with.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rimthan_workflow_registry.errors import FailureCode
from rimthan_workflow_registry.failures import Failure
from rimthan_workflow_registry.release.catalogue import (
    Catalogue,
    HostAdapter,
    StepDefinition,
    WorkflowDefinition,
    required_capabilities,
    required_validator_capabilities,
)
from rimthan_workflow_registry.run.checkpoints import HostBinding


def _pinned_adapter(
    catalogue: Catalogue, workflow: WorkflowDefinition, harness: str, adapter_id: str | None, version: str
) -> HostAdapter | None:
    """The pinned adapter for this harness (by id when given, else by harness) at ``version``."""
    for key in workflow.host_adapters:
        adapter = catalogue.adapter(key)
        if (
            adapter is not None
            and adapter.harness == harness
            and adapter.version == version
            and (adapter_id is None or adapter.id == adapter_id)
        ):
            return adapter
    return None


def harness_adapter(catalogue: Catalogue, workflow: WorkflowDefinition, harness: str) -> HostAdapter | None:
    """The adapter ``workflow`` pins for ``harness``, whatever its version (a catalogue pins one per harness):
    what a host of that harness runs the workflow with."""
    for key in workflow.host_adapters:
        adapter = catalogue.adapter(key)
        if adapter is not None and adapter.harness == harness:
            return adapter
    return None


def host_blockers(
    catalogue: Catalogue, workflow: WorkflowDefinition, host: Mapping[str, Any]
) -> tuple[HostAdapter | None, list[Failure]]:
    """The adapter ``host`` binds to, and every reason it cannot run ``workflow``."""
    adapter = _pinned_adapter(catalogue, workflow, host["harness"], host["adapter"]["id"], host["adapter"]["version"])
    failures: list[Failure] = []
    if adapter is None:
        pinned = ", ".join(workflow.host_adapters)
        failures.append(
            Failure(
                FailureCode.HOST_ADAPTER_INCOMPATIBLE,
                f"harness {host['harness']!r} with adapter {host['adapter']['id']}@{host['adapter']['version']} is not "
                f"pinned by {workflow.key} (pinned: {pinned})",
                details={"pinned": list(workflow.host_adapters)},
            )
        )
    lacks = (
        (
            FailureCode.HOST_CAPABILITY_MISSING,
            "capabilities",
            required_capabilities(workflow, adapter) - set(host["capabilities"]),
            f" required by {workflow.key}",
        ),
        (
            FailureCode.VALIDATOR_CAPABILITY_MISSING,
            "validator capabilities",
            required_validator_capabilities(workflow, adapter) - set(host["validator_capabilities"]),
            "",
        ),
    )
    for code, noun, lacking, suffix in lacks:
        if lacking:
            missing = sorted(lacking)
            failures.append(Failure(code, f"the host lacks {noun} {missing}{suffix}", details={"missing": missing}))
    return adapter, failures


def binding_for(host: Mapping[str, Any]) -> HostBinding:
    return HostBinding.of(
        host["harness"], host["adapter"]["version"], host["capabilities"], host["validator_capabilities"]
    )


def bound_adapter(catalogue: Catalogue, workflow: WorkflowDefinition, binding: HostBinding) -> HostAdapter | None:
    """The adapter a checkpoint's host binding refers to (the binding holds no adapter id)."""
    return _pinned_adapter(catalogue, workflow, binding.harness, None, binding.adapter_version)


def binding_drift(
    workflow: WorkflowDefinition,
    step: StepDefinition,
    bound: HostBinding,
    adapter: HostAdapter,
    host: Mapping[str, Any],
) -> list[Failure]:
    """Every way ``host``, presenting itself at ``step``, differs from the binding its run started with.

    The binding holds every field compared: harness, adapter version,
    capabilities and validator capabilities; ``adapter`` is the pinned adapter
    it resolves to (:func:`bound_adapter`), whose id the host must name too.
    """
    binding = binding_for(host)
    failures = []
    if (binding.harness, host["adapter"]["id"], binding.adapter_version) != (
        bound.harness,
        adapter.id,
        bound.adapter_version,
    ):
        failures.append(
            Failure(FailureCode.HOST_MISMATCH, f"this run is bound to {bound.harness} with adapter {adapter.key}")
        )
    if binding.capabilities != bound.capabilities:
        failures.append(
            Failure(
                FailureCode.HOST_MISMATCH,
                "host capabilities differ from those bound at start",
                details={"bound": list(bound.capabilities)},
            )
        )
    if binding.validator_capabilities != bound.validator_capabilities:
        failures.append(
            Failure(
                FailureCode.VALIDATOR_CAPABILITIES_MISMATCH,
                "validator capabilities differ from those bound at start",
                details={"bound": list(bound.validator_capabilities)},
            )
        )
    validators = (workflow.validator(key) for key in step.validators)
    needed = {c for validator in validators if validator is not None for c in validator.required_capabilities}
    missing = sorted(needed - set(binding.validator_capabilities))
    if missing:
        failures.append(
            Failure(
                FailureCode.VALIDATOR_CAPABILITY_MISSING,
                f"step {step.id} validators need capabilities {missing}",
                details={"missing": missing},
            )
        )
    return failures
