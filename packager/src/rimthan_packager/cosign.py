"""Co-signing: one more signature added to a release that exists (k-of-n), nothing else touched.

``sign_release`` checks the release first (files, manifest, catalogue, and
signatures when given a trust store), then writes the signature beside the
release and renames it into ``signatures/``: a verifier never sees a partial one.
"""

from __future__ import annotations

import os
from pathlib import Path

from rimthan_workflow_registry.errors import FailureCode, RegistryError
from rimthan_workflow_registry.release import SIGNATURES_DIR, TrustStore, inspect_release, signature_name
from rimthan_workflow_registry.remediation import local_io
from rimthan_workflow_registry.whole_writes import write_all

from .fsutil import fsync_dir, rename_no_replace
from .signing import SigningKey


def _signed_already(sig_path: Path) -> RegistryError:
    return RegistryError(
        FailureCode.DESTINATION_EXISTS,
        "this key has already signed the release",
        path=str(sig_path),
        next_step="nothing to do for this key; for k-of-n, have another trusted key holder run rimthan-pack sign",
    )


_NOT_SIGNED = "writing the signature, so the release was not signed"


def sign_release(release_dir: Path | str, key: SigningKey, *, trust: TrustStore | None = None) -> Path:
    """Add ``key``'s signature to an existing release without touching anything else.

    The release is checked first (files, manifest, catalogue; signatures too
    if ``trust`` is given, each trusted one must verify, though fewer than the
    threshold may be there yet) so a co-signer never signs something that does
    not match its manifest. The signature is written beside the release and
    renamed into ``signatures/`` atomically, so a verifier never sees a
    partial signature file.
    """
    root = Path(release_dir)
    inspection = inspect_release(root, trust, require_threshold=False)  # the threshold is what co-signing collects
    sig_path = root / SIGNATURES_DIR / signature_name(key.key_id)
    if sig_path.exists() or sig_path.is_symlink():
        raise _signed_already(sig_path)
    manifest_bytes = inspection.manifest.to_bytes()
    signature = key.sign(manifest_bytes)
    key.public_key.verify(signature, manifest_bytes)
    import tempfile  # a co-signature only: a build does not pay for it

    with local_io(sig_path, _NOT_SIGNED):  # its temporary file beside the release is no path the user gave
        _make_signatures_dir(sig_path.parent)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{root.name}.sig-", dir=root.absolute().parent)
    tmp = Path(tmp_name)
    try:
        with local_io(sig_path, _NOT_SIGNED):  # a full disk names no file
            try:
                os.fchmod(fd, 0o644)
                write_all(fd, signature)
                os.fsync(fd)
            finally:
                os.close(fd)
        try:
            rename_no_replace(tmp, sig_path)
        except FileExistsError:
            raise _signed_already(sig_path) from None
        fsync_dir(sig_path.parent)
    finally:
        tmp.unlink(missing_ok=True)
    return sig_path


def _make_signatures_dir(directory: Path) -> None:
    """``signatures/`` of a release that lost it (it held no signature): made 0755, never through a link."""
    try:
        os.mkdir(directory, 0o755)
    except FileExistsError:
        return
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0))
    try:
        os.fchmod(fd, 0o755)  # not the umask's, as a build makes it
    finally:
        os.close(fd)
    fsync_dir(directory.parent)
