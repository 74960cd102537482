"""Build immutable releases: validate, stage, sign, self-check, publish.

``build_release`` validates a catalogue source with the server's own loader,
writes the release into a temporary directory beside the destination (same
filesystem; the copy and the flush are :mod:`rimthan_packager.staging`'s),
runs the one verification path on it, makes it durable (one ``syncfs`` of
that file system, like ``sync -f``), and only then renames it into
``<out>/<name>-<version>`` - without ever replacing an existing directory. A
build that fails (a refusal, Ctrl-C, ``SIGTERM``) removes its work directory
and the ``--out`` directories it made (only those, and only while empty); a
crash leaves at most a hidden ``.<name>-<version>.building-*`` directory,
never a half-written release under the real name. Co-signing a release that
exists is :mod:`rimthan_packager.cosign`'s.

Builds are reproducible: the manifest depends only on the source bytes (and
``SOURCE_DATE_EPOCH`` if set), and Ed25519 signatures are deterministic.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from rimthan_workflow_registry.errors import CatalogueError, FailureCode, RegistryError, relocated
from rimthan_workflow_registry.limits import MAX_JSON_SAFE_INTEGER
from rimthan_workflow_registry.protocol_names import WORKFLOW_ENGINE_PROFILE
from rimthan_workflow_registry.release import (
    CATALOGUE_DIR,
    CATALOGUE_MANIFEST_NAME,
    CHECKSUMS_NAME,
    MANIFEST_NAME,
    SCHEMA_CHECKS,
    SIGNATURES_DIR,
    Catalogue,
    FileEntry,
    LoadedCatalogue,
    Manifest,
    OwnFiles,
    ReleaseLoader,
    TrustStore,
    VerifiedRelease,
    canonical_form_version,
    check_schema_keywords,
    check_text_sizes,
    manifest_for,
    media_type_for,
    render_checksums,
    signature_name,
    verify_release,
)
from rimthan_workflow_registry.remediation import io_refusal
from rimthan_workflow_registry.run import check_examples

from .fsutil import create_file, fsync_dir, make_work_dir, rename_no_replace
from .interrupt import out_taken_back_on_failure, signals_held
from .layout import (
    new_version_step,
    refuse_folder_mismatch,
    refuse_unlisted_definitions,
    refuse_unreferenced_schemas,
)
from .signing import SigningKey
from .source import SourceFiles, read_source
from .staging import Copied, copy_catalogue, make_durable


@dataclass(frozen=True, eq=False, repr=False)  # never compared, hashed or shown (test_build_dataclasses)
class BuildResult:
    """Where the release landed and its identity."""

    path: Path
    manifest: Manifest
    manifest_digest: str
    signer_key_ids: tuple[str, ...]
    own: OwnFiles  # manifest.json, SHA256SUMS and the signatures: layers of the pushed artifact too
    catalogue: Catalogue


def source_date_epoch(environ: Mapping[str, str] = os.environ) -> int | None:
    """``SOURCE_DATE_EPOCH`` as an int, or ``None`` when unset (then no time field is written)."""
    raw = environ.get("SOURCE_DATE_EPOCH")
    if raw is None or raw == "":
        return None
    # str.isdigit also takes "²", which int() refuses; the manifest's JSON carries integers up to 2**53 - 1
    if (
        not (raw.isascii() and raw.isdigit())
        or len(raw.lstrip("0")) > _EPOCH_DIGITS
        or int(raw) > MAX_JSON_SAFE_INTEGER
    ):
        raise RegistryError(
            FailureCode.INVALID_ARGUMENTS,
            f"must be a non-negative integer (seconds since 1970) of at most {MAX_JSON_SAFE_INTEGER}",
            path="SOURCE_DATE_EPOCH",
            next_step="set SOURCE_DATE_EPOCH to whole seconds since 1970 (git log -1 --format=%ct), or unset it",
        )
    return int(raw)


_EPOCH_DIGITS = len(str(MAX_JSON_SAFE_INTEGER))  # a longer value is refused before int() reads it


@dataclass(frozen=True, eq=False, repr=False)  # never compared, hashed or shown (test_build_dataclasses)
class CheckedSource:
    """A catalogue source that passed every check a build makes before it writes anything."""

    source: SourceFiles
    loaded: LoadedCatalogue
    examples: int  # how many worked examples were checked


def check_source(source_dir: Path | str) -> CheckedSource:
    """Every check of a build, nothing written (``rimthan-pack check``, and ``build`` before it writes)."""
    source = read_source(source_dir)
    loaded, examples = validate_source(source)
    refuse_folder_mismatch(source.root, loaded.catalogue.name, loaded.catalogue.version)
    refuse_unserved_profile(source.root, loaded.catalogue.scope.profile)
    refuse_unlisted_definitions(source, loaded.catalogue)
    refuse_unreferenced_schemas(source, loaded.catalogue)
    return CheckedSource(source, loaded, examples)


_NO_DIGEST = "0" * 64  # a SHA-256 in hex is always 64 characters: a manifest of these is as long as the real one


def own_files(checked: CheckedSource, signatures: int, created: int | None) -> OwnFiles:
    """The bytes of the ``manifest.json`` and ``SHA256SUMS`` a build of ``checked`` writes, without hashing a file.

    Every digest is 64 hex characters, so a manifest listing a placeholder digest for each file (and the same
    path, size and media type) is exactly as long as the built one (RFC 8785 escapes no hex digit).
    """
    entries = [FileEntry(path, _NO_DIGEST, size, media_type_for(path)) for path, size in checked.source.sizes.items()]
    manifest = manifest_for(checked.loaded.catalogue, entries, created)
    return OwnFiles(len(manifest.to_bytes()), len(render_checksums(manifest)), signatures)


def refuse_unserved_profile(root: Path, profile: str) -> None:
    """Refuse a ``[scope].profile`` no verifier serves: the release would sign, then never verify or load."""
    if profile != WORKFLOW_ENGINE_PROFILE:
        raise CatalogueError(
            FailureCode.CATALOGUE_INVALID,
            f"[scope].profile is {profile!r}, but rimthan-mcp serves only {WORKFLOW_ENGINE_PROFILE!r}: the release "
            "would be signed, then refused by rimthan-pack verify and rimthan-mcp (scope_mismatch)",
            path=str(root / CATALOGUE_MANIFEST_NAME),
            next_step=f'set profile = "{WORKFLOW_ENGINE_PROFILE}" under [scope] in catalogue.toml',
        )


def validate_source(source: SourceFiles) -> tuple[LoadedCatalogue, int]:
    """The catalogue rules, with the loader the server uses, and the build's own; errors name source files.

    Also how many worked examples were checked.
    """
    try:
        loaded = ReleaseLoader.load(source)
        check_schema_keywords(loaded.schemas.documents, source.read)  # build only: signed releases keep loading
        check_text_sizes(loaded.catalogue, source.read)  # same
        examples = check_examples(loaded.catalogue, loaded.schemas, source.paths, source.read)  # same
    except RegistryError as exc:
        raise relocated(exc, lambda path: source.where(path) if path else str(source.root)) from exc
    return loaded, examples


def _distinct(keys: Sequence[SigningKey]) -> list[SigningKey]:
    seen: dict[str, SigningKey] = {}
    for key in keys:
        seen.setdefault(key.key_id, key)
    return list(seen.values())


def build_release(
    source_dir: Path | str,
    keys: Sequence[SigningKey],
    out_dir: Path | str,
    *,
    trust: TrustStore | None = None,
    created: int | None = None,
    progress: bool = False,
) -> BuildResult:
    """Validate ``source_dir``, write the signed release under ``out_dir``, verify it, publish it.

    The self-check runs ``verify_release`` with ``trust`` if given, otherwise
    with the signing keys' public halves (all of them required).
    """
    signers = _distinct(keys)
    if not signers:
        raise RegistryError(FailureCode.SIGNATURE_MISSING, "a release needs at least one signing key (--key)")
    out = Path(out_dir)
    _refuse_output_in_source(Path(source_dir), out)
    checked = check_source(source_dir)
    with out_taken_back_on_failure(out):  # a failed build takes back the --out directories it made, and only those
        return _build_into(out, checked.source, checked.loaded, signers, trust, created, progress)


def _build_into(
    out: Path,
    source: SourceFiles,
    loaded: LoadedCatalogue,
    signers: list[SigningKey],
    trust: TrustStore | None,
    created: int | None,
    progress: bool,
) -> BuildResult:
    """Write, sign, check and publish the release in ``out`` (which exists); a failure removes the work dir."""
    catalogue = loaded.catalogue
    dest = out / f"{catalogue.name}-{catalogue.version}"
    _refuse_existing(dest, source, catalogue)
    made: list[Path] = []
    try:
        with signals_held():  # the work directory is recorded before a signal can stop the build
            made.append(make_work_dir(out, _work_prefix(dest)))
        work = made[0]
        copied = copy_catalogue(source, work / CATALOGUE_DIR, progress)
        manifest = manifest_for(catalogue, copied.entries, created)
        manifest_bytes = manifest.to_bytes()
        SCHEMA_CHECKS.remember([manifest_bytes], canonical_form_version())  # RFC 8785 output: the self-check skips it
        written = [work / MANIFEST_NAME, work / CHECKSUMS_NAME]
        create_file(written[0], manifest_bytes, sync=False)
        checksums = render_checksums(manifest)
        create_file(written[1], checksums, sync=False)
        (work / SIGNATURES_DIR).mkdir()
        os.chmod(work / SIGNATURES_DIR, 0o755)  # not the umask's: never world-writable, always readable
        for key in signers:
            written.append(work / SIGNATURES_DIR / signature_name(key.key_id))
            create_file(written[-1], key.sign(manifest_bytes), sync=False)
        os.chmod(work, 0o755)
        check = trust or TrustStore.from_public_keys([k.public_key for k in signers], source="the signing keys")
        verified = _checked_and_durable(work, dest, check, copied, written)
        try:
            rename_no_replace(work, dest)
        except FileExistsError:
            raise _exists(dest, source, catalogue) from None
        fsync_dir(out)
    except BaseException as exc:
        import shutil  # only a failed build removes its work directory

        for work in made:
            shutil.rmtree(work, ignore_errors=True)
        if isinstance(exc, OSError) and (not exc.filename or _work_path(exc.filename, dest)):
            # a write on a full disk names no file, the work directory is no path the user gave: name --out
            doing = f"writing {dest.name}, so nothing was published"
            raise io_refusal(OSError(exc.errno, exc.strerror), str(out), doing) from None
        raise
    return BuildResult(
        path=dest,
        manifest=manifest,
        manifest_digest=verified.manifest_digest,
        signer_key_ids=verified.signer_key_ids,
        own=OwnFiles(len(manifest_bytes), len(checksums), len(signers)),
        catalogue=catalogue,
    )


def _work_prefix(dest: Path) -> str:
    return f".{dest.name}.building-"


def _work_path(filename: object, dest: Path) -> bool:
    """Whether an OS error's file is the hidden work directory or in it (``<out>/.<release>.building-*``)."""
    return f"/{_work_prefix(dest)}" in f"/{filename}"


