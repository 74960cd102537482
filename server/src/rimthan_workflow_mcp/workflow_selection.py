"""The workflow ``start_workflow`` names: by id or alias, the exact version or the newest.

Plain Python over the core (no MCP imports). A refusal names every workflow
the release has, so a client learns the ids, aliases and versions it may start.
"""

from __future__ import annotations

from rimthan_workflow_registry.errors import FailureCode, WorkflowProtocolError
from rimthan_workflow_registry.release import VerifiedRelease, WorkflowDefinition, semver_key
from rimthan_workflow_registry.run import available_workflows, describe_available
from rimthan_workflow_registry.workflow_engine import newest_version


def select_workflow(release: VerifiedRelease, name: str, version: str | None) -> WorkflowDefinition:
    """By id or alias; the exact version if given, else the newest for that owner."""
    candidates = [w for w in release.catalogue.workflows if name in w.names]
    identities = sorted({(w.owner, w.id) for w in candidates})
    if not candidates:
        raise workflow_not_found(release, f"no workflow or alias {name!r} in release {release.release_id}")
    if len(identities) > 1:
        raise workflow_not_found(release, f"{name!r} names several workflows {identities}; start it by workflow id")
    if version is not None:
        exact = [w for w in candidates if w.version == version]
        if not exact:
            versions = sorted((w.version for w in candidates), key=semver_key)
            raise workflow_not_found(release, f"{name!r} has no version {version} here (available: {versions})")
        return exact[0]
    newest = newest_version(candidates)
    assert newest is not None
    return newest


def workflow_not_found(release: VerifiedRelease, reason: str) -> WorkflowProtocolError:
    """The refusal names every workflow the release has (ids, aliases, versions)."""
    available = available_workflows(release.catalogue.workflows)
    return WorkflowProtocolError(
        FailureCode.WORKFLOW_NOT_FOUND,
        f"{reason}; available: {describe_available(available)}",
        details={"available": available},
    )
