"""Re-reading the trust store on refresh (SIGHUP or ``--refresh-interval``).

Every refresh loads ``--trust`` again with the loader ``serve`` starts with,
so a key an operator removed stops vouching for new releases at the next
refresh, and a key an operator added starts to. A trust store that no longer
loads (a half-copied ``.pub``, a broken TOML file) never takes down what is
served: the one loaded before stays in force, one error line says so, and
the refresh reports it as a rejection.

A release already held is re-checked against a changed store by the
signatures that verified when it was loaded: it is still trusted when at
least the new threshold of them are by keys the new store holds, or when its
directory, verified again, is the same release and the new store vouches for
it (co-signed since it was loaded, as keys/README's rotation has it).

A release found untrusted (dropped, or an active one still served) is
remembered with its directory's look (``Distrusted``): co-signed only after
the key was removed (keys/README's rotation done in the other order), it is
verified again at the first refresh after its directory or its signatures
changed, and held and served as trusted again without a restart. A release
directory refused at load (or at a refresh) only because the store does not
vouch for its signatures is remembered by the digest of the manifest that
load read, named in its refusal (:meth:`Distrusted.found_on_disk`; never read
again), never held: after a restart a run pinned to it gets the same untrusted
refusal as before the restart, not "put it back". It is forgotten at the first
refresh after its directory left the releases directory, as is a release
dropped as untrusted (not one still served) whose directory did
(:meth:`Distrusted.forget_gone`, which reads a remembered manifest again only
when its stat changed): a run pinned to it is then told to put it back, as
for any release no longer there.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from rimthan_workflow_registry.canonical import digest_bytes
from rimthan_workflow_registry.errors import RegistryError
from rimthan_workflow_registry.release import (
    MANIFEST_NAME,
    MAX_MANIFEST_BYTES,
    TrustStore,
    load_trust,
    untrusted_manifest,
)
from rimthan_workflow_registry.small_files import read_small_file

from .file_looks import ReleaseLook, Stamp, release_look, stamp_of
from .loading import LoadedRelease, Rejection, load_release
from .logs import get_logger

_log = get_logger("trust")
TRUSTED_AGAIN = "release trusted again: co-signed (or its signer trusted again) since it was found untrusted"
KEPT_PREVIOUS = "the trust store loaded before stays in force until it loads again"


def reload_trust(path: Path, current: TrustStore) -> tuple[TrustStore, tuple[Rejection, ...]]:
    """The trust store at ``path`` as it is now, or ``current`` and the reason it did not load."""
    try:
        return load_trust(path), ()
    except RegistryError as exc:
        remedy = f"fix {path} (as `rimthan-mcp check --trust {path}` reads it), then refresh again"
        refused = Rejection(str(path), kept_previous(exc), remedy)
        _log.error("trust store not reloaded", extra={"path": str(path), "error": refused.error})
        return current, (refused,)


def kept_previous(exc: RegistryError) -> RegistryError:
    """``exc`` (the trust store's load failure) in the words of a refresh: the store loaded before stays."""
    return RegistryError(
        exc.code,
        f"{exc.message}; {KEPT_PREVIOUS}",
        path=exc.path,
        details=exc.details,
        next_step=exc.next_step,
        also=exc.also,
    )


def trust_changed(before: TrustStore, after: TrustStore) -> bool:
    return set(before.keys) != set(after.keys) or before.threshold != after.threshold


def still_trusted(loaded: LoadedRelease, trust: TrustStore) -> bool:
    """Whether the signatures that verified when ``loaded`` was loaded meet ``trust``'s threshold."""
    return sum(1 for key_id in loaded.release.signer_key_ids if key_id in trust.keys) >= trust.threshold


def report_untrusted(loaded: LoadedRelease, *, dropped: bool) -> None:
    """One error line naming a held release the trust store no longer vouches for."""
    if dropped:
        event, consequence = "release no longer trusted; dropped", "runs pinned to it get pinned_release_unavailable"
    else:
        event, consequence = (
            "active release no longer trusted; still served until restart",
            "publish a release signed by a trusted key (the next refresh activates it), or restart to stop serving it",
        )
    _log.error(
        event,
        extra={
            "release": loaded.release.release_id,
            "digest": loaded.digest,
            "path": str(loaded.release.root),
            "signers": list(loaded.release.signer_key_ids),
            "next": consequence,
        },
    )


def co_signed_again(
    loaded: LoadedRelease, trust: TrustStore, event: str = "release still trusted: co-signed since it was loaded"
) -> LoadedRelease | None:
    """``loaded``'s directory verified again under ``trust``, when it is the same release (the same manifest
    digest) that the store vouches for now: co-signed since it was loaded (keys/README "Rotate or remove a key":
    `rimthan-pack sign` in place, or a follower's pull of the co-signed push); else ``None``."""
    try:
        again = load_release(
            loaded.release.root, trust, loaded.keyring, loaded.factory, expected_scope=loaded.scope_name
        )
    except (RegistryError, OSError):  # not vouched for, changed or gone: the caller reports it as untrusted
        return None
    if again.digest != loaded.digest:
        return None
    _log.info(
        event,
        extra={"release": again.release.release_id, "signers": list(again.release.signer_key_ids)},
    )
    return again


@dataclass
class Distrusted:
    """Held releases the trust store stopped vouching for, each with how its directory looked then."""

    entries: dict[str, tuple[LoadedRelease, ReleaseLook]] = field(default_factory=dict)
    # manifest digests of directories refused as untrusted only, each with those directories
    on_disk: dict[str, set[Path]] = field(default_factory=dict)
    # the manifest of each directory remembered, as last read: its stamp then, and its digest (None: unreadable)
    manifests_read: dict[Path, tuple[Stamp, str | None]] = field(default_factory=dict)

    def remember(self, loaded: LoadedRelease) -> None:
        self.entries[loaded.digest] = (loaded, release_look(Path(loaded.release.root)))

    def found_on_disk(self, path: Path, failure: RegistryError) -> None:
        """Remember the release directory ``path`` refused with ``failure`` when the trust store's not vouching for
        its signatures is all that was found (never held: the refusal of a run pinned to it says so), by the
        manifest that load read (named in ``failure``; never read again)."""
        digest = untrusted_manifest(failure)
        if digest is not None:
            self.on_disk.setdefault(digest, set()).add(path)

    def forget_gone(self, serving: Collection[str] = ()) -> None:
        """Forget each release remembered whose directory no longer holds its manifest (deleted, or replaced by
        another release): one dropped as untrusted (:meth:`remember`; one still ``serving``, by digest, is kept:
        put back co-signed, it is trusted again), and each directory remembered by :meth:`found_on_disk` (each
        digest left with none). A manifest is read again only when its :class:`Stamp` changed."""
        for digest, (loaded, _look) in list(self.entries.items()):
            if digest not in serving and self._manifest_digest(Path(loaded.release.root)) != digest:
                del self.entries[digest]
        for digest, paths in list(self.on_disk.items()):
            kept = {path for path in paths if self._manifest_digest(path) == digest}
            if kept:
                self.on_disk[digest] = kept
            else:
                del self.on_disk[digest]
        remembered = {Path(loaded.release.root) for loaded, _look in self.entries.values()}
        remembered.update(*self.on_disk.values())
        self.manifests_read = {root: read for root, read in self.manifests_read.items() if root in remembered}

    def _manifest_digest(self, root: Path) -> str | None:
        """The digest of the manifest in the release directory ``root``, read again only when its stamp changed
        (a stamp taken before the read: a change during it is read at the next refresh); None when it is gone
        or cannot be read whole."""
        stamp = stamp_of(root / MANIFEST_NAME)
        if stamp is None:
            return None
        known = self.manifests_read.get(root)
        if known is not None and known[0] == stamp:
            return known[1]
        digest = _manifest_digest(root)
        self.manifests_read[root] = (stamp, digest)
        return digest

    def holds(self, digest: str) -> bool:
        """Whether the release with manifest digest ``digest`` was dropped (or is served) as untrusted, or was
        refused as untrusted in the releases directory."""
        return digest in self.entries or digest in self.on_disk

    def trusted_again(self, trust: TrustStore, *, changed: bool) -> list[LoadedRelease]:
        """Those that verify again under ``trust``, looked at when the store ``changed`` (a key put back) or their
        directory did (co-signed since, in place or by a follower's pull); forgotten then."""
        again: list[LoadedRelease] = []
        for digest, (loaded, look) in list(self.entries.items()):
            now = release_look(Path(loaded.release.root))
            if not changed and now == look:
                continue
            self.entries[digest] = (loaded, now)
            found = co_signed_again(loaded, trust, TRUSTED_AGAIN)
            if found is not None:
                del self.entries[digest]
                again.append(found)
        return again


def _manifest_digest(path: Path) -> str | None:
    """The digest of the manifest in the release directory ``path``; None when it cannot be read whole."""
    try:
        data = read_small_file(path / MANIFEST_NAME, MAX_MANIFEST_BYTES)
    except OSError:
        return None
    return digest_bytes(data) if len(data) <= MAX_MANIFEST_BYTES else None