def _refuse_output_in_source(source: Path, out: Path) -> None:
    """Refuse an ``out`` inside ``source``: everything in a source ships, so the next build would ship this release."""
    # realpath, not Path.resolve(): a symlink loop raises RuntimeError there; here it stays, to be refused below
    if Path(os.path.realpath(out)).is_relative_to(os.path.realpath(source)):
        raise RegistryError(
            FailureCode.PATH_UNSAFE,
            f"the output directory is inside the catalogue source {source}: everything in a source ships, "
            "so the next build would ship this release too",
            path=str(out),
            next_step="pass an --out outside the catalogue source (the default is releases)",
        )


def _exists(dest: Path, source: SourceFiles, catalogue: Catalogue) -> RegistryError:
    return RegistryError(
        FailureCode.RELEASE_EXISTS,
        "a release with this name and version already exists; releases are immutable",
        path=str(dest),
        next_step=new_version_step(source.root, catalogue.name, catalogue.version),
    )


def refuse_built(releases: Path, checked: CheckedSource) -> None:
    """Refuse a source whose version ``releases`` already holds, as a build into it would (``release_exists``)."""
    catalogue = checked.loaded.catalogue
    _refuse_existing(releases / f"{catalogue.name}-{catalogue.version}", checked.source, catalogue)


