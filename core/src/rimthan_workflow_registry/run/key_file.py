"""The checkpoint key file: its JSON document, read strictly, written whole with mode 0600, created once when absent.

:class:`~rimthan_workflow_registry.run.tokens.CheckpointKeyring` holds the
keys; this module says what the file's JSON holds (:func:`parse_key_document`
refuses anything but what :func:`key_document` writes: a repeated id, a
short key, two ids holding one key, a misspelt member, a signing key that is
also retired) and moves that JSON to and from a file. A read is bounded (a
FIFO is refused, never waited on) and
strict (a repeated key, NaN or 1e999 is refused), and every failure is
``key_invalid`` naming the file and what to do, or ``io_error`` when the OS
refused access: the right keys behind the wrong owner or mode, where new keys
would lose every run the old ones signed. A write goes to a temporary file
beside the target, is fsynced and renamed over it, so the file is whole, old
or new; a symlinked key file is written at its target (replicas sharing the
target stay on one set of keys). ``exclusive`` (a state directory's first
start) links the temporary file into place instead, which fails if another
process put its file there first: replicas starting together on one fresh
state directory then all load the one file.
"""

from __future__ import annotations

import base64
import errno
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from rimthan_workflow_registry.errors import FailureCode, KeyringError, RegistryError
from rimthan_workflow_registry.small_files import read_small_file
from rimthan_workflow_registry.strict_json import parse_strict_json

MAX_KEYRING_FILE_BYTES = 1024 * 1024  # ~10,000 keys as save() writes them; a key file is read whole
_KEYRING_NEXT = (
    "pass the --checkpoint-keys (or --state-dir) of the server that issued the runs, or create new keys with "
    "`rimthan-mcp keys rotate`"
)
_NO_HARD_LINKS = frozenset({errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS})
Keys = TypeVar("Keys")
KEY_BYTES = 32
KEYRING_FORMAT = "rimthan.checkpoint-keys/1"
_FILE_MEMBERS = frozenset({"format", "signing_key_id", "keys", "retired", "archived"})  # what key_document writes
_ENTRY_MEMBERS = frozenset({"id", "key"})


@dataclass(frozen=True)
class KeyDocument:
    """What a key file holds: the signing key id, the live keys, the retired ids, the archived keys (audit only)."""

    signing_key_id: str
    keys: Mapping[str, bytes]
    retired: frozenset[str]
    archived: Mapping[str, bytes]


def key_document(keys: KeyDocument) -> dict[str, Any]:
    """The key file's JSON, as :func:`parse_key_document` reads it."""
    return {
        "format": KEYRING_FORMAT,
        "signing_key_id": keys.signing_key_id,
        "keys": [{"id": k, "key": base64.b64encode(v).decode()} for k, v in sorted(keys.keys.items())],
        "retired": sorted(keys.retired),
        "archived": [{"id": k, "key": base64.b64encode(v).decode()} for k, v in sorted(keys.archived.items())],
    }


def parse_key_document(raw: Any) -> KeyDocument:
    """The key file's JSON as :func:`key_document` writes it; anything else raises (``read_key_file`` names it)."""
    if not isinstance(raw, dict) or raw.get("format") != KEYRING_FORMAT:
        raise _newer_key_file(raw) or ValueError(f"format is not {KEYRING_FORMAT}")
    if unknown := sorted(set(raw) - _FILE_MEMBERS):  # a misspelt "retired" would leave its keys live
        raise ValueError(f"unknown member(s) {', '.join(map(repr, unknown))}")
    keys, archived = _key_list(raw["keys"], "keys"), _key_list(raw.get("archived", []), "archived")
    retired = raw.get("retired", [])
    if not isinstance(retired, list) or not all(_is_key_id(k) for k in retired):
        raise ValueError("retired is not a list of key ids")
    signing = raw["signing_key_id"]
    if not _is_key_id(signing):
        raise ValueError(f"signing_key_id {signing!r} is not a key id")
    if both := sorted(set(keys) & (set(retired) | set(archived))):
        raise ValueError(f"key {both[0]!r} is listed both as live and as retired")
    _one_id_per_key({**archived, **keys}.items())
    return KeyDocument(signing, keys, frozenset(retired) | frozenset(archived), archived)


_KEY_ID = re.compile(r"[\x21-\x7e]{1,128}")


def _newer_key_file(raw: Any) -> KeyringError | None:
    """A key file a newer version wrote: ``key_invalid`` saying so, never advising new keys (or a rewrite)."""
    from rimthan_workflow_registry.state_formats import ROLLBACK_NEXT, newer_format  # only for a file not ours

    newer = newer_format(raw.get("format"), KEYRING_FORMAT) if isinstance(raw, dict) else None
    if newer is None:
        return None
    return KeyringError(
        FailureCode.KEY_INVALID,
        f"cannot read checkpoint keys: {newer.reason()}",
        next_step=f"{ROLLBACK_NEXT}; do not create new keys: the runs these keys signed would be refused",
    )


def _is_key_id(value: Any) -> bool:
    """A key id as the file holds it: visible ASCII, no space (``keys list`` prints one per line)."""
    return isinstance(value, str) and _KEY_ID.fullmatch(value) is not None


