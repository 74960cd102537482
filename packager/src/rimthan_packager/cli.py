"""``rimthan-pack``: build, and the console-script entry point.

The group and its shared options are :mod:`rimthan_packager.cli_options`'s;
``check`` is :mod:`rimthan_packager.cli_check`'s and ``sign``
:mod:`rimthan_packager.cli_sign`'s (both use the warnings and the key reading
here, which they share with ``build``), ``keygen`` and ``init``
:mod:`rimthan_packager.cli_author`'s, ``inspect`` and ``verify``
:mod:`rimthan_packager.cli_inspect`'s and ``push``/``pull``
:mod:`rimthan_packager.cli_oci`'s, each imported (and registered) by the group
only when one of its commands is run or listed: a build defines only its own. Every refusal is one line,
``error: <code>: <file>: <message>``, followed by one ``next:`` line saying
what to do (the one error voice of :mod:`rimthan_clikit`); exit status 1
for a refusal, 2 for a usage mistake. Bad input never produces a traceback.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rimthan_clikit import emit_json, reports_refusals, warn
from rimthan_workflow_registry.errors import FailureCode

from .cli_options import _JSON, _SOURCE, _epilog, _key_option, _trust_option, cli
from .user_cache import remembered_checks

__all__ = ["cli", "main"]  # the group (made in cli_options) with every command registered, and the entry point

# What a command needs is imported inside it: `rimthan-pack verify --help` (and any usage error)
# must not pay for jsonschema, the verifier and the builder.
if TYPE_CHECKING:
    from rimthan_workflow_registry.release import Catalogue, OwnFiles

    from .build import BuildResult
    from .signing import SigningKey


_ends_with_the_command = False  # set by main(): the console script's process ends when its command does


@contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off for a build: it allocates records per file and frees almost no cycles.

    Measured on a 10,000-file build: about 90 collections during the build,
    and under 50 cyclic objects left to collect after it. It spans the whole
    command, :func:`~rimthan_packager.user_cache.remembered_checks`' import
    of the checks' memory too (six collections there). In the console script
    (:func:`main`), whose process ends with the command, what the build made
    is frozen at its end (``gc.freeze``, a list splice) rather than left
    young: the collection the collector started once on again walked all of
    it (0.6% of a 1 MiB build's instructions). A caller that runs ``cli`` in
    its own process keeps its collector as it was.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if _ends_with_the_command:
            gc.freeze()
        if was_enabled:
            gc.enable()


@cli.command(
    epilog=_epilog(
        "rimthan-pack build catalogues/research-decision/1.3.0 --key private-keys/dev.key",
        "rimthan-pack build SOURCE --key a.key --key b.key --out releases --trust keys/trust.toml",
        "SOURCE_DATE_EPOCH=1767225600 rimthan-pack build SOURCE --key private-keys/dev.key",
    )
)
@_SOURCE
@_key_option("key_paths", "Private signing key (PEM PKCS#8); repeat for several signers.", multiple=True)
@click.option(
    "--out",
    "out_dir",
    default=Path("releases"),
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory the release is created in.",
)
@_trust_option("The built release must verify against it.")
@_JSON
@reports_refusals
@_collector_paused()  # from the imports on (remembered_checks' too): they allocate much and free no cycles either
@remembered_checks()
def build(source: Path, key_paths: tuple[Path, ...], out_dir: Path, trust_path: Path | None, as_json: bool) -> None:
    """Validate a catalogue source and build a signed, immutable release.

    SOURCE is a catalogue source directory (rooted at catalogue.toml). The
    catalogue is checked with the same rules the server applies at load, then
    written to OUT/<name>-<version> with a canonical manifest, SHA256SUMS and
    one signature per --key. An existing release is never overwritten.

    The result is verified before it is published: against --trust if given,
    otherwise against the signing keys themselves. Builds are reproducible;
    set SOURCE_DATE_EPOCH to record a creation time.
    """
    result = _build(source, key_paths, out_dir, trust_path, progress=not as_json and sys.stderr.isatty())
    sizes = {entry.path: entry.size for entry in result.manifest.files}
    release = result.manifest.release
    _warn_unpullable(source, sizes, result.own, release.catalogue, release.version)
    _warn_newer(out_dir, release.catalogue, release.version, "was built")
    digests = {entry.path: entry.sha256 for entry in result.manifest.files}
    _warn_kept(out_dir, result.catalogue, digests.__getitem__)
    if as_json:
        emit_json(
            {
                "ok": True,
                "release": str(result.path),
                "release_id": result.manifest.release.id,
                "manifest_digest": result.manifest_digest,
                "signers": list(result.signer_key_ids),
                "files": len(result.manifest.files),
                "bytes": result.manifest.total_size,
            }
        )
        return
    click.echo(f"built {result.manifest.release.id} at {result.path}")
    click.echo(f"manifest digest {result.manifest_digest}")
    if trust_path is None:
        click.echo(f"next: {_cosign_next(result.path, len(result.signer_key_ids))}")


def _cosign_next(release: Path, signatures: int) -> str:
    """What a build checked only against its own keys still needs: under a k-of-n trust file, k - n co-signatures
    before a verifier accepts it (build without --trust cannot know k; verify --trust says how many are missing)."""
    return (
        f"checked against its own {signatures} signing key(s) only: a verifier whose trust file needs a threshold "
        f"of k signatures refuses it until k-{signatures} more are added, one per co-signer with "
        f"`rimthan-pack sign {release} --key THEIR_KEY --trust TRUST`; "
        f"`rimthan-pack verify {release} --trust TRUST` says how many are missing"
    )


def _warn_unpullable(source: Path, sizes: Mapping[str, int], own: OwnFiles, name: str, version: str) -> None:
    """One warning per OCI pull bound the release is past (its OCI manifest's too): said at build, not first at
    push, after signing."""
    from rimthan_workflow_registry.release import unpullable

    for found in unpullable(sizes, own, name=name, version=version):
        warn(
            FailureCode.OCI_ARTIFACT_INVALID,
            str(source / found.path) if found.path else str(source),
            f"{found.reason}, so rimthan-pack push will refuse this release",
            found.next_step
            or "to publish it through a registry, keep the source within the limits docs/fleet.md lists; "
            "a release past them serves only from a directory (rimthan-mcp serve --releases-dir)",
        )


def _warn_newer(releases: Path, name: str, version: str, done: str) -> None:
    """One warning (``rollback_refused``) when ``releases`` holds a newer version of the catalogue: this one
    was built (or would be) but a verifier that has served the newer one refuses it."""
    from .layout import newer_releases

    newer = newer_releases(releases, name, version)
    if newer:
        warn(
            FailureCode.ROLLBACK_REFUSED,
            str(releases / f"{name}-{newer[0]}"),
            f"{releases} holds {name} {', '.join(newer)}, newer than {version}: {name} {version} {done}, but "
            f"rimthan-mcp serve activates {newer[0]} from this directory, and one that has served {newer[0]} refuses "
            f"{version} (its activation floor)",
            f"give this source a version above {newer[0]} if it should replace it; to serve {version} after "
            f"{newer[0]} on purpose, the operator starts rimthan-mcp serve --lower-floor",
        )


def _warn_kept(releases: Path, catalogue: Catalogue, digest_of: Callable[[str], str]) -> None:
    """One warning (``migration_not_newer``) per workflow changed since an older release in ``releases`` that has
    it at the same version: the runs of that release could not migrate to this one."""
    from .kept_versions import kept_versions

    for kept in kept_versions(releases, catalogue, digest_of):
        files = ", ".join(kept.files[:3]) + (f" and {len(kept.files) - 3} more" if len(kept.files) > 3 else "")
        warn(
            FailureCode.MIGRATION_NOT_NEWER,
            str(kept.release),
            f"workflow {kept.workflow} changed since {kept.release.name} ({files}) but kept its version: runs of it "
            f"on {kept.release.name} cannot migrate to {catalogue.name} {catalogue.version}",
            f"in {kept.source}, give the workflow a version above {kept.workflow.split('@', 1)[1]}: a changed "
            "workflow is a new version of it",
        )


def _build(
    source: Path, key_paths: tuple[Path, ...], out_dir: Path, trust_path: Path | None, *, progress: bool
) -> BuildResult:
    """``build``'s work: its imports, the keys and trust store, then the build (its ``BuildResult``)."""
    from rimthan_workflow_registry.release import load_trust

    from .build import build_release, source_date_epoch

    keys = [_signing_key(p) for p in dict.fromkeys(key_paths)]  # a file given twice is read (and warned of) once
    trust = load_trust(trust_path) if trust_path is not None else None
    return build_release(source, keys, out_dir, trust=trust, created=source_date_epoch(), progress=progress)


def _signing_key(path: Path) -> SigningKey:
    """Load a private key for ``build`` or ``sign``; one warning (``key_file_exposed``) if others can read it."""
    from .signing import load_signing_key

    key = load_signing_key(path)
    if key.exposure is not None:
        warn(FailureCode.KEY_FILE_EXPOSED, key.source, key.exposure.message, key.exposure.next_step)
    return key


def main() -> None:
    """Console-script entry point."""
    global _ends_with_the_command
    _ends_with_the_command = True

    try:
        cli()
    finally:
        _leave_to_exit()


def _leave_to_exit() -> None:
    """The process ends next: its objects are frozen, so the exit's collection skips them.

    At exit the interpreter collects every object the collector still
    tracks; with the verifier's modules loaded that took ~7 ms of a ~100 ms
    build (it frees nothing the operating system would not). Output is
    already written and every file closed by then; a test or a caller that
    invokes ``cli`` itself is unaffected.
    """
    gc.freeze()
