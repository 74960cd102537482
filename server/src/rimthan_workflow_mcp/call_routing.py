"""Which held release serves a ``tools/call``: the checkpoint's pinned release, else the active one.

The token's MAC is checked first, with the keyring every release shares: a
token that does not verify is ``checkpoint_invalid`` whatever its claims say,
so edited claims can neither pick a release nor probe which releases this
server holds. Only verified claims decide the route.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rimthan_workflow_registry.errors import FailureCode, RegistryError

from .provider import LoadedRelease, ReleaseProvider
from .tool_contracts import ToolContract

if TYPE_CHECKING:
    from rimthan_workflow_registry.run import Checkpoint

CHECKPOINT_ARGUMENT = "checkpoint"
UNTRUSTED_NEXT = (
    "have a key holder the trust store trusts co-sign the pinned release where it was built (`rimthan-pack sign "
    "RELEASE --key KEY`), push it again (a follower pulls the co-signed copy) or sign its copy in the releases "
    "directory, then refresh this server; or start a new run"
)


def route(provider: ReleaseProvider, contract: ToolContract, arguments: Mapping[str, Any]) -> LoadedRelease:
    """The release that serves this call: the checkpoint's pinned release, else the active release
    of the catalogue that defines the workflow to start."""
    from rimthan_workflow_registry.run import verify_checkpoint

    if not contract.checkpoint_bearing:
        return provider.active_for_workflow(arguments.get("workflow"))
    checkpoint = verify_checkpoint(provider.keyring, arguments[CHECKPOINT_ARGUMENT]).checkpoint
    loaded = provider.get(checkpoint.manifest_digest)
    if loaded is None:
        raise _not_held(provider, checkpoint)
    return loaded


def _not_held(provider: ReleaseProvider, checkpoint: Checkpoint) -> RegistryError:
    """The refusal of a checkpoint whose pinned release is not held: dropped as untrusted, or not there."""
    details = {
        "release_id": checkpoint.release_id,
        "manifest_digest": checkpoint.manifest_digest,
        "active": provider.active.release.release_id,
    }
    pinned = f"the checkpoint is pinned to release {checkpoint.release_id} ({checkpoint.manifest_digest})"
    if provider.distrusted(checkpoint.manifest_digest):
        return RegistryError(
            FailureCode.PINNED_RELEASE_UNAVAILABLE,
            f"{pinned}, which this server dropped: its trust store no longer vouches for the release's signatures "
            "(a signing key removed or revoked)",
            details={**details, "untrusted": True},
            next_step=UNTRUSTED_NEXT,
        )
    return RegistryError(
        FailureCode.PINNED_RELEASE_UNAVAILABLE,
        f"{pinned}, which this server does not hold; put it back in the releases directory and refresh this server "
        "(SIGHUP or the next --refresh-interval scan: it is held for pinned runs, never activated), resume on a "
        "server that holds it, or start a new run",
        details=details,
    )
