"""``rimthan-pack keygen`` and ``init``: a new signing key pair, and a new catalogue source.

What an engineer runs before a first build. Registered on the ``rimthan-pack``
group when the group first looks one of them up
(:data:`~rimthan_packager.cli_options.COMMANDS_ELSEWHERE`): a build does not
import this module. The work is :mod:`rimthan_packager.keygen`'s and
:mod:`rimthan_packager.scaffold`'s, imported when the command runs.
"""

from __future__ import annotations

from pathlib import Path

import click
from rimthan_clikit import emit_json, reports_refusals

from .cli_options import _JSON, _epilog, cli


@cli.command(
    epilog=_epilog(
        "rimthan-pack keygen --out private-keys/me --trust-dir keys/local",
        "rimthan-pack keygen --out ~/.config/rimthan/release --json",
    )
)
@click.option(
    "--out",
    "prefix",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Path prefix: writes PREFIX.key (private, mode 0600; folders made for it 0700) and PREFIX.pub (public).",
)
@click.option(
    "--trust-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write the public key into this trust directory (as NAME.pub, NAME being PREFIX's) instead of beside "
    "the private key, which stays out of it.",
)
@_JSON
@reports_refusals
def keygen(prefix: Path, trust_dir: Path | None, as_json: bool) -> None:
    """Generate an Ed25519 signing key pair and print its key id.

    PREFIX.key is PEM PKCS#8 with mode 0600; PREFIX.pub is PEM
    SubjectPublicKeyInfo (what goes into a trust store; with --trust-dir, it
    is written there). Refuses to overwrite either file, and refuses a .key
    path that git tracks or would track: keep private keys outside the
    repository or in a git-ignored folder such as private-keys/, never in a
    trust directory.
    """
    from .keygen import generate_keypair

    if prefix.name in ("", ".", ".."):  # empty: Path("") is "."; PREFIX.key would have no name of its own
        raise click.BadParameter("needs a file name prefix, such as private-keys/me", param_hint="'--out'")
    generated = generate_keypair(prefix, trust_dir)
    if as_json:
        emit_json(
            {
                "ok": True,
                "key_id": generated.key_id,
                "private_key": str(generated.private_path),
                "public_key": str(generated.public_path),
            }
        )
        return
    click.echo(f"private key  {generated.private_path}  (mode 0600, keep it secret)")
    click.echo(f"public key   {generated.public_path}")
    click.echo(f"key id       {generated.key_id}")


@cli.command(
    epilog=_epilog(
        "rimthan-pack init catalogues/my-flow/0.1.0          # catalogue my-flow, version 0.1.0",
        "rimthan-pack init drafts/flow-v2 --name my-flow",
        "rimthan-pack build catalogues/my-flow/0.1.0 --key private-keys/dev.key   # builds as it is",
    )
)
@click.argument("directory", type=click.Path(path_type=Path))
@click.option(
    "--name",
    default=None,
    help="Catalogue name ([a-z0-9-]). [default: DIRECTORY's name, or its parent's when DIRECTORY is a version "
    "such as 0.1.0, which then is the catalogue's version; there --name must be the parent's, as build checks]",
)
@_JSON
@reports_refusals
def init(directory: Path, name: str | None, as_json: bool) -> None:
    """Scaffold a new catalogue source in DIRECTORY (absent or empty).

    The scaffold is a small, complete example that builds and runs as it is:
    setup-workspace, one ungated step, one gated terminal step with a JSON
    output and a reviewer validator, a Claude Code host adapter that tells the
    model how to use the four tools, and examples/ for the scripted host kit.
    Edit it, then: rimthan-pack build DIRECTORY --key KEY
    """
    from .scaffold import init_catalogue

    written = init_catalogue(directory, name)
    if as_json:
        emit_json({"ok": True, "source": str(directory), "files": [str(p) for p in written]})
        return
    click.echo(f"created catalogue source {directory} ({len(written)} files)")
    click.echo(f"next: rimthan-pack build {directory} --key KEY")
