"""Following an OCI repository: ``rimthan-mcp serve --releases-from oci://HOST/REPOSITORY``.

Before start and before every refresh, the follower lists the repository's
version tags and pulls each tag whose OCI manifest it has not seen yet into
the releases directory, through the core's one pull path
(:func:`~rimthan_workflow_registry.release.oci.pull_release`: digests checked,
:func:`verify_release` run, version tag checked, then renamed into place).
The provider's ordinary refresh then activates the newest release under the
usual rules (activation floor, pinned runs keep their release).

A publish that does not verify never reaches the releases directory; it is
logged once, reported as a rejection of the refresh, and its manifest digest is not pulled again, under any
tag, until the trust store changes (:mod:`.follow_memory`; every
refresh re-reads ``--trust`` before the follower pulls, and hands it the
store: a key added may vouch for a publish refused before). Bytes the registry served other than the digests
name (``oci_blob_mismatch``) are no verdict on the publish: that tag is pulled again at each refresh, its refusal
said once, so a repaired registry is taken without a restart. A registry that cannot be reached, or a
releases directory that fills or turns read-only (``io_error``: nothing half-pulled is
ever renamed into place), is logged and the replica keeps serving what it holds (a registry
that stays unreachable, one that refuses our credentials (``oci_unauthorized``: its own line, with where
credentials come from), a pull that keeps failing, or a local file error escaping the sync, is warned of once
per kind, its end said in one info line: :mod:`.recurring`; at the start, with no release held yet, the warning
says ``nothing held to serve yet``, not that it serves what it holds); such a failure (of the sync, or a pull in
it) is carried into the refresh result (``sync_failed``) and ``GET /healthz``, with since when syncs fail; so is a
registry that breaks a bound of :mod:`~rimthan_workflow_registry.release.oci_bounds` (an answer too
large or too slow, a tag list that pages without end): a sync holds its lock
for at most ``SYNC_DEADLINE`` (plus one read timeout), then the next refresh
tries again. A server stopping (``SIGTERM``, Ctrl-C, or any other way: ``refresh_triggers.refresh_now``) ends the sync
under way at once (:meth:`RegistryFollower.stop`: :mod:`~rimthan_workflow_registry.release.oci_stop`), its
download, or the verification of it, abandoned and removed. The releases directory is the
follower's: a copy of a followed tag that no longer verifies (a file edited or deleted) is replaced by a verified
pull of that tag in one rename, with one warning line; at start every tag is pulled,
and while serving a tag is pulled again once its directory changed on disk
(:func:`fingerprint`). At start, the downloads a follower killed mid-pull left
are removed (:func:`sweep_stale_downloads`). A copy that verifies is never replaced, and a tag deleted in the
registry is never a rollback: its release is kept and served, with one warning (only a newer publish or
``--lower-floor`` moves a replica off it); a restarted follower says it of each copy held whose tag went while it
was down, at its first sync (:func:`~.follow_disk.untagged_copies`). A copy only the trust store no longer
vouches for (a key removed), replaced by a co-signed push, is said as that in an info line, not as damage.
Replicas following one repository converge on the same active release because they pull the same
bytes and apply the same rules.

This module starts a follower (:func:`start_following`: ``--releases-from`` parsed, the first sync, a start with
nothing held refused, saying why); the follower itself, one sync and what it remembers, is :mod:`.follower`.
"""

from __future__ import annotations

from pathlib import Path

from rimthan_workflow_registry.errors import FailureCode, RegistryError, refusal_line
from rimthan_workflow_registry.release import OciReference, load_trust, parse_reference
from rimthan_workflow_registry.remediation import next_step

from .follow_disk import sweep_stale_downloads
from .follower import CHECK_REGISTRY, RegistryFollower
from .last_sync import LAST_SYNC_FILE, LastSync
from .release_scan import scan_releases

__all__ = ["RegistryFollower", "start_following"]  # the follower is :mod:`.follower`'s, named here too


