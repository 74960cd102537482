"""``rimthan-pack push`` and ``pull``: releases to and from an OCI registry.

Registered on the ``rimthan-pack`` group when the group first looks one of them
up (:data:`~rimthan_packager.cli_options.COMMANDS_ELSEWHERE`). The work is in
:mod:`rimthan_packager.oci` (push) and the core's
:mod:`rimthan_workflow_registry.release.oci` (the pull path the server shares).
"""

from __future__ import annotations

from pathlib import Path

import click
from rimthan_clikit import emit_json, reports_refusals

from .cli_options import _JSON, _TRUST_HELP, _epilog, cli

# oras, requests and the verifier are imported inside push and pull: registering these commands must not
# slow down every other rimthan-pack command (or --help).

_PLAIN_HTTP = click.option(
    "--plain-http", is_flag=True, help="Talk plain HTTP instead of TLS (only for a registry you run without TLS)."
)


@cli.command(
    epilog=_epilog(
        "rimthan-pack push releases/research-decision-1.3.0 oci://registry.example/rimthan/research --trust keys/",
        "rimthan-pack push RELEASE oci://127.0.0.1:5000/rimthan/research:1.3.0 --trust keys/ --plain-http",
    )
)
@click.argument("release", type=click.Path(path_type=Path))
@click.argument("reference")
@click.option("--trust", "trust_path", required=True, type=click.Path(path_type=Path), help=_TRUST_HELP)
@_PLAIN_HTTP
@click.option(
    "--replace-tag", is_flag=True, help="Move a tag that already names another release (its bytes stay by digest)."
)
@_JSON
@reports_refusals
def push(release: Path, reference: str, trust_path: Path, plain_http: bool, replace_tag: bool, as_json: bool) -> None:
    """Publish a verified RELEASE as an OCI artifact at oci://HOST/REPOSITORY[:TAG].

    The tag defaults to the release version. Every release file becomes a
    blob addressed by its SHA-256; blobs the registry holds are not sent
    again, so pushing after `rimthan-pack sign` uploads just the new
    signature. Prints the OCI manifest digest. A push that fails, or runs
    past its deadline, leaves the tag as it was: push again to send the rest.
    """
    from rimthan_workflow_registry.release import load_trust, parse_reference

    from .oci import push_release

    result = push_release(
        release, parse_reference(reference), load_trust(trust_path), plain_http=plain_http, replace_tag=replace_tag
    )
    if as_json:
        emit_json({"ok": True, **result.to_dict()})
        return
    click.echo(f"pushed {result.release} {result.manifest_digest} to {result.reference}")
    click.echo(f"blobs: {result.uploaded} uploaded, {result.reused} already there")
    click.echo(result.oci_digest)


@cli.command(
    epilog=_epilog(
        "rimthan-pack pull oci://registry.example/rimthan/research:1.3.0 --trust keys/ --out releases",
        "rimthan-pack pull oci://registry.example/rimthan/research@sha256:<digest> --trust keys/ --out releases",
    )
)
@click.argument("reference")
@click.option("--trust", "trust_path", required=True, type=click.Path(path_type=Path), help=_TRUST_HELP)
@click.option(
    "--out",
    "out_dir",
    default=Path("releases"),
    show_default=True,
    type=click.Path(path_type=Path),
    help="Releases directory; the release lands in OUT/<catalogue>-<version>.",
)
@click.option(
    "--replace-damaged",
    is_flag=True,
    help="If OUT already holds a copy of this release that no longer verifies (a file edited or deleted, or "
    "signed only by keys --trust no longer holds), replace it with the verified pull in one rename. A copy that "
    "verifies is never replaced.",
)
@_PLAIN_HTTP
@_JSON
@reports_refusals
def pull(
    reference: str, trust_path: Path, out_dir: Path, replace_damaged: bool, plain_http: bool, as_json: bool
) -> None:
    """Download, verify and install the release at oci://HOST/REPOSITORY(:TAG|@sha256:...).

    The download goes to a temporary directory beside OUT; only a release
    whose blobs match their digests, that passes the one verification path
    and whose version tag names its signed version is moved to its final
    name. Anything else is deleted and refused. A copy already under that
    name that verifies is left as it is (already present, or release_exists
    for another release); one that does not verify is refused, or replaced
    with --replace-damaged.
    """
    from rimthan_workflow_registry.release import load_trust, parse_reference, pull_release

    from .interrupt import out_taken_back_on_failure

    ref, trust = parse_reference(reference), load_trust(trust_path)
    with out_taken_back_on_failure(out_dir):  # as a failed build: nothing is left where the release would have gone
        result = pull_release(ref, trust, out_dir, plain_http=plain_http, replace_damaged=replace_damaged)
    if as_json:
        emit_json({"ok": True, **result.to_dict()})
        return
    if result.replaced_damaged is not None:
        what = "a copy the trust store no longer vouches for" if result.replaced_untrusted else "a damaged copy"
        click.echo(f"replaced {what} at {result.path}: {result.replaced_damaged}", err=True)
    state = "already present" if result.already_present else "pulled"
    click.echo(f"{state} {result.release.release_id} {result.release.manifest_digest}")
    click.echo(f"{result.path} (OCI {result.oci_digest})")
