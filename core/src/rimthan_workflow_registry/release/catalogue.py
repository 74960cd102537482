"""Typed catalogue records: the catalogue as the rest of Rimthan sees it.

These frozen dataclasses are what the packager builds from and the engine
runs. They are parsed (closed: an unknown key, a wrong type or a malformed id
is a ``CatalogueError`` naming the file and key) by
:mod:`rimthan_workflow_registry.release.catalogue_parse`; cross-file rules
(references, aliases, reachability) live in
:mod:`rimthan_workflow_registry.release.catalogue_rules`, the tool-schema bounds
on what a catalogue declares in :mod:`rimthan_workflow_registry.release.catalogue_bounds`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, TypeVar

CATALOGUE_FORMAT = 1
WORKSPACE_MANIFEST_ARTIFACT = "workspace-manifest"
ASSET_KINDS = ("prompt", "skill", "subagent")
DELIVERY_KINDS = (*ASSET_KINDS, "adapter")
MEDIA_TYPES = ("application/json", "text/markdown")
WRITE_POLICIES = ("create", "replace", "create_or_replace")
PREDICATE_OPERATORS = ("equals", "one_of")
T = TypeVar("T")

ID_PATTERN = "[a-z0-9][a-z0-9-]{0,63}"
"""A catalogue name, workflow id, alias, profile or adapter id, as a regular expression without anchors.

Python code matches it with ``fullmatch`` (``re``'s ``$`` also takes a trailing newline); the manifest's JSON
Schema anchors it as ``^...$``.
"""
# Matched with fullmatch ("$" would also take "1.0.0\n"); digits are [0-9], not "\d", which takes "1\u0662.0.0"
SEMVER_PATTERN = re.compile(
    r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)"
    r"(?:-((?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?"
)

Scalar = str | int | bool


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class Scope:
    """The catalogue's scope: a migration stays inside one ``name`` and ``profile``."""

    name: str
    profile: str


@dataclass(frozen=True)
class Predicate:
    """``field`` compared against a closed set of scalar ``values``."""

    field: str
    operator: str
    values: tuple[Scalar, ...]

    def matches(self, value: Any) -> bool:
        # bool is an int in Python: compare types too so True never equals 1.
        return any(type(value) is type(v) and value == v for v in self.values)

    def to_json(self) -> dict[str, Any]:
        value: Any = self.values[0] if self.operator == "equals" else list(self.values)
        return {"field": self.field, self.operator: value}


@dataclass(frozen=True)
class Branch:
    """Go to ``target`` when the confirmed state satisfies ``when`` (exactly one branch of a step may match)."""

    target: str
    when: Predicate


@dataclass(frozen=True)
class Question:
    """A choice put to the user: the state field it sets, its prompt and its closed choices."""

    field: str
    prompt: str
    choices: tuple[Scalar, ...]

    def to_json(self) -> dict[str, Any]:
        return {"field": self.field, "prompt": self.prompt, "choices": list(self.choices)}


@dataclass(frozen=True)
class OutputDeclaration:
    """An artifact a step writes: where, its media type, size limit, schema and write policy."""

    id: str
    path: str
    media_type: str
    max_bytes: int
    schema: str | None
    write_policy: str


@dataclass(frozen=True)
class AssetDefinition:
    """A file a workflow ships to the host (prompt, skill or subagent), by id."""

    id: str
    kind: str
    file: str


@dataclass(frozen=True)
class ValidatorDefinition:
    """A semantic validator: its instruction, the subagent that runs it and what it needs."""

    id: str
    version: str
    instruction: str
    subagent: str
    required_capabilities: tuple[str, ...]

    @property
    def key(self) -> str:
        """``id@version``: how steps refer to it and how receipts are keyed."""
        return f"{self.id}@{self.version}"


@dataclass(frozen=True)
class StepDefinition:
    """One step of a workflow: its instruction, outputs, validators, inputs and where it goes next."""

    id: str
    title: str
    instruction: str
    next: str | None
    branches: tuple[Branch, ...]
    question: Question | None
    outputs: tuple[OutputDeclaration, ...]
    validators: tuple[str, ...]
    inputs: tuple[str, ...]
    host_assets: tuple[str, ...]
    max_total_bytes: int | None
    definition: Mapping[str, Any] = field(compare=False, repr=False)
    # confirmed-state fields that must be present before ``continue`` moves this (ungated) step on
    requires_confirmed: tuple[str, ...] = ()

    @property
    def gated(self) -> bool:
        """A gated step only advances through validation, never by ``continue``."""
        return bool(self.outputs or self.validators)

    @property
    def terminal(self) -> bool:
        return self.next is None and not self.branches

    @property
    def targets(self) -> tuple[str, ...]:
        if self.next is not None:
            return (self.next,)
        return tuple(b.target for b in self.branches)

    def output(self, artifact_id: str) -> OutputDeclaration | None:
        return next((o for o in self.outputs if o.id == artifact_id), None)


@dataclass(frozen=True)
class WorkflowDefinition:
    """A workflow: its identity, entry aliases, state schema, assets, validators and steps."""

    id: str
    version: str
    owner: str
    title: str
    summary: str
    entry_aliases: tuple[str, ...]
    confirmed_state_schema: str
    required_capabilities: tuple[str, ...]
    host_adapters: tuple[str, ...]
    assets: tuple[AssetDefinition, ...]
    validators: tuple[ValidatorDefinition, ...]
    steps: tuple[StepDefinition, ...]
    source: str

    @property
    def key(self) -> str:
        return f"{self.id}@{self.version}"

    @property
    def names(self) -> tuple[str, ...]:
        """Every name ``start_workflow`` accepts for this workflow."""
        return (self.id, *self.entry_aliases)

    def step(self, step_id: str) -> StepDefinition | None:
        return self._steps_by_id.get(step_id)

    def asset(self, asset_id: str) -> AssetDefinition | None:
        return next((a for a in self.assets if a.id == asset_id), None)

    def validator(self, key: str) -> ValidatorDefinition | None:
        return self._validators_by_key.get(key)

    # A call looks up its step and validators by id; a long workflow has hundreds of each.
    @cached_property
    def _steps_by_id(self) -> Mapping[str, StepDefinition]:
        return _first_by(self.steps, lambda s: s.id)

    @cached_property
    def _validators_by_key(self) -> Mapping[str, ValidatorDefinition]:
        return _first_by(self.validators, lambda v: v.key)

    def producing_step(self, artifact_id: str) -> StepDefinition | None:
        return next((s for s in self.steps if s.output(artifact_id) is not None), None)


def _first_by(items: tuple[T, ...], key: Callable[[T], str]) -> Mapping[str, T]:
    """``items`` by ``key``, the first of any that share one (what a linear search would find)."""
    index: dict[str, T] = {}
    for item in items:
        index.setdefault(key(item), item)
    return index


@dataclass(frozen=True)
class HostAdapter:
    """How one harness installs assets and reads the tools: its paths and capabilities."""

    id: str
    version: str
    harness: str
    title: str
    instruction: str
    capabilities: tuple[str, ...]
    validator_capabilities: tuple[str, ...]
    paths: Mapping[str, str] = field(compare=False)
    source: str = ""

    @property
    def key(self) -> str:
        return f"{self.id}@{self.version}"

    def install_path(self, kind: str, asset_id: str) -> str:
        """Project-local path where the host reads an asset of ``kind``."""
        return self.paths[kind].replace("{id}", asset_id)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "version": self.version,
            "harness": self.harness,
            "title": self.title,
            "instruction": self.instruction,
            "capabilities": list(self.capabilities),
            "validator_capabilities": list(self.validator_capabilities),
            "paths": dict(sorted(self.paths.items())),
        }


