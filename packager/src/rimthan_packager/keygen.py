"""``rimthan-pack keygen``: write a new Ed25519 key pair, never over a file and never where git would track it.

Apart from :mod:`rimthan_packager.signing` (which loads keys and signs), so that a build, which never generates
a key, does not create :class:`GeneratedKey`: a frozen dataclass costs every process that defines it about 3.7 M
instructions (its generated methods compiled), 0.7% of a 1 MiB build.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from rimthan_workflow_registry import pem_keys
from rimthan_workflow_registry.errors import FailureCode, TrustError
from rimthan_workflow_registry.release import key_id_for, public_key_pem

from .fsutil import create_file, make_dirs
from .signing import PRIVATE_KEY_SUFFIX, PUBLIC_KEY_SUFFIX


def private_key_pem(key: Ed25519PrivateKey) -> bytes:
    return key.private_bytes(pem_keys.Encoding.PEM, pem_keys.PrivateFormat.PKCS8, pem_keys.NoEncryption())


def check_key_path_untracked(key_path: Path) -> None:
    """Refuse a private-key path that git tracks or would track (not ignored)."""
    from rimthan_workflow_registry.secret_paths import check_secret_path_untracked  # keygen's: it loads subprocess

    check_secret_path_untracked(key_path, what="this private key", error=TrustError)


@dataclass(frozen=True)
class GeneratedKey:
    """A key pair just written: where its two halves are and its key id."""

    private_path: Path
    public_path: Path
    key_id: str


def generate_keypair(prefix: Path | str, trust_dir: Path | None = None) -> GeneratedKey:
    """Write ``PREFIX.key`` (PKCS#8, mode 0600) and ``PREFIX.pub`` (SPKI), the public half into ``trust_dir`` instead
    if given (a trust directory: the private key stays out of it); never overwrite.

    Every folder made on the way to the private key is owner-only (0700), every one made for ``trust_dir`` writable
    by its owner only (0755: a key another user put there would be trusted), each set exactly, whatever the umask.
    """
    prefix = Path(prefix)
    private_path = prefix.with_name(prefix.name + PRIVATE_KEY_SUFFIX)
    public_path = (trust_dir or prefix.parent) / (prefix.name + PUBLIC_KEY_SUFFIX)
    for path in (private_path, public_path):
        if path.exists() or path.is_symlink():
            raise TrustError(
                FailureCode.DESTINATION_EXISTS, "already exists; keys are never overwritten", path=str(path)
            )
    check_key_path_untracked(private_path)
    key = Ed25519PrivateKey.generate()
    for made in make_dirs(private_path.parent, 0o700, parent_mode=0o700):
        os.chmod(made, 0o700)  # (exactly: a umask may only narrow mkdir's mode)
    for made in make_dirs(trust_dir, 0o755, parent_mode=0o755) if trust_dir is not None else ():
        os.chmod(made, 0o755)  # (no one else may write a trust directory: a key put there would be trusted)
    _write_new(private_path, private_key_pem(key), 0o600)
    try:
        _write_new(public_path, public_key_pem(key.public_key()), 0o644)
    except BaseException:
        private_path.unlink(missing_ok=True)
        raise
    return GeneratedKey(private_path=private_path, public_path=public_path, key_id=key_id_for(key.public_key()))


def _write_new(path: Path, data: bytes, mode: int) -> None:
    try:
        create_file(path, data, mode)
    except FileExistsError:
        raise TrustError(
            FailureCode.DESTINATION_EXISTS, "already exists; keys are never overwritten", path=str(path)
        ) from None
    except OSError as exc:
        if exc.filename:
            raise
        raise OSError(exc.errno, exc.strerror, str(path)) from None  # a full disk's write names no file: name it
