"""``rimthan-mcp serve``: the releases it holds, ``--release`` (with ``--migration-target``) or a directory.

A start refused below the activation floor first logs which release, for a
program reading the logs (:func:`~rimthan_workflow_mcp.floor.log_below_floor`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rimthan_workflow_registry.errors import RegistryError

if TYPE_CHECKING:
    from rimthan_workflow_registry.release import TrustStore
    from rimthan_workflow_registry.run import CheckpointKeyring

    from .provider import ReleaseProvider

DEFAULT_RELEASES = Path("releases")


def open_provider(
    release_dir: Path | None,
    *,
    releases_dir: Path | None,
    trust: TrustStore,
    keyring: CheckpointKeyring,
    migration_target: Path | None,
    state_dir: Path,
    lower_floor: bool,
    migrate_to_newest: bool,
) -> ReleaseProvider:
    """``--release``: exactly that release (and ``--migration-target``); else every catalogue in the directory.

    A start refused below the activation floor first logs which release, for a program (:func:`log_below_floor`).
    """
    from .floor import log_below_floor
    from .provider import ReleaseProvider

    try:
        if release_dir is not None:
            return ReleaseProvider.open(
                release_dir,
                trust=trust,
                keyring=keyring,
                migration_target_dir=migration_target,
                releases_dir=releases_dir,
                state_dir=state_dir,
                lower_floor=lower_floor,
            )
        return ReleaseProvider.open_directory(
            releases_dir or DEFAULT_RELEASES,
            trust=trust,
            keyring=keyring,
            state_dir=state_dir,
            lower_floor=lower_floor,
            migrate_to_newest=migrate_to_newest,
        )
    except RegistryError as exc:
        log_below_floor(exc)
        raise
