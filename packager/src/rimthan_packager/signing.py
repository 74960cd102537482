"""Ed25519 signing keys: load, sign (``keygen`` writes them: :mod:`rimthan_packager.keygen`).

Signing lives only in the packager; the server never imports this module and
never reads a private key. Private keys are PEM PKCS#8 files with mode 0600,
and ``keygen`` refuses to write one where git would track it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from rimthan_workflow_registry import pem_keys
from rimthan_workflow_registry.errors import FailureCode, TrustError
from rimthan_workflow_registry.key_file_modes import READ_BITS, key_file_exposure
from rimthan_workflow_registry.release import MAX_KEY_FILE_BYTES, key_id_for
from rimthan_workflow_registry.small_files import read_small_file

if TYPE_CHECKING:
    from rimthan_workflow_registry.key_file_warning import ExposureWarning, KeyFileExposure

PRIVATE_KEY_SUFFIX = ".key"
PUBLIC_KEY_SUFFIX = ".pub"


@dataclass(frozen=True, eq=False, repr=False)  # never compared, hashed or shown (test_build_dataclasses)
class SigningKey:
    """A loaded private key, its public half and key id, where it came from, and who else can read that file."""

    private_key: Ed25519PrivateKey
    source: str
    exposure: ExposureWarning | None = None

    @property
    def public_key(self) -> Ed25519PublicKey:
        return self.private_key.public_key()

    @property
    def key_id(self) -> str:
        return key_id_for(self.public_key)

    def sign(self, manifest_bytes: bytes) -> bytes:
        """Raw 64-byte Ed25519 signature (deterministic: same key + bytes = same signature)."""
        return self.private_key.sign(manifest_bytes)


def load_signing_key(path: Path | str) -> SigningKey:
    """Load a PEM PKCS#8 Ed25519 private key (unencrypted) from a regular file (a FIFO is refused, never waited on)."""
    path = Path(path)
    try:
        data = read_small_file(path, MAX_KEY_FILE_BYTES)
        exposed = key_file_exposure(path, READ_BITS)
    except OSError as exc:
        raise TrustError(
            FailureCode.KEY_INVALID,
            f"cannot read private key: {exc.strerror}",
            path=str(path),
            next_step=_unreadable_next(path),
        ) from None
    if len(data) > MAX_KEY_FILE_BYTES:
        raise TrustError(
            FailureCode.KEY_INVALID, "file is too large to be a private key", path=str(path), next_step=_KEY_NEXT
        )
    try:
        key = pem_keys.load_pem_private_key(data, password=None)
    except pem_keys.KEY_LOAD_ERRORS as exc:
        if _PUBLIC_PEM in data:
            raise TrustError(
                FailureCode.KEY_INVALID,
                "is a public key; --key takes the private half",
                path=str(path),
                next_step=_public_key_next(path),
            ) from None
        raise TrustError(
            FailureCode.KEY_INVALID, f"not an unencrypted PEM private key: {exc}", path=str(path), next_step=_KEY_NEXT
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise TrustError(
            FailureCode.KEY_INVALID, f"not an Ed25519 key ({type(key).__name__})", path=str(path), next_step=_KEY_NEXT
        )
    exposure = None if exposed is None else _exposure(path, key_id_for(key.public_key()), exposed)
    return SigningKey(private_key=key, source=str(path), exposure=exposure)


_PUBLIC_PEM = b"-----BEGIN PUBLIC KEY-----"
_KEY_NEXT = "pass the PREFIX.key that `rimthan-pack keygen --out PREFIX` wrote (PEM PKCS#8 Ed25519, unencrypted)"


def _public_key_next(path: Path) -> str:
    """A public key as --key: the private half keygen wrote beside it, unless this file already has that name."""
    private = path.with_suffix(PRIVATE_KEY_SUFFIX)
    if private == path:
        return (
            f"{path.name} holds a public key though it is named {PRIVATE_KEY_SUFFIX}: pass the private key, the "
            f"PREFIX{PRIVATE_KEY_SUFFIX} keygen wrote beside PREFIX{PUBLIC_KEY_SUFFIX} "
            "(PEM PKCS#8 Ed25519, unencrypted)"
        )
    return f"pass the private key keygen wrote beside it ({private})"


def _unreadable_next(path: Path) -> str:
    """A --key that names no file (the PREFIX given without its .key, or a key yet to be made) or a directory."""
    private = path.with_name(path.name + PRIVATE_KEY_SUFFIX)
    if not path.exists() and private.is_file():
        return f"pass the private key file itself: --key {private}"
    if path.is_dir():
        return f"--key takes a private key file, not a directory: pass one in it, --key {path / 'PREFIX.key'}"
    return "check the --key path, or make a key pair: rimthan-pack keygen --out PREFIX (then --key PREFIX.key)"


def _exposure(path: Path, key_id: str, exposed: KeyFileExposure) -> ExposureWarning:
    """What ``build`` and ``sign`` warn about a private key others can read (ssh's "UNPROTECTED PRIVATE KEY FILE")."""
    from rimthan_workflow_registry.key_file_warning import KeyFileKind, exposure_warning  # only for such a key

    return exposure_warning(exposed, KeyFileKind("private key", f"sign releases as key {key_id}", _KEYGEN, "signers"))


_KEYGEN = "rimthan-pack keygen writes keys"
