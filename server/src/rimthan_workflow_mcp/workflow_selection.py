"""The workflow ``start_workflow`` names: by id or alias, the exact version or the newest; and, with several
catalogues served, the active release whose catalogue has it.

Plain Python over the core (no MCP imports). A refusal names every workflow
the release has, so a client learns the ids, aliases and versions it may start.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from rimthan_workflow_registry.errors import FailureCode, RegistryError, WorkflowProtocolError
from rimthan_workflow_registry.release import VerifiedRelease, WorkflowDefinition, semver_key
from rimthan_workflow_registry.run import available_suffix, available_workflows
from rimthan_workflow_registry.workflow_engine import newest_version

if TYPE_CHECKING:
    from .loading import LoadedRelease


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
        f"{reason}{available_suffix(available)}",
        details={"available": available},
    )


def served_release_for(actives: Mapping[str, LoadedRelease], name: object) -> LoadedRelease:
    """The active release (of ``actives``, by catalogue) whose catalogue has a workflow (or alias) called ``name``.

    With one catalogue served that is its active release (which refuses an
    unknown name itself); with several, a name no catalogue or several
    catalogues define is refused here, naming what is served (``details.available``: each served workflow,
    with its release).
    """
    served = list(actives.values())
    if len(served) == 1:
        return served[0]
    matches = [a for a in served if any(name in w.names for w in a.release.catalogue.workflows)]
    if len(matches) == 1:
        return matches[0]
    ids = ", ".join(a.release.release_id for a in served)
    if not matches:
        message = f"no served catalogue has a workflow or alias {name!r}; this server serves {ids}"
    else:
        message = (
            f"{name!r} names workflows in several served catalogues "
            f"({', '.join(a.release.release_id for a in matches)}); start it by a workflow id one catalogue "
            "owns, or serve those catalogues from separate servers"
        )
    available = [
        {**entry, "release": a.release.release_id}
        for a in served
        for entry in available_workflows(a.release.catalogue.workflows)
    ]
    details = {"served": sorted(actives), "available": available}
    raise RegistryError(FailureCode.WORKFLOW_NOT_FOUND, message, details=details)