def required_capabilities(workflow: WorkflowDefinition, adapter: HostAdapter | None) -> set[str]:
    """Every capability a host running ``workflow`` with ``adapter`` must have (the workflow's and the adapter's)."""
    return set(workflow.required_capabilities) | set(adapter.capabilities if adapter else ())


def required_validator_capabilities(workflow: WorkflowDefinition, adapter: HostAdapter | None) -> set[str]:
    """Every validator capability a host running ``workflow`` with ``adapter`` must have (its validators' and the
    adapter's)."""
    needed = {c for v in workflow.validators for c in v.required_capabilities}
    return needed | set(adapter.validator_capabilities if adapter else ())


@dataclass(frozen=True)
class Catalogue:
    """A whole catalogue: its identity, scope, workflows and host adapters."""

    name: str
    version: str
    title: str
    description: str
    scope: Scope
    workflows: tuple[WorkflowDefinition, ...]
    host_adapters: tuple[HostAdapter, ...]

    @property
    def release_id(self) -> str:
        return f"{self.name}@{self.version}"

    def adapter(self, key: str) -> HostAdapter | None:
        return next((a for a in self.host_adapters if a.key == key), None)

    def workflow(self, workflow_id: str, version: str) -> WorkflowDefinition | None:
        return next((w for w in self.workflows if w.id == workflow_id and w.version == version), None)


# --------------------------------------------------------------------------- versions


def is_semver(text: str) -> bool:
    return bool(SEMVER_PATTERN.fullmatch(text))


def next_version(text: str) -> str:
    """The least obvious successor of a semantic version, by the one rule (``SEMVER_PATTERN``, ``semver_key``).

    A release bumps its patch (``1.3.0`` -> ``1.3.1``); a pre-release bumps its
    last numeric identifier (``2.0.0-rc.1`` -> ``2.0.0-rc.2``) or, with none,
    gains ``.1`` (``2.0.0-beta`` -> ``2.0.0-beta.1``), staying a pre-release of
    the same version. Build metadata is dropped (it takes no part in precedence).
    Whatever is returned sorts above ``text`` by ``semver_key``.
    """
    match = SEMVER_PATTERN.fullmatch(text)
    if match is None:
        raise ValueError(f"not a semantic version: {text!r}")
    major, minor, patch, pre, _build = match.groups()
    if pre is None:
        return f"{major}.{minor}.{int(patch) + 1}"
    parts = pre.split(".")
    last = max((i for i, part in enumerate(parts) if part.isdigit()), default=None)
    if last is None:
        parts.append("1")
    else:
        parts[last] = str(int(parts[last]) + 1)
        del parts[last + 1 :]  # 1.0.0-rc.1.beta -> 1.0.0-rc.2, not 1.0.0-rc.2.beta
    return f"{major}.{minor}.{patch}-{'.'.join(parts)}"


def semver_key(text: str) -> tuple[Any, ...]:
    """Sort key implementing semantic-version precedence (SemVer 2.0.0 section 11).

    ``1.10.0 > 1.9.0``; a pre-release sorts below its release; numeric
    pre-release identifiers sort numerically and below alphanumeric ones.
    """
    match = SEMVER_PATTERN.fullmatch(text)
    if match is None:
        raise ValueError(f"not a semantic version: {text!r}")
    major, minor, patch, pre, _build = match.groups()
    if pre is None:
        pre_key: tuple[Any, ...] = (1,)
    else:
        parts = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split("."))
        pre_key = (0, parts)
    return (int(major), int(minor), int(patch), pre_key)
