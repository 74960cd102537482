"""``rimthan-pack check``: a catalogue source checked as build would check it, nothing written.

Registered on the ``rimthan-pack`` group when the group first looks it up
(:data:`~rimthan_packager.cli_options.COMMANDS_ELSEWHERE`): a build does not
import this module. The checks are :mod:`rimthan_packager.build`'s and the
warnings :mod:`rimthan_packager.cli`'s, shared with ``build``.
"""

from __future__ import annotations

from pathlib import Path

import click
from rimthan_clikit import emit_json, reports_refusals

from .cli import _warn_kept, _warn_newer, _warn_unpullable
from .cli_options import _JSON, _SOURCE, _epilog, cli
from .user_cache import remembered_checks

_RELEASES_DIR_HELP = (
    "Also check against the releases already built there (build's --out): refused if it holds this version "
    "(release_exists), warned if it holds a newer one (rollback_refused)."
)


@cli.command(
    epilog=_epilog(
        "rimthan-pack check catalogues/research-decision/1.3.0",
        "rimthan-pack check SOURCE --json",
        "rimthan-pack check SOURCE --releases-dir releases",
    )
)
@_SOURCE
@click.option(
    "--releases-dir",
    "releases_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help=_RELEASES_DIR_HELP,
)
@_JSON
@reports_refusals
@remembered_checks()
def check(source: Path, releases_dir: Path | None, as_json: bool) -> None:
    """Check a catalogue source as build would, without keys, writing nothing.

    SOURCE is a catalogue source directory (rooted at catalogue.toml). Every
    check build makes before it writes runs: the server's catalogue rules,
    the JSON Schema keywords, the version folder, every definition file
    listed, every worked example in examples/ as a run would check it (and no
    file there that is no workflow's example), and no schema file left
    unreferenced. Refusals are reported as build would report
    them (each unreferenced schema file and stray example its own); exit 0
    means build would accept the source. With --releases-dir, a version
    that directory already holds is refused as build --out would refuse it
    (release_exists), and a newer version there is warned of: a verifier
    that has served it refuses this one (rollback_refused).
    """
    from rimthan_workflow_registry.canonical import sha256_hex

    from .build import check_source, own_files, refuse_built, source_date_epoch

    checked = check_source(source)
    catalogue = checked.loaded.catalogue
    if releases_dir is not None:
        refuse_built(releases_dir, checked)
    own = own_files(checked, signatures=1, created=source_date_epoch())
    _warn_unpullable(source, checked.source.sizes, own, catalogue.name, catalogue.version)
    if releases_dir is not None:
        _warn_newer(releases_dir, catalogue.name, catalogue.version, "would build")
        _warn_kept(releases_dir, catalogue, lambda path: sha256_hex(checked.source.read(path)))
    release_id = f"{catalogue.name}@{catalogue.version}"
    if as_json:
        emit_json(
            {
                "ok": True,
                "source": str(source),
                "release_id": release_id,
                "workflows": [w.key for w in catalogue.workflows],
                "examples": checked.examples,
                "files": len(checked.source.paths),
            }
        )
        return
    click.echo(
        f"checked {release_id} at {source}: {len(catalogue.workflows)} workflow(s), {checked.examples} worked "
        f"example(s), {len(checked.source.paths)} files; build would accept it"
    )
