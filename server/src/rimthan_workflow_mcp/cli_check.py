"""``rimthan-mcp check``: verify a release exactly as ``serve`` would load it, serve nothing, write nothing."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click
from rimthan_clikit import epilog, guard, warn

from .cli_keys import check_state_dir, trust_option
from .logs import configure_logging

if TYPE_CHECKING:
    from rimthan_workflow_registry.release import VerifiedRelease

    from .provider import ReleaseProvider


@click.command(
    epilog=epilog(
        [
            "rimthan-mcp check --release releases/research-decision-1.3.0 --trust keys/local",
            "rimthan-mcp check --release releases/research-decision-1.2.0 \\",
            "    --migration-target releases/research-decision-1.3.0 --state-dir ~/.local/state/rimthan",
        ],
        exits=(
            "Exit status:",
            "  0  serve would load it: one `ok <release> <manifest digest> signed by ...` line per release on stdout",
            "     (with --migration-target, a `warning:` line on stderr per workflow whose runs could not migrate)",
            "  1  serve would refuse it: one line on stderr names the code, the file and what to do next",
            "  2  usage mistake",
        ),
    )
)
@click.option(
    "--release",
    "release_dir",
    type=click.Path(path_type=Path),
    required=True,
    metavar="DIR",
    help="Release directory to check.",
)
@trust_option()
@click.option(
    "--migration-target",
    type=click.Path(path_type=Path),
    metavar="DIR",
    help="Also check this migration target (same scope) as serve would. [default: none]",
)
@click.option(
    "--state-dir",
    type=click.Path(path_type=Path, readable=False),
    metavar="DIR",
    help="Also check the release against this state directory's activation floors (nothing is written): "
    "the explicit --release mode's and, without --migration-target, the floor `serve --releases-dir` of the "
    "release's parent directory keeps. [default: the floor is not checked]",
)
def check(release_dir: Path, trust: Path, migration_target: Path | None, state_dir: Path | None) -> None:
    """Verify a release exactly as `serve` would load it, then exit.

    The same code path as serve: signatures against --trust, the canonical
    manifest, every file's size and digest, the catalogue rules, the served
    profile, the tool contracts; with --migration-target its scope; with
    --state-dir the rollback floor. Nothing is served and nothing is written.
    """
    from rimthan_workflow_registry.release import load_trust
    from rimthan_workflow_registry.run import CheckpointKeyring

    from .deployment_state import check_directory_floor
    from .provider import ReleaseProvider

    configure_logging("warning")  # an older release not held is said with its path and code, as serve logs it
    guard(lambda: check_state_dir(state_dir))  # a file there would read as "no floor recorded"
    trust_store = guard(lambda: load_trust(trust))
    provider: ReleaseProvider = guard(
        lambda: ReleaseProvider.open(
            release_dir,
            trust=trust_store,
            keyring=CheckpointKeyring.generate(),
            migration_target_dir=migration_target,
            state_dir=state_dir,
            record_floor=False,
        ),
    )
    if state_dir is not None and migration_target is None:  # without a target it may be served either way
        guard(lambda: check_directory_floor(provider.active, trust_store, state_dir))
    from .server import runtime_state  # check builds what serve would serve, so it needs the adapter

    guard(lambda: runtime_state(provider))
    # serve builds a release's engine on its first tool call; check builds it now, so a broken install or
    # engine refuses here, before a client's first call would get internal_error
    guard(lambda: [loaded.module for loaded in provider.held.values()])
    for loaded in provider.held.values():
        signers = ", ".join(trust_store.describe(k) for k in loaded.release.signer_key_ids)
        click.echo(f"ok {loaded.release.release_id} {loaded.digest} signed by {signers}")
    if provider.migration_target is not None:
        _warn_migration_gaps(provider.active.release, provider.migration_target.release)


def _warn_migration_gaps(src: VerifiedRelease, dst: VerifiedRelease) -> None:
    """One warning per workflow whose runs could not migrate to the target (serve would load both all the same)."""
    from rimthan_workflow_registry.release import MANIFEST_NAME

    from .migration import migration_gaps

    for gap in migration_gaps(src, dst):
        warn(gap.code, str(dst.root / MANIFEST_NAME), gap.message, gap.next_step)