def start_following(
    reference: str, trust_path: Path, releases_dir: Path, plain_http: bool, state_dir: Path | None = None
) -> RegistryFollower:
    """Parse ``--releases-from``, and pull what the repository holds before the server picks its release.

    ``state_dir``: where the last good sync is kept across restarts (:mod:`.last_sync`)."""
    follower = RegistryFollower(_repository(reference), load_trust(trust_path), releases_dir, plain_http)
    if state_dir is not None:
        follower.last_sync = LastSync(state_dir / LAST_SYNC_FILE, str(follower.ref))
        follower._synced = follower.last_sync.read()
    if releases_dir.exists() and not releases_dir.is_dir():  # mkdir would say only "File exists"
        raise RegistryError(
            FailureCode.IO_ERROR,
            "is not a directory: a follower pulls its releases into a directory",
            path=str(releases_dir),
            next_step="give --releases-dir a directory (created if missing), or move that file away",
        )
    releases_dir.mkdir(parents=True, exist_ok=True)
    sweep_stale_downloads(releases_dir)
    follower.sync()  # a failure of it, with nothing held yet, is said so (NOTHING_HELD_YET)
    _nothing_held(follower)  # raises when nothing is held: its refusal says why nothing was pulled
    return follower


def _repository(reference: str) -> OciReference:
    """``--releases-from`` as a repository; one naming a tag or digest is refused, not followed as its repository."""
    follow = "--releases-from follows a repository (every version tag in it): write it as oci://HOST[:PORT]/REPOSITORY"
    try:
        ref = parse_reference(reference)
    except RegistryError as exc:
        raise RegistryError(exc.code, exc.message, path=exc.path, next_step=follow) from None
    if ref.tag is None and ref.digest is None:
        return ref
    raise RegistryError(
        FailureCode.OCI_REFERENCE_INVALID,
        f"names one release ({ref.digest or ref.tag}), but every version tag of the repository is followed",
        path=reference,
        next_step=f"{follow}; to serve one release, pull it (`rimthan-pack pull {reference} --trust ... --out DIR`) "
        "and serve it without --releases-from",
    )


def _nothing_held(follower: RegistryFollower) -> None:
    """Refuse the start when nothing is held to serve, saying why nothing was pulled (not "build a release")."""
    try:
        scan_releases(follower.releases_dir)
    except RegistryError:
        raise _nothing_pulled(follower) from None


def _nothing_pulled(follower: RegistryFollower) -> RegistryError:
    """What the first sync found: a registry not reached or failing, a pull that failed, refused tags, or none."""
    where, meanwhile = str(follower.ref), f"and {follower.releases_dir} holds no release to serve meanwhile"
    exc = follower.last_error or follower.pull_failure()
    if exc is not None:
        step = CHECK_REGISTRY if exc.code is FailureCode.OCI_REGISTRY_ERROR else next_step(exc)
        return RegistryError(
            exc.code,
            f"nothing could be pulled from {where} ({exc.message}) {meanwhile}",
            path=exc.path or where,
            details=exc.details,
            next_step=f"{step}; or put a release into --releases-dir (`rimthan-pack pull`)",
        )
    push = f"push a release to it (`rimthan-pack push RELEASE {where}:VERSION --trust KEYS`)"
    refused = follower.refused()
    if not refused:
        return RegistryError(
            FailureCode.RELEASE_NOT_FOUND,
            f"{where} has no version tag to pull (a tag named as its release's version: 1.2.0) {meanwhile}",
            path=where,
            next_step=f"{push}, or check the repository named in --releases-from",
        )
    why = "; ".join(refusal_line(r.failure.code, r.failure.path or r.path, r.failure.message) for r in refused[:_SAID])
    more = f"; and {len(refused) - _SAID} more" if len(refused) > _SAID else ""
    return RegistryError(
        FailureCode.RELEASE_NOT_FOUND,
        f"every version tag of {where} was refused ({why}{more}) {meanwhile}",
        path=where,
        next_step=f"{push} that verifies under --trust, or, if its signers' keys are missing from --trust, add "
        "them (keys/README.md) and start again",
    )


_SAID = 3  # refused tags quoted in a refusal to start; the log has every one
