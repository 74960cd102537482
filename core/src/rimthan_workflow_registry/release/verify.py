"""The one release verification path (packager ``verify``, build self-check, server load).

Like python-tuf's updater, verification is a fixed sequence of named steps,
each of which either passes or raises :class:`ReleaseVerificationError` with a
precise :class:`FailureCode` and the file it is about. Nothing from a release
is usable until every step has passed::

    release dir exists -> walk tree (no symlinks, hard links, special files,
    strange names, files outside the layout) -> parse manifest strictly ->
    manifest paths safe, none hidden, each file with its name's media type ->
    signatures meet the trust threshold -> a directory named like a release
    holds that release (no rollback or swap by renaming)
    -> SHA256SUMS matches -> every listed file has its size and digest -> no unlisted files
    -> scope/profile as expected -> catalogue rules (ReleaseLoader) and the
    manifest agrees with the catalogue.

Signatures are checked before any catalogue file is read, so an unsigned or
untrusted release never gets its content parsed.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from pathlib import Path

from rimthan_workflow_registry.canonical import DIGEST_PREFIX, sha256_hex
from rimthan_workflow_registry.errors import (
    MAX_SAID_FAILURES,
    FailureCode,
    RegistryError,
    ReleaseVerificationError,
    collected,
    relocated,
    shell_word,
)
from rimthan_workflow_registry.protocol_names import WORKFLOW_ENGINE_PROFILE
from rimthan_workflow_registry.release.catalogue import is_semver, semver_key
from rimthan_workflow_registry.release.format import (
    CATALOGUE_DIR,
    CHECKSUMS_NAME,
    MANIFEST_NAME,
    MAX_MANIFEST_BYTES,
    FileEntry,
    Manifest,
    adapter_entries,
    identity_for,
    media_type_for,
    render_checksums,
    workflow_entries,
)
from rimthan_workflow_registry.release.loader import CatalogueFiles, LoadedCatalogue, ReleaseLoader
from rimthan_workflow_registry.release.manifest_parse import parse_manifest
from rimthan_workflow_registry.release.oci_stop import VERIFYING, current_stop, stopped_by
from rimthan_workflow_registry.release.parallel import COLLECTOR, failures_in_order
from rimthan_workflow_registry.release.paths import (
    HIDDEN_PROBLEM,
    hidden_paths,
    path_set_problem,
    unsafe_paths,
)
from rimthan_workflow_registry.release.schema_checks import SCHEMA_CHECKS, canonical_form_version, check_key
from rimthan_workflow_registry.release.signature_check import check_signatures
from rimthan_workflow_registry.release.tree_walk import ReleaseTree, walk_release
from rimthan_workflow_registry.release.trust import TrustStore
from rimthan_workflow_registry.release.verified import (
    LoaderReads,
    ReleaseFiles,
    VerifiedRelease,
    check_file,
    check_files,
    failure_at,
    read_small,
    stops_file_check,
    verify_threads,
)
from rimthan_workflow_registry.release.wrong_path import refuse_wrong_path

_PATH = operator.attrgetter("path")
_MEDIA_TYPE = operator.attrgetter("media_type")
# Bytes read before they are hashed, at most (plus one file): memory stays flat, and a batch handed to the
# hashing thread is still in cache when it is hashed (256 KiB: 10,000 files / 256 MiB in 2-3% less time than
# with 1 MiB batches on the 2-core Xeon VM, medians of 8-12 fresh processes in three sweeps, 6 December 2026).
_HASH_BATCH_BYTES = 256 * 1024
_HASH_BATCH = 128  # files a thread takes at a time: few hand-offs, and threads finish within a batch of each other


# --------------------------------------------------------------------------- entry points


def verify_release(
    path: Path | str,
    trust: TrustStore,
    *,
    expected_profile: str | None = WORKFLOW_ENGINE_PROFILE,
    expected_scope: str | None = None,
) -> VerifiedRelease:
    """Verify the release directory at ``path`` completely, or raise.

    ``expected_profile`` / ``expected_scope`` (``None`` = any) pin what the
    caller is prepared to serve. Raises ``ReleaseVerificationError`` (or a
    ``CatalogueError`` for a catalogue rule, or ``TrustError``) naming the file.
    """
    return examine_release(Path(path), trust, expected_profile, expected_scope)


def examine_release(
    root: Path,
    trust: TrustStore | None,
    expected_profile: str | None,
    expected_scope: str | None,
    *,
    require_threshold: bool = True,
) -> VerifiedRelease:
    """Every step, in order, for :func:`verify_release` and :func:`~.inspection.inspect_release`.

    Without ``trust`` the signatures are not checked (``inspect`` without a trust store: shown, never served).
    The cyclic collector is paused meanwhile (:data:`~.parallel.COLLECTOR`).
    """
    with COLLECTOR.held():
        return _examined(root, trust, expected_profile, expected_scope, require_threshold)


def _examined(
    root: Path,
    trust: TrustStore | None,
    expected_profile: str | None,
    expected_scope: str | None,
    require_threshold: bool,
) -> VerifiedRelease:
    refuse_wrong_path(root)
    tree = walk_release(root)
    manifest_bytes, manifest_sha256, manifest = _read_manifest(root, tree)
    _check_manifest_paths(root, manifest)
    digest = DIGEST_PREFIX + manifest_sha256  # manifest_digest(manifest_bytes), hashed once
    signers = (
        check_signatures(root, tree, manifest_bytes, trust, require_threshold, manifest_digest=digest)
        if trust is not None
        else ()
    )
    if signers:  # signed, and parse_manifest passed: remember its canonical form (never for unsigned input)
        SCHEMA_CHECKS.remember_keys({check_key(manifest_bytes, canonical_form_version(), sha256=manifest_sha256)})
    _check_release_name(root, manifest)
    _check_checksums(root, tree, manifest)
    _check_files(root, tree, manifest)
    _check_unlisted(root, tree, manifest)
    _check_scope(root, manifest, expected_profile, expected_scope)
    reads = LoaderReads(ReleaseFiles(root=root, entries={f.path: f for f in manifest.files}))
    loaded = load_catalogue(root, reads)
    files = reads.kept()
    _check_manifest_matches_catalogue(root, manifest, loaded)
    return VerifiedRelease(
        root=root,
        manifest=manifest,
        manifest_bytes=manifest_bytes,
        manifest_digest=digest,
        signer_key_ids=signers,
        catalogue=loaded.catalogue,
        schemas=loaded.schemas,
        files=files,
    )


# --------------------------------------------------------------------------- steps


def _read_manifest(root: Path, tree: ReleaseTree) -> tuple[bytes, str, Manifest]:
    """The exact manifest bytes, their hex SHA-256 (computed once for every use) and their strict parse."""
    where = root / MANIFEST_NAME
    if MANIFEST_NAME not in tree.files:
        raise failure_at(FailureCode.MANIFEST_MISSING, "the release has no manifest.json", where)
    data = read_small(where, MAX_MANIFEST_BYTES, where=where, too_big=FailureCode.MANIFEST_INVALID)
    sha256 = sha256_hex(data)
    return data, sha256, parse_manifest(data, where=str(where), sha256=sha256)


def _check_manifest_paths(root: Path, manifest: Manifest) -> None:
    """Every listed path is safe, no two clash (duplicates, case, file-vs-directory), none is hidden or in
    ``__pycache__`` (names this project's own temporary files take), and each file has the media type its name
    gives it: what the packager writes (resources and step payloads serve a file as that type). These are the
    load-time safety rules, refused whenever a release loads; an editor's backup or a file browser's file is a
    build-time hygiene rule (``is_leftover_name``, the packager's), so a release signed before it loads."""
    where = root / MANIFEST_NAME
    paths = manifest.paths
    _refuse_listed(where, paths)
    clash = path_set_problem(paths)
    if clash is not None:
        raise failure_at(FailureCode.PATH_UNSAFE, f"lists path {clash[0]!r} which {clash[1]}", where)
    if list(map(_MEDIA_TYPE, manifest.files)) != list(map(media_type_for, paths)):
        entry = next(e for e in manifest.files if e.media_type != media_type_for(e.path))
        raise failure_at(
            FailureCode.MANIFEST_INVALID,
            f"lists {entry.path!r} as {entry.media_type}; a file of that name is {media_type_for(entry.path)}",
            where,
        )


"""At most this many unsafe or hidden listed paths, or files failing their digests, are said, each its own
failure (a listing of thousands is one mistake made thousands of times, and every failure is said in a log
line)."""


def _refuse_listed(where: Path, paths: Sequence[str]) -> None:
    """Refuse every listed path that is unsafe or hidden: one failure per path (the first raised, the others in
    ``also``), so an operator sees each, not the first of several."""
    unsafe = unsafe_paths(paths)
    named = {path for path, _ in unsafe}
    found = [(path, f"lists unsafe path {path!r}: {problem}") for path, problem in unsafe]
    found += [(path, f"lists path {path!r}: {HIDDEN_PROBLEM}") for path in hidden_paths(paths) if path not in named]
    failures = [
        ReleaseVerificationError(FailureCode.PATH_UNSAFE, said, path=str(where), details={"listed": path})
        for path, said in found[:MAX_SAID_FAILURES]
    ]
    if failures:
        raise collected(failures)


def _check_release_name(root: Path, manifest: Manifest) -> None:
    """A directory named like a release (``<catalogue>-<version>``) holds exactly that release.

    Operators, ``make`` and the server's refresh pick releases by directory
    name, so an older release copied under a newer name (rollback) or another
    catalogue's release under this one's name (mix-and-match) is refused even
    though its signatures verify. Names that claim nothing (a staging copy, the
    packager's build directory) are not checked.
    """
    name, identity = root.name, manifest.release
    if name == identity.directory_name or name.startswith("."):  # (a hidden name claims nothing)
        return
    from rimthan_workflow_registry.release.dir_name import RELEASE_DIR_NAME  # never for a build's self-check

    if not RELEASE_DIR_NAME.fullmatch(name):
        return
    where = root / MANIFEST_NAME
    prefix = identity.catalogue + "-"
    claimed = name[len(prefix) :] if name.startswith(prefix) else None
    if claimed is not None and is_semver(claimed) and semver_key(identity.version) < semver_key(claimed):
        raise failure_at(
            FailureCode.ROLLBACK_REFUSED,
            f"the directory is named for {identity.catalogue}@{claimed} but holds the older {identity.id}",
            where,
        )
    raise ReleaseVerificationError(
        FailureCode.MANIFEST_INVALID,
        f"the directory is named {name!r} but holds {identity.id}; a release is published only as "
        f"{identity.directory_name!r}",
        path=str(where),
        next_step=f"if this copy is meant to be {identity.id}, name it so (`mv {shell_word(root)} "
        f"{shell_word(root.parent / identity.directory_name)}`); nothing in it needs rebuilding",
    )


def _check_checksums(root: Path, tree: ReleaseTree, manifest: Manifest) -> None:
    """SHA256SUMS is exactly the rendering derived from the manifest."""
    where = root / CHECKSUMS_NAME
    if CHECKSUMS_NAME not in tree.files:
        raise failure_at(FailureCode.CHECKSUMS_MISMATCH, "the release has no SHA256SUMS file", where)
    expected = render_checksums(manifest)
    data = read_small(where, len(expected), where=where, too_big=FailureCode.CHECKSUMS_MISMATCH)
    if data != expected:
        raise failure_at(
            FailureCode.CHECKSUMS_MISMATCH, "does not match the checksums derived from the manifest", where
        )


def _check_files(root: Path, tree: ReleaseTree, manifest: Manifest) -> None:
    """Every listed file exists with its exact size and SHA-256 (hashed, not kept: memory stays flat).

    Files are checked in batches. When they are large enough to pay for
    threads (:func:`verify_threads`) and the walk found every one, this thread
    reads them and a second one hashes (:mod:`.file_pipeline`); otherwise the
    batches go to :func:`failures_in_order`. Either way the failures are said
    in manifest order, so the answer never depends on which thread finished
    first: every file whose digest is not listed (one failure each, at most
    ``MAX_SAID_FAILURES``, collected as the files are checked, no second
    pass) up to the first other failure (missing, wrong type or size), which
    ends the check.
    """
    base = str(root / CATALOGUE_DIR)
    files = manifest.files
    batches = _batches(files)
    stop = current_stop()  # a stopping server (oci_stop): no batch is read once it is asked, on any thread

    def check(batch: Sequence[FileEntry]) -> list[ReleaseVerificationError]:
        stopped_by(stop, VERIFYING)
        if tree.catalogue.issuperset(map(_PATH, batch)):  # every file walked: no per-file membership test
            return check_files(base, batch)
        found: list[ReleaseVerificationError] = []
        for entry in batch:
            try:
                _check_file(base, tree.catalogue, entry)
            except ReleaseVerificationError as exc:
                found.append(exc)
                if stops_file_check(exc):
                    break
        return found

    workers = verify_threads(len(files), manifest.total_size)
    if workers > 1 and tree.catalogue.issuperset(manifest.paths):
        from rimthan_workflow_registry.release.file_pipeline import file_failures  # large releases only

        failures = file_failures(base, batches)  # one thread reads, another hashes
    else:
        failures = failures_in_order(check, batches, workers, stops=stops_file_check, keep=MAX_SAID_FAILURES)
    if failures:
        raise _with_collected(failures)


def _with_collected(failures: Sequence[BaseException]) -> BaseException:
    """The first of ``failures`` with the others (at most ``MAX_SAID_FAILURES`` in all) in its ``also``.

    An exception that is no refusal (an interrupt, a crash on a thread) stops the check, so it ends the list: it
    is raised as it is, never hidden behind the digest mismatches found before it."""
    last = failures[-1]
    if not isinstance(last, RegistryError):
        return last
    return collected([f for f in failures if isinstance(f, RegistryError)])


def _batches(files: Sequence[FileEntry]) -> list[Sequence[FileEntry]]:
    """``files`` in order, in batches of ``_HASH_BATCH`` files or about ``_HASH_BATCH_BYTES`` (what is read at once)."""
    batches: list[Sequence[FileEntry]] = []
    start = held = 0
    for end, entry in enumerate(files, start=1):
        held += entry.size
        if end - start >= _HASH_BATCH or held >= _HASH_BATCH_BYTES:
            batches.append(files[start:end])
            start, held = end, 0
    if start < len(files):
        batches.append(files[start:])
    return batches


def _check_file(base: str, present: set[str], entry: FileEntry) -> None:
    """One listed file: walked, then its type, link count, size and bytes (paths built as strings)."""
    where = f"{base}/{entry.path}"
    if entry.path not in present:
        raise failure_at(FailureCode.FILE_MISSING, "listed in the manifest but missing", where)
    check_file(where, entry, where=where)


def _check_unlisted(root: Path, tree: ReleaseTree, manifest: Manifest) -> None:
    """Nothing under catalogue/ that the manifest does not list (empty directories included)."""
    unlisted = tree.catalogue.difference(manifest.paths)
    if unlisted:
        raise failure_at(
            FailureCode.FILE_UNLISTED, "present but not listed in the manifest", root / CATALOGUE_DIR / min(unlisted)
        )
    if tree.empty_dirs:  # every file beneath is listed (above): a directory with none holds no listed file
        raise failure_at(FailureCode.FILE_UNLISTED, "directory holds no listed file", root / min(tree.empty_dirs))


def _check_scope(root: Path, manifest: Manifest, expected_profile: str | None, expected_scope: str | None) -> None:
    """The release is for the scope and profile the caller serves."""
    release = manifest.release
    where = root / MANIFEST_NAME
    if expected_profile is not None and release.scope_profile != expected_profile:
        raise failure_at(
            FailureCode.SCOPE_MISMATCH,
            f"release profile is {release.scope_profile!r}, expected {expected_profile!r}",
            where,
        )
    if expected_scope is not None and release.scope_name != expected_scope:
        raise failure_at(
            FailureCode.SCOPE_MISMATCH,
            f"release scope is {release.scope_name!r}, expected {expected_scope!r}",
            where,
        )


def load_catalogue(root: Path, files: CatalogueFiles) -> LoadedCatalogue:
    """The catalogue rules, via the same loader the packager builds with."""
    try:
        return ReleaseLoader.load(files)
    except ReleaseVerificationError:
        raise
    except RegistryError as exc:
        raise relocated(
            exc, lambda path: str(root / CATALOGUE_DIR / path) if path else str(root / CATALOGUE_DIR)
        ) from exc


def _check_manifest_matches_catalogue(root: Path, manifest: Manifest, loaded: LoadedCatalogue) -> None:
    """The signed identity says what the catalogue itself says."""
    catalogue = loaded.catalogue
    where = root / MANIFEST_NAME
    checks = (
        ("release identity", manifest.release, identity_for(catalogue, manifest.release.created)),
        ("workflows", manifest.workflows, workflow_entries(catalogue)),
        ("host adapters", manifest.host_adapters, adapter_entries(catalogue)),
    )
    for what, signed, actual in checks:
        if signed != actual:
            raise failure_at(
                FailureCode.MANIFEST_INVALID,
                f"{what} in the manifest differ from catalogue.toml ({signed!r} != {actual!r})",
                where,
            )
