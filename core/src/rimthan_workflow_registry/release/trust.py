"""The trust store: which Ed25519 public keys may sign releases, and how many must.

Two forms, both accepted wherever ``--trust`` is:

* a **directory** of PEM ``*.pub`` files (SubjectPublicKeyInfo); threshold 1;
* a **TOML trust file** naming keys and a threshold (k of n)::

      threshold = 2
      [[keys]]
      name = "alice"
      file = "alice.pub"          # relative to the trust file
      id = "<sha256 hex>"         # optional; must match the key if given

A key id is the SHA-256 (hex) of the raw 32-byte public key, so anyone can
recompute it from the ``.pub`` file. Only public keys live here; this module
never touches private keys (signing lives in the packager).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from rimthan_workflow_registry import pem_keys
from rimthan_workflow_registry.canonical import SHA256_HEX_PATTERN, sha256_hex
from rimthan_workflow_registry.errors import FailureCode, TrustError, closest_name
from rimthan_workflow_registry.limits import MAX_TRUST_FILE_BYTES, parse_bounded_toml
from rimthan_workflow_registry.small_files import read_small_file

PUBLIC_KEY_SUFFIX = ".pub"
MAX_KEY_FILE_BYTES = 64 * 1024
_KEY_ID = re.compile(SHA256_HEX_PATTERN)  # fullmatch: "$" would also take a trailing newline
_TRUST_FILE_KEYS = {"threshold", "keys"}
_KEY_ENTRY_KEYS = {"name", "file", "id"}
_TRUST_FILE_SHAPE = (
    'write threshold = K and one [[keys]] table per signer: name = "WHO", file = "WHO.pub" (keys/README.md)'
)


def key_id_for(public_key: Ed25519PublicKey) -> str:
    """SHA-256 hex of the raw 32-byte Ed25519 public key."""
    raw = public_key.public_bytes(pem_keys.Encoding.Raw, pem_keys.PublicFormat.Raw)
    return sha256_hex(raw)


def public_key_pem(public_key: Ed25519PublicKey) -> bytes:
    """PEM SubjectPublicKeyInfo bytes (what ``openssl pkeyutl -pubin`` reads)."""
    return public_key.public_bytes(pem_keys.Encoding.PEM, pem_keys.PublicFormat.SubjectPublicKeyInfo)


def _parse_public_key_pem(data: bytes, *, where: str) -> Ed25519PublicKey:
    """An Ed25519 public key from PEM SubjectPublicKeyInfo bytes."""
    try:
        key = pem_keys.load_pem_public_key(data)
    except pem_keys.KEY_LOAD_ERRORS as exc:
        raise TrustError(FailureCode.KEY_INVALID, f"not a PEM public key: {exc}", path=where) from None
    if not isinstance(key, Ed25519PublicKey):
        raise TrustError(FailureCode.KEY_INVALID, f"not an Ed25519 key ({type(key).__name__})", path=where)
    return key


def _load_public_key(path: Path) -> Ed25519PublicKey:
    try:
        data = read_small_file(path, MAX_KEY_FILE_BYTES)
    except OSError as exc:
        raise TrustError(FailureCode.KEY_INVALID, f"cannot read public key: {exc.strerror}", path=str(path)) from None
    if len(data) > MAX_KEY_FILE_BYTES:
        raise TrustError(FailureCode.KEY_INVALID, "file is too large to be a public key", path=str(path))
    return _parse_public_key_pem(data, where=str(path))


@dataclass(frozen=True)
class TrustStore:
    """Trusted keys by key id, the signature threshold, and where they came from.

    ``names`` maps key ids to operator-facing names (the trust file's ``name``
    or the ``.pub`` file's stem), for messages only.
    """

    keys: Mapping[str, Ed25519PublicKey]
    threshold: int
    source: str
    names: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "keys", MappingProxyType(dict(self.keys)))
        object.__setattr__(self, "names", MappingProxyType(dict(self.names)))
        if not self.keys:
            raise TrustError(
                FailureCode.TRUST_STORE_INVALID,
                "the trust store holds no keys",
                path=self.source,
                next_step=f"add each signer's .pub to {self.source} (keys/README.md, Add a key)",
            )
        if not 1 <= self.threshold <= len(self.keys):
            raise TrustError(
                FailureCode.TRUST_STORE_INVALID,
                f"threshold {self.threshold} must be between 1 and the number of keys ({len(self.keys)})",
                path=self.source,
                next_step=f"in {self.source}, set threshold to at most {len(self.keys)}, or add the "
                f"{self.threshold - len(self.keys)} more signer key(s) it counts on as [[keys]] (keys/README.md)"
                if self.threshold > len(self.keys)
                else f"in {self.source}, set threshold to 1 or more: how many signatures a release needs",
            )

    @classmethod
    def from_public_keys(
        cls, keys: list[Ed25519PublicKey], *, threshold: int | None = None, source: str = "<keys>"
    ) -> TrustStore:
        """A store trusting exactly ``keys`` (threshold: all of them unless given)."""
        by_id = {key_id_for(k): k for k in keys}
        return cls(keys=by_id, threshold=len(by_id) if threshold is None else threshold, source=source)

    def describe(self, key_id: str) -> str:
        name = self.names.get(key_id)
        return f"{name} ({key_id[:16]}…)" if name else key_id


def load_trust(path: Path | str) -> TrustStore:
    """Load a trust directory (``*.pub``, threshold 1) or a TOML trust file."""
    path = Path(path)
    if path.is_dir():
        return _load_trust_directory(path)
    if path.is_file():
        return _load_trust_file(path)
    nothing = f"nothing is at {path}{_near(path)}"
    point = "point --trust at a directory of *.pub files or a TOML trust file (keys/README.md)"
    raise _trust_error(path, "no trust directory or trust file here", f"{point}: {nothing}")


def _near(path: Path) -> str:
    """What is next to a --trust path that is not there: the trust stores beside it, or that its folder is missing."""
    parent = path.parent
    if not parent.is_dir():
        return f" (no folder {parent} either)"
    try:
        beside = sorted(e.name for e in parent.iterdir() if _may_be_trust(e))[:5]
    except OSError:  # a folder this user cannot list: the path alone is said
        return ""
    return f"; beside it: {', '.join(beside)}" if beside else ""


def _may_be_trust(entry: Path) -> bool:
    """A TOML file, or a directory holding a ``.pub``: what --trust may have meant."""
    if entry.suffix == ".toml":
        return entry.is_file()
    return entry.is_dir() and any(entry.glob(f"*{PUBLIC_KEY_SUFFIX}"))


def _load_trust_directory(directory: Path) -> TrustStore:
    keys: dict[str, Ed25519PublicKey] = {}
    names: dict[str, str] = {}
    for entry in sorted(directory.iterdir()):
        if entry.suffix != PUBLIC_KEY_SUFFIX or not entry.is_file():
            continue
        key = _load_public_key(entry)
        key_id = key_id_for(key)
        keys[key_id] = key
        names.setdefault(key_id, entry.stem)
    if not keys:
        raise TrustError(
            FailureCode.TRUST_STORE_INVALID,
            "the directory holds no *.pub public keys",
            path=str(directory),
            next_step=_no_pub_step(directory),
        )
    return TrustStore(keys=keys, threshold=1, source=str(directory), names=names)


def _no_pub_step(directory: Path) -> str:
    """What to put in a trust directory with no ``.pub``; a private key found there is said first."""
    private = sorted(e.name for e in directory.iterdir() if e.suffix == ".key")
    put = (
        f"put each signer's PREFIX.pub (what rimthan-pack keygen --out PREFIX wrote) into {directory}, or point "
        "--trust at the directory that holds them"
    )
    if private:
        keys = ", ".join(private)
        return f"move the private key(s) {keys} out of {directory} (trust holds public keys only), then {put}"
    return put


def _trust_error(path: Path, message: str, next_step: str) -> TrustError:
    return TrustError(FailureCode.TRUST_STORE_INVALID, message, path=str(path), next_step=next_step)


def _unknown_keys(path: Path, where: str, unknown: set[str], known: set[str]) -> TrustError:
    """Keys a trust file's table does not take: the ones it does, and the rename when one is a misspelling."""
    takes = ", ".join(repr(k) for k in sorted(known))
    renames = [f"{k!r} to {meant!r}" for k in sorted(unknown) if (meant := closest_name(k, known))]
    return _trust_error(
        path,
        f"{where + ': ' if where else ''}unknown key(s) {', '.join(sorted(unknown))} (it takes {takes})",
        f"in {path}, rename {', '.join(renames)} (keys/README.md)"
        if renames
        else f"in {path}, remove {', '.join(sorted(unknown))} (keys/README.md)",
    )


def _parse_trust_file(path: Path) -> dict[str, Any]:
    """The trust file's TOML within the size and nesting limits (``rimthan_workflow_registry.limits``).

    It is operator input, but a hand-edited or generated file may still be
    hostile or broken: a bound gives a one-line refusal where tomllib's
    recursion (or the walk after it) would raise ``RecursionError``.
    """
    try:
        raw = read_small_file(path, MAX_TRUST_FILE_BYTES)
    except OSError as exc:
        raise _trust_error(
            path,
            f"not a readable TOML trust file: {exc.strerror}",
            f"make {path} a regular file this user can read, or point --trust at the trust store you meant",
        ) from None
    if len(raw) > MAX_TRUST_FILE_BYTES:
        raise _trust_error(
            path,
            f"the trust file is over {MAX_TRUST_FILE_BYTES} bytes",
            f"keep {path} to its [[keys]] tables: a trust file names .pub files, it does not hold them",
        )
    if raw.lstrip().startswith(b"-----BEGIN "):
        raise _pem_given(path, raw)
    return parse_bounded_toml(
        raw,
        lambda message, step: _trust_error(path, message, step or f"in {path}, {_TRUST_FILE_SHAPE}"),
        unreadable="not a readable TOML trust file",
        name=str(path),
    )


def _pem_given(path: Path, raw: bytes) -> TrustError:
    """A PEM key passed as --trust: its "TOML syntax" is not what to fix."""
    if b"PRIVATE KEY-----" in raw.lstrip().split(b"\n", 1)[0]:
        return _trust_error(
            path,
            "is a private key, not a trust store (trust holds public keys only)",
            "point --trust at a directory of *.pub files or a TOML trust file (keys/README.md); a .key never goes "
            "there",
        )
    return _trust_error(
        path,
        "is one public key, not a trust store: --trust takes a directory of *.pub files or a TOML trust file",
        "put the .pub in a directory of its own and pass that directory, or name it in a TOML trust file "
        "(keys/README.md)",
    )


def _load_trust_file(path: Path) -> TrustStore:
    data = _parse_trust_file(path)
    unknown = set(data) - _TRUST_FILE_KEYS
    if unknown:
        raise _unknown_keys(path, "", unknown, _TRUST_FILE_KEYS)
    threshold = data.get("threshold", 1)
    if not isinstance(threshold, int) or isinstance(threshold, bool):
        raise _trust_error(
            path, "threshold must be an integer", f"in {path}, write threshold as a whole number, e.g. threshold = 2"
        )
    entries = data.get("keys", [])
    if not isinstance(entries, list) or not entries:
        raise _trust_error(path, "the trust file names no [[keys]]", f"in {path}, {_TRUST_FILE_SHAPE}")
    keys: dict[str, Ed25519PublicKey] = {}
    names: dict[str, str] = {}
    for index, entry in enumerate(entries):
        key_id, key, name = _load_trust_entry(path, index, entry)
        if key_id in keys:
            raise _trust_error(
                path,
                f"keys[{index}] ({name}) repeats key {key_id} already named {names[key_id]}",
                f"in {path}, remove keys[{index}], or point its file at {name}'s own .pub (each signer has a key)",
            )
        if name in names.values():
            raise _trust_error(
                path, f"keys[{index}]: name {name!r} is used twice", f"in {path}, give keys[{index}] a name of its own"
            )
        keys[key_id] = key
        names[key_id] = name
    return TrustStore(keys=keys, threshold=threshold, source=str(path), names=names)


def _load_trust_entry(path: Path, index: int, entry: Any) -> tuple[str, Ed25519PublicKey, str]:
    where = f"keys[{index}]"
    if not isinstance(entry, dict):
        raise _trust_error(path, f"{where} must be a table", f"in {path}, {_TRUST_FILE_SHAPE}")
    unknown = set(entry) - _KEY_ENTRY_KEYS
    if unknown:
        raise _unknown_keys(path, where, unknown, _KEY_ENTRY_KEYS)
    name, file, declared = entry.get("name"), entry.get("file"), entry.get("id")
    if not isinstance(name, str) or not name:
        raise _trust_error(
            path,
            f"{where}.name must be a non-empty string",
            f'in {path}, give {where} name = "WHO" (who holds the key)',
        )
    if not isinstance(file, str) or not file or "\0" in file:  # no file name holds NUL (open() raises ValueError)
        raise _trust_error(
            path,
            f"{where}.file must name a .pub file",
            f'in {path}, set {where}.file = "NAME.pub": the signer\'s public key, relative to {path.parent}',
        )
    key = _load_public_key(path.parent / file)
    key_id = key_id_for(key)
    if declared is not None:
        if not isinstance(declared, str) or not _KEY_ID.fullmatch(declared):
            raise _trust_error(
                path,
                f"{where}.id must be 64 lowercase hex characters",
                f"in {path}, set {where}.id to the key id rimthan-pack keygen printed for {file} ({key_id}, if "
                f"{file} is {name}'s key), or remove it",
            )
        if declared != key_id:
            raise _id_mismatch(path, where, file, name, declared, key_id)
    return key_id, key, name


def _id_mismatch(path: Path, where: str, file: str, name: str, declared: str, key_id: str) -> TrustError:
    """A pinned ``id`` another key than the ``.pub`` file's: the file was swapped, or the id mistyped."""
    return _trust_error(
        path,
        f"{where}.id {declared} does not match {file} (its key id is {key_id})",
        f"confirm {name}'s key id with its holder (keys/README.md, Add a key): if it is {key_id}, set {where}.id "
        f"to it in {path}; if it is {declared}, {file} is not their key: replace it with the .pub they sent",
    )