def _key_list(entries: Any, member: str) -> dict[str, bytes]:
    """``[{"id": ..., "key": <base64>}, ...]`` by id; a repeated id or anything else is refused."""
    if not isinstance(entries, list):
        raise ValueError(f"{member} is not a list")
    keys: dict[str, bytes] = {}
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict) or set(entry) != _ENTRY_MEMBERS:
            raise ValueError(f"{member}[{index}] is not an object of exactly an id and a key")
        kid, key = entry["id"], entry["key"]
        if not _is_key_id(kid) or not isinstance(key, str):
            raise ValueError(f"{member}: an entry's id is not a key id or its key is not base64 text")
        if kid in keys:
            raise ValueError(f"{member}: key id {kid!r} is listed twice")
        keys[kid] = _key_bytes(key, member, kid)
        if len(keys[kid]) < KEY_BYTES:  # archived keys too: audit verifies with them
            raise ValueError(f"{member}: key {kid!r} is shorter than {KEY_BYTES} bytes")
    return keys


def _one_id_per_key(entries: Iterable[tuple[str, bytes]]) -> None:
    """``key_invalid`` when two ids (live or archived) hold the same key: retiring one would leave it verifying
    under the other, so a retired (leaked) key would still sign and verify runs."""
    ids: dict[bytes, str] = {}
    for kid, key in entries:
        if key in ids:
            raise KeyringError(
                FailureCode.KEY_INVALID,
                f"key ids {ids[key]!r} and {kid!r} hold the same key: retiring one would leave it live under the other",
                next_step=f"remove the copied entry ({kid!r} or {ids[key]!r}) from the key file: each id needs a key "
                "of its own (`rimthan-mcp keys add` makes one)",
            )
        ids[key] = kid


def _key_bytes(text: str, member: str, kid: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except ValueError as exc:  # binascii.Error: bad padding, a character outside base64
        raise ValueError(f"{member}: key {kid!r} is not base64 ({exc})") from None


def read_key_file(path: Path, parse: Callable[[Any], Keys]) -> Keys:
    """``parse`` of the file's JSON; what it raises (``KeyringError``, ``ValueError``, ``KeyError``,
    ``TypeError``) and what reading raises become one ``KeyringError`` naming the file."""
    try:
        data = read_small_file(path, MAX_KEYRING_FILE_BYTES)  # a FIFO is refused, never waited on
        if len(data) > MAX_KEYRING_FILE_BYTES:
            raise ValueError(f"the file is over {MAX_KEYRING_FILE_BYTES} bytes")
        return parse(parse_strict_json(data, where=str(path), code=FailureCode.KEY_INVALID))
    except KeyringError as exc:
        raise KeyringError(exc.code, exc.message, path=str(path), next_step=exc.next_step or _KEYRING_NEXT) from None
    except RegistryError as exc:  # not JSON, or JSON read two ways (a repeated key, NaN, 1e999)
        raise _unreadable_keys(path, exc.message) from None
    except OSError as exc:
        raise _unreadable_key_file(path, exc) from None
    except KeyError as exc:
        raise _unreadable_keys(path, f"the member {exc} is missing") from None
    except (ValueError, TypeError) as exc:
        raise _unreadable_keys(path, str(exc)) from None


def write_key_file(document: Mapping[str, Any], path: Path, *, exclusive: bool) -> None:
    """``document`` as the key file at ``path`` (at a symlink's target), whole, mode 0600; ``exclusive``: raise
    ``FileExistsError`` rather than replace a file already there. A link that is a loop or points at nothing
    raises ``OSError``, as does a failed write, naming the key file (not its temporary)."""
    path = Path(os.path.realpath(path, strict=True)) if Path(path).is_symlink() else Path(path)
    try:
        _write(document, path, exclusive=exclusive)
    except FileExistsError:
        raise
    except OSError as exc:  # the key file, not its temporary (nor nothing: a write on a full disk names no file)
        raise OSError(exc.errno, exc.strerror, str(path)) from None


def _write(document: Mapping[str, Any], path: Path, *, exclusive: bool) -> None:
    """Write to a temporary file beside ``path``, fsync, put it in place: ``path`` is whole, old or new."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".keys-")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(document, handle, indent=2)
            handle.flush()
            os.fsync(handle.fileno())
        _put_in_place(tmp, path, exclusive=exclusive)
    finally:
        Path(tmp).unlink(missing_ok=True)


def _put_in_place(tmp: str, path: Path, *, exclusive: bool) -> None:
    """Rename ``tmp`` over ``path``; ``exclusive``: hard-link it there, ``FileExistsError`` if ``path`` exists."""
    if not exclusive:
        os.replace(tmp, path)
        return
    try:
        os.link(tmp, path)
    except OSError as exc:
        if exc.errno not in _NO_HARD_LINKS:
            raise
        if path.exists():  # a file system without hard links: the narrow check-then-rename is all there is
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(path)) from None
        os.replace(tmp, path)


def _unreadable_keys(path: Path, reason: str) -> KeyringError:
    """A key file whose content is not what ``CheckpointKeyring.save`` writes."""
    return KeyringError(
        FailureCode.KEY_INVALID,
        f"cannot read checkpoint keys: {reason}",
        path=str(path),
        next_step="restore the key file from a replica or backup (as `rimthan-mcp keys` wrote it), or pass the "
        "--checkpoint-keys (or --state-dir) of the server that issued the runs",
    )


def _unreadable_key_file(path: Path, exc: OSError) -> KeyringError:
    """A key file the OS would not read: ``key_invalid``, but ``io_error`` when access was refused (the right keys
    behind the wrong owner or mode: new keys, as ``key_invalid`` suggests, would lose every run these signed)."""
    code, next_step = FailureCode.KEY_INVALID, _KEYRING_NEXT
    if isinstance(exc, PermissionError):
        code = FailureCode.IO_ERROR
        next_step = (
            f"give the user the server runs as read and write access to {path} (`chown USER {path} && chmod 600 "
            f"{path}`); do not create new keys: the runs these keys signed would be refused"
        )
    return KeyringError(code, f"cannot read checkpoint keys: {exc.strerror}", path=str(path), next_step=next_step)
