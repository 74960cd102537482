"""``rimthan-mcp serve``: what it prints on stderr once the releases are loaded, before it serves.

Each loaded release (version, manifest digest, path; the active ones, then those held for the runs pinned to
them), the releases skipped
and why, the migration target and the workflows it could not take, the trust
keys and threshold, the checkpoint key file and signing key id, the
activation floor, how to refresh, and the health rule. Under stdio, stdout
carries only MCP messages, so every line goes to stderr.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .cli_keys import say

if TYPE_CHECKING:
    from rimthan_workflow_registry.release import TrustStore
    from rimthan_workflow_registry.run import CheckpointKeyring

    from .loading import LoadedRelease
    from .migration import MigrationGap
    from .provider import ReleaseProvider


def say_loaded(provider: ReleaseProvider, trust_store: TrustStore) -> None:
    """The releases skipped at start and those active, the migration target and its gaps, the trust store."""
    for rejection in provider.start_rejections:
        for said in rejection.summaries():  # each failure collected with the first on a line of its own
            say(f"skipped {rejection.path}: {said}")
    for loaded in provider.actives.values():
        say(f"release {loaded.release.release_id} {loaded.digest} ({loaded.release.root}) [active]")
    for loaded in pinned_only(provider):
        say(f"release {loaded.release.release_id} {loaded.digest} ({loaded.release.root}) [held for pinned runs]")
    say(describe_migration(provider))
    for gap in migration_gaps(provider):
        say(f"warning: {gap.code}: {gap.message}; {gap.next_step}")
    say(describe_trust(trust_store))


def say_state(
    provider: ReleaseProvider, keyring: CheckpointKeyring, *, keys_path: Path, created: bool, state_dir: Path
) -> None:
    """The checkpoint key file and signing key, the activation floor, a schema-check cache that was not saved."""
    from rimthan_workflow_registry.release import SCHEMA_CHECKS  # what serving loads, imported then

    from .floor import FLOOR_FILE

    say(
        f"checkpoint keys {keys_path} ({'created' if created else 'loaded'}): signing {keyring.signing_key_id}, "
        f"{len(keyring.keys)} key(s)"
    )
    floors = ", ".join(
        f"{name} >= {entry.version if (entry := provider.floor.get(name)) else '-'}" for name in provider.actives
    )
    say(f"activation floor {state_dir / FLOOR_FILE}: {floors}")
    if (unwritten := SCHEMA_CHECKS.unwritten) is not None:  # only an optimisation: it never stops a start
        say(f"warning: schema-check cache {unwritten}: not saved, so the next start checks the schemas again")


def say_refresh(provider: ReleaseProvider, pid: int, refresh_interval: float | None, stale_after: float | None) -> None:
    """How to refresh this process, and when ``GET /healthz`` turns stale."""
    interval = f", every {refresh_interval:g}s" if refresh_interval else ""
    say(f"refresh: kill -HUP {pid}{interval}; rescans {provider.releases_dir}")
    if stale_after is not None:
        say(
            f"health: GET /healthz answers 503 once syncs fail or hang and the last good one is over {stale_after:g}s "
            "old"
        )


def pinned_only(provider: ReleaseProvider) -> list[LoadedRelease]:
    """The releases held beside the active ones and the migration target: older ones runs may be pinned to."""
    shown = {loaded.digest for loaded in provider.actives.values()}
    if provider.migration_target is not None:
        shown.add(provider.migration_target.digest)
    held = [loaded for digest, loaded in provider.held.items() if digest not in shown]
    return sorted(held, key=lambda loaded: loaded.release.release_id)


def describe_migration(provider: ReleaseProvider) -> str:
    if provider.migration_target is not None:
        target = provider.migration_target
        return f"migration target {target.release.release_id} {target.digest} ({target.release.root})"
    if provider.migrate_to_newest:
        return "migration target: per catalogue, its newest verified release when newer than the run's pinned one"
    return "migration target: none (migration is refused)"


def migration_gaps(provider: ReleaseProvider) -> tuple[MigrationGap, ...]:
    """The explicit target's: the workflows of the active release whose runs it could not take."""
    target = provider.migration_target
    if target is None:  # (the usual start: the migration module waits for the first call, as P5 measures)
        return ()
    from .migration import migration_gaps as gaps

    return gaps(provider.active.release, target.release)


def describe_trust(trust: TrustStore) -> str:
    """Full key ids (what `rimthan-pack keygen` printed), each with its name in the trust store."""
    keys = ", ".join(f"{trust.names[k]}={k}" if trust.names.get(k) else k for k in sorted(trust.keys))
    return f"trust {trust.source}: threshold {trust.threshold} of {len(trust.keys)} key(s): {keys}"
