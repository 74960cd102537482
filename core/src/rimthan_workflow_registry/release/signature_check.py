"""The signature step of a release's verification: enough distinct trusted keys signed the exact manifest bytes.

Each signature file is checked alone (its name, its size, then, for a trusted key, the signature itself), so
every one that fails is said, the first raised with the others in ``also``; the count of trusted signers is
judged only when none failed (a count over failed files would only echo them).
"""

from __future__ import annotations

from pathlib import Path

from cryptography.exceptions import InvalidSignature

from rimthan_workflow_registry.errors import FailureCode, RegistryError, ReleaseVerificationError, collected
from rimthan_workflow_registry.release.format import SIGNATURE_SIZE, SIGNATURES_DIR, key_id_from_signature_name
from rimthan_workflow_registry.release.tree_walk import ReleaseTree
from rimthan_workflow_registry.release.trust import TrustStore
from rimthan_workflow_registry.release.verified import failure_at, read_small

# A release refused for these alone is intact as far as its signatures go: the trust store does not vouch for it.
NOT_TRUSTED = frozenset({FailureCode.SIGNATURE_UNTRUSTED, FailureCode.SIGNATURE_THRESHOLD_NOT_MET})
# The ``details`` key of a ``NOT_TRUSTED`` refusal naming the digest of the manifest bytes the check read.
REFUSED_MANIFEST = "manifest_digest"


def check_signatures(
    root: Path,
    tree: ReleaseTree,
    manifest_bytes: bytes,
    trust: TrustStore,
    require_threshold: bool = True,
    *,
    manifest_digest: str,
) -> tuple[str, ...]:
    """Enough distinct trusted keys signed the exact manifest bytes (any number, without ``require_threshold``).

    A signature file is named by the key id it claims; a trusted key's
    signature that does not verify fails the release outright (fail closed).
    Signatures by keys the store does not know are ignored, never counted.
    Each signature file is checked alone, so every one that fails is said (the first raised, the others in
    ``also``); the count of trusted signers is judged only when none failed. A ``NOT_TRUSTED`` refusal names
    ``manifest_digest`` (the digest of ``manifest_bytes``) in its details (:func:`untrusted_manifest`).
    """
    sig_dir = root / SIGNATURES_DIR
    names = tree.under(SIGNATURES_DIR)
    if not names and require_threshold:
        raise failure_at(FailureCode.SIGNATURE_MISSING, "the release carries no signatures", sig_dir)
    valid: list[str] = []
    untrusted: list[str] = []
    failures: list[ReleaseVerificationError] = []
    for rel in names:
        try:
            key_id, trusted = _check_signature(root / rel, tree.files[rel].st_size, manifest_bytes, trust)
        except ReleaseVerificationError as exc:
            failures.append(exc)
            continue
        (valid if trusted else untrusted).append(key_id)
    if failures:
        raise collected(failures)
    signers = len(set(valid))  # one file per key id (names are matched whole); distinct keys all the same
    if signers >= trust.threshold or not require_threshold:
        return tuple(valid)
    if not valid:
        raise _not_trusted(
            FailureCode.SIGNATURE_UNTRUSTED,
            f"signed only by key(s) the trust store {trust.source} does not trust: {', '.join(untrusted)}",
            sig_dir,
            manifest_digest,
        )
    raise _not_trusted(
        FailureCode.SIGNATURE_THRESHOLD_NOT_MET,
        f"{signers} valid trusted signature(s), the trust store {trust.source} requires {trust.threshold}",
        sig_dir,
        manifest_digest,
    )


def _not_trusted(code: FailureCode, message: str, where: Path, manifest_digest: str) -> ReleaseVerificationError:
    return ReleaseVerificationError(code, message, path=str(where), details={REFUSED_MANIFEST: manifest_digest})


def untrusted_manifest(failure: RegistryError) -> str | None:
    """The digest of the manifest a release's check read, when the trust store's not vouching for its signatures
    (``NOT_TRUSTED``) is all that ``failure`` holds (itself and every failure collected with it); else None."""
    if any(each.code not in NOT_TRUSTED for each in failure.failures):
        return None
    digest = failure.details.get(REFUSED_MANIFEST)
    return digest if isinstance(digest, str) else None


def _check_signature(where: Path, size: int, manifest_bytes: bytes, trust: TrustStore) -> tuple[str, bool]:
    """The key id one signature file claims, and whether that key is trusted (then its signature verified)."""
    key_id = key_id_from_signature_name(where.name)
    if key_id is None:
        raise ReleaseVerificationError(
            FailureCode.SIGNATURE_INVALID,
            "signature files must be named <key id>.sig (64 lowercase hex characters)",
            path=str(where),
            next_step=f"{SIGNATURES_DIR}/ holds nothing but signatures: a file named otherwise (an editor's "
            "backup, a copy) was added after signing; rebuild the release, or fetch it again, not edited",
        )
    if size != SIGNATURE_SIZE:
        raise failure_at(
            FailureCode.SIGNATURE_INVALID, f"is {size} bytes, an Ed25519 signature is {SIGNATURE_SIZE}", where
        )
    key = trust.keys.get(key_id)
    if key is None:
        return key_id, False
    signature = read_small(where, SIGNATURE_SIZE, where=where, too_big=FailureCode.SIGNATURE_INVALID)
    try:
        key.verify(signature, manifest_bytes)
    except InvalidSignature:
        raise failure_at(
            FailureCode.SIGNATURE_INVALID,
            f"does not verify the manifest with trusted key {trust.describe(key_id)}",
            where,
        ) from None
    return key_id, True