def _refuse_existing(dest: Path, source: SourceFiles, catalogue: Catalogue) -> None:
    if dest.exists() or dest.is_symlink():
        raise _exists(dest, source, catalogue)


# The release was discarded, so the table's advice (co-sign RELEASE) would point at nothing.
_DISCARDED_NEXT = {
    FailureCode.SIGNATURE_THRESHOLD_NOT_MET: "build again with one --key per trusted signer the threshold needs "
    "(or collect co-signatures later: build with --trust omitted, then rimthan-pack sign)",
    FailureCode.SIGNATURE_UNTRUSTED: "build again with a --key whose .pub is in the --trust store, or add the "
    "signing key's .pub to the trust store",
}


def _self_check(work: Path, dest: Path, trust: TrustStore) -> VerifiedRelease:
    """Verify the unpublished release; report paths under its final name."""
    try:
        return verify_release(work, trust, expected_profile=None)
    except RegistryError as exc:
        where = exc.path.replace(str(work), str(dest)) if exc.path else str(dest)
        raise type(exc)(
            exc.code,
            f"the built release does not verify, so nothing was published: {exc.message}",
            path=where,
            details=exc.details,
            next_step=_DISCARDED_NEXT.get(exc.code),
        ) from exc


def _checked_and_durable(
    work: Path, dest: Path, trust: TrustStore, copied: Copied, written: list[Path]
) -> VerifiedRelease:
    """The self-check, while the finished release is flushed to disk on another thread; both before publishing.

    Every file of the release is written before either starts and the
    self-check only reads, so the flush covers the whole release whichever
    ends first; the caller renames it into place only after both succeeded.
    A failed self-check waits for the flush to end (its outcome ignored) and
    is the refusal; otherwise a failed flush (write-back error) is.
    """
    dirs = [*copied.dirs, work / SIGNATURES_DIR, work]
    durable = _Flush(lambda: make_durable(work, copied.files, written, dirs))
    try:
        verified = _self_check(work, dest, trust)
    finally:
        durable.join()  # on failure too: nothing is discarded while the flush still reads it
    durable.raise_failure()
    return verified


class _Flush:
    """The flush on its own thread (a plain thread: ``concurrent.futures`` imports ``logging``, paid on every build).

    Its failure, whatever it is, is kept and raised by :meth:`raise_failure`
    in the caller's thread, never lost on the flushing one.
    """

    def __init__(self, flush: Callable[[], None]) -> None:
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(flush,), name="rimthan-sync")
        self._thread.start()

    def _run(self, flush: Callable[[], None]) -> None:
        try:
            flush()
        except BaseException as exc:  # re-raised in the caller's thread
            self._failure = exc

    def join(self) -> None:
        self._thread.join()

    def raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure
