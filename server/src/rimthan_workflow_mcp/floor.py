"""The activation floor: the highest release version ever activated, per catalogue and deployment.

A small operator-readable JSON file (``<state-dir>/activation-floor.json``)
so that a restart, a second replica sharing the state directory, or a refresh
cannot silently roll a catalogue back to an older (possibly vulnerable)
release. Lowering the floor is an explicit operator act (``--lower-floor``).

A floor belongs to one deployment: the trust root (its key ids), the
releases directory and the mode (every catalogue of the directory, or the
explicit two-release mode of ``--release``). Entries are keyed
``<catalogue>@<deployment id>``, so an unrelated server of the same user
(another trust store, another releases directory, the other mode) sharing
the default state directory never raises this one's floor. An entry keyed
by the bare catalogue name (written before floors were scoped) cannot be
attributed to a deployment and still applies to all of them (fail closed);
``--lower-floor`` replaces it with a scoped one.

A deployment is also the *successor* of every earlier one of the same mode
that shares at least one trusted key id with it (``trust_keys`` in the entry):
adding a co-signer key to ``--trust``, or re-pointing ``--releases-dir`` (a
blue/green symlink, a volume mounted elsewhere), changes the deployment id but
not whose releases these are, so the highest such floor of the catalogue
applies (fail closed), is logged once as inherited, and is recorded under the
new deployment when it activates. Disjoint trust keys keep floors apart. An
entry scoped before ``trust_keys`` was written carries its keys only in its
label; they are read from it only when the label parses strictly and hashes
back to the entry's deployment id, otherwise the entry binds its own
deployment alone.

A member of the file or of an entry that this version does not know (a newer
version added it; the same ``format`` number) is written back as it was read
whenever this version rewrites the file, so a rollback loses none of it; an
entry this version replaces starts afresh. A file of a newer ``format`` is
refused, never rewritten (``state_formats``).

Replicas sharing a state directory raise the floor under an OS file lock
(``activation-floor.json.lock`` next to it, ``flock``): read, check and write
happen as one step, so no replica's raise is lost and none records (or
activates) a release another replica's raise has put below the floor. The
file itself is replaced atomically, so readers take no lock. Nothing is
written, and no lock taken, when the floor already holds the release: a state
directory the server cannot write still serves releases at their floor.

A start the floor refuses as a rollback also says so for a program: before its ``error:``/``next:`` lines,
``rimthan-mcp serve`` logs one record per release refused below the floor (:func:`log_below_floor`; a JSON line
on stderr at level error, so logged at every ``--log-level``): the core's ``below_floor`` record (event
``BELOW_FLOOR_EVENT``, the fields ``catalogue``, ``version``, ``floor``), that refusal's details. The host kit's
bridge reads which release was withdrawn from the first (``read_below_floor``), never from the English message.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rimthan_workflow_registry.below_floor import BELOW_FLOOR_EVENT, BelowFloor
from rimthan_workflow_registry.canonical import DIGEST_PATTERN, sha256_hex
from rimthan_workflow_registry.errors import FailureCode, RegistryError
from rimthan_workflow_registry.release import is_semver, semver_key
from rimthan_workflow_registry.remediation import io_next_step
from rimthan_workflow_registry.small_files import read_small_file
from rimthan_workflow_registry.state_formats import ROLLBACK_NEXT, newer_format
from rimthan_workflow_registry.strict_json import parse_strict_json
from rimthan_workflow_registry.whole_writes import replace_whole

from .logs import get_logger

FLOOR_FILE = "activation-floor.json"
LOCK_SUFFIX = ".lock"
FLOOR_FORMAT = "rimthan.activation-floor/1"
MAX_FLOOR_FILE_BYTES = 1024 * 1024  # one small entry per catalogue and deployment; the file is read whole
_DIGEST = re.compile(DIGEST_PATTERN)
EXPLICIT_MODE = "explicit --release mode"
MODES = ("directory", "explicit")  # an entry's "mode": the directory mode, or the explicit --release mode
_KEY_ID = re.compile(r"[0-9a-f]{64}")
_ENTRY_MEMBERS = frozenset({"version", "manifest_digest", "activated_at", "deployment", "trust_keys", "mode"})
_LABEL = re.compile(rf"trust ([0-9a-f]{{64}}(?:, [0-9a-f]{{64}})*); releases (.+?)(; {EXPLICIT_MODE})?", re.DOTALL)
_log = get_logger("floor")


def log_below_floor(error: RegistryError) -> None:
    """Log each release ``error`` refuses below the floor (:data:`BELOW_FLOOR_EVENT`), for a program to read."""
    for below in BelowFloor.all_of(error):
        _log.error(BELOW_FLOOR_EVENT, extra=asdict(below))


@dataclass(frozen=True)
class FloorEntry:
    version: str
    manifest_digest: str
    activated_at: int
    deployment: str = ""
    trust_keys: tuple[str, ...] = ()  # empty: not known, so no later deployment inherits this floor
    mode: str = ""
    others: tuple[tuple[str, Any], ...] = ()  # members a newer version added: written back as they were read


@dataclass(frozen=True)
class Deployment:
    """What a floor is scoped to: a short id for the key, a label saying what it stands for, its keys and mode."""

    id: str
    label: str
    keys: tuple[str, ...] = ()
    mode: str = MODES[0]


def deployment_of(trust_key_ids: Iterable[str], releases_dir: Path | None, *, explicit: bool = False) -> Deployment:
    """The deployment a server belongs to: its trust root's key ids, its releases directory and its mode.

    ``explicit`` is the two-release mode (``--release``, ``--migration-target``): it has a floor of its own, so
    a default ``serve`` of the same directory (which activates the newest release) does not refuse the older
    release an operator names on purpose, while a rollback within either mode is still refused.
    """
    where = str(releases_dir.resolve()) if releases_dir is not None else "-"
    return _deployment(tuple(sorted(trust_key_ids)), where, explicit=explicit)


def _deployment(keys: tuple[str, ...], where: str, *, explicit: bool) -> Deployment:
    scope, label = "\n".join(keys) + "\n" + where, f"trust {', '.join(keys)}; releases {where}"
    if explicit:  # the directory mode keeps its original id, so floors recorded before stay in force
        scope, label = scope + "\n" + EXPLICIT_MODE, f"{label}; {EXPLICIT_MODE}"
    digest = sha256_hex(scope.encode("utf-8"))[:16]
    return Deployment(id=digest, label=label, keys=keys, mode=MODES[explicit])


def _keys_of_label(name: str, label: str) -> tuple[tuple[str, ...], str]:
    """The trust keys and mode of an entry written before ``trust_keys``: only if its label hashes to its id."""
    parsed = _LABEL.fullmatch(label)
    if parsed is None or "@" not in name:
        return (), ""
    keys = tuple(parsed[1].split(", "))
    deployment = _deployment(keys, parsed[2], explicit=parsed[3] is not None)
    if keys != tuple(sorted(set(keys))) or name.rsplit("@", 1)[1] != deployment.id:
        return (), ""
    return keys, deployment.mode


def _keys_and_mode(name: str, e: dict[str, Any], deployment: str) -> tuple[tuple[str, ...], str]:
    if "trust_keys" not in e and "mode" not in e:
        return _keys_of_label(name, deployment)
    keys, mode = e["trust_keys"], e["mode"]
    if not isinstance(keys, list) or not keys or not all(isinstance(k, str) and _KEY_ID.fullmatch(k) for k in keys):
        raise ValueError(f"{name}: trust_keys {keys!r} is not a list of key ids")
    if mode not in MODES:
        raise ValueError(f"{name}: mode {mode!r} is not one of {', '.join(MODES)}")
    return tuple(keys), mode


def _entry(name: str, e: dict[str, Any]) -> FloorEntry:
    """One catalogue's floor as the file holds it, every member of exactly the type :meth:`to_json` writes."""
    version, digest, activated_at = e["version"], e["manifest_digest"], e["activated_at"]
    deployment = e.get("deployment", "")
    if not isinstance(version, str) or not is_semver(version):
        raise ValueError(f"{name}: version {version!r} is not a semantic version")
    if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
        raise ValueError(f"{name}: manifest_digest {digest!r} is not sha256:<hex>")
    if type(activated_at) is not int or activated_at < 0:  # bool is an int; "12" and 1.5 are not written here
        raise ValueError(f"{name}: activated_at {activated_at!r} is not a Unix time in whole seconds")
    if not isinstance(deployment, str):
        raise ValueError(f"{name}: deployment {deployment!r} is not a text label")
    keys, mode = _keys_and_mode(name, e, deployment)
    others = tuple((k, v) for k, v in e.items() if k not in _ENTRY_MEMBERS)
    return FloorEntry(version, digest, activated_at, deployment, keys, mode, others)


class ActivationFloor:
    """Reads and raises the per-catalogue floor of one deployment; ``path=None`` keeps it in memory only."""

    def __init__(self, path: Path | None, deployment: Deployment | None = None) -> None:
        self.path = path
        self.deployment = deployment
        self._others: dict[str, Any] = {}  # top-level members a newer version added: written back as read
        self._entries: dict[str, FloorEntry] = self._load() if path is not None else {}
        self._announced: set[tuple[str, str]] = set()  # (catalogue, entry key) already logged as inherited

    def _key(self, catalogue: str) -> str:
        return f"{catalogue}@{self.deployment.id}" if self.deployment is not None else catalogue

    def _load(self) -> dict[str, FloorEntry]:
        assert self.path is not None
        if not os.path.lexists(self.path):  # a link that leads nowhere is unreadable, never "no floor"
            return {}
        raw = self._read()
        if (newer := self._newer(raw.get("format") if isinstance(raw, dict) else None)) is not None:
            raise newer
        try:
            if raw.get("format") != FLOOR_FORMAT:
                raise ValueError(f"format is not {FLOOR_FORMAT}")
            entries = {name: _entry(name, e) for name, e in raw["catalogues"].items()}
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise self._unreadable(str(exc)) from None
        self._others = {k: v for k, v in raw.items() if k not in ("format", "catalogues")}
        return entries

    def _read(self) -> Any:
        """The floor file's JSON, read bounded and strictly; anything unreadable is ``rollback_refused``."""
        assert self.path is not None
        try:
            data = read_small_file(self.path, MAX_FLOOR_FILE_BYTES)  # a FIFO is refused, never waited on
            if len(data) > MAX_FLOOR_FILE_BYTES:
                raise ValueError(f"over {MAX_FLOOR_FILE_BYTES} bytes")
            return parse_strict_json(data, where=str(self.path), code=FailureCode.ROLLBACK_REFUSED)
        except RegistryError as exc:  # not JSON, or JSON read two ways (a repeated key, NaN, 1e999)
            raise self._unreadable(exc.message) from None
        except OSError as exc:
            raise self._unreadable(exc.strerror or str(exc)) from None
        except ValueError as exc:
            raise self._unreadable(str(exc)) from None

    def _unreadable(self, reason: str) -> RegistryError:
        return RegistryError(
            FailureCode.ROLLBACK_REFUSED,
            f"the activation floor file is unreadable ({reason}); fix or remove it deliberately",
            path=str(self.path),
            next_step="restore the file from a replica or backup, or move it away to record the floor afresh "
            "(--lower-floor cannot read it either)",
        )

    def _newer(self, found: object) -> RegistryError | None:
        """A floor file a newer version wrote: refused saying so, never advising to move it away (a rollback
        protection lost) nor rewritten in this version's format."""
        newer = newer_format(found, FLOOR_FORMAT)
        if newer is None:
            return None
        return RegistryError(
            FailureCode.ROLLBACK_REFUSED,
            f"the activation floor file is not read: {newer.reason()}",
            path=str(self.path),
            next_step=f"{ROLLBACK_NEXT}; do not move it away: the floors it records guard against rollbacks",
        )

    def get(self, catalogue: str) -> FloorEntry | None:
        """The floor that applies: the highest of this deployment's entry, an unscoped legacy one, and those of
        the earlier deployments it succeeds (same mode, a trust key in common); this deployment's wins a tie."""
        found = self._applying(catalogue)
        return found[1] if found is not None else None

    def _applying(self, catalogue: str) -> tuple[str, FloorEntry] | None:
        own = self._key(catalogue)
        found = [(own, self._entries[own])] if own in self._entries else []
        if self.deployment is not None:
            found += [(k, e) for k, e in sorted(self._entries.items()) if k == catalogue or self._succeeds(k, e, own)]
        if not found:
            return None
        key, entry = max(found, key=lambda item: semver_key(item[1].version))  # the first of the highest
        if self._inherited(key) and (catalogue, key) not in self._announced:
            self._announced.add((catalogue, key))
            _log.warning(
                "activation floor inherited",
                extra={"catalogue": catalogue, "floor": entry.version, "from_deployment": entry.deployment},
            )
        return key, entry

    def _succeeds(self, key: str, entry: FloorEntry, own: str) -> bool:
        """Whether ``key`` is an earlier deployment's entry of the same catalogue whose floor this one inherits."""
        assert self.deployment is not None
        same_catalogue = key != own and key.rsplit("@", 1)[0] == own.rsplit("@", 1)[0]
        return (
            same_catalogue
            and entry.mode == self.deployment.mode
            and bool(set(entry.trust_keys) & set(self.deployment.keys))
        )

    def _inherited(self, key: str) -> bool:
        return self.deployment is not None and "@" in key and key != self._key(key.rsplit("@", 1)[0])

    def _where(self, key: str, entry: FloorEntry) -> str:
        if self._inherited(key):
            scope = f" for an earlier deployment sharing a trust key with this one ({entry.deployment})"
        else:
            scope = f" for this deployment ({self.deployment.label})" if self.deployment is not None else ""
        return f"recorded in {self.path}{scope}" if self.path is not None else f"recorded in memory{scope}"

    def check(self, catalogue: str, version: str, manifest_digest: str, *, lower_floor: bool = False) -> None:
        """Refuse ``version`` below the recorded floor, or another release under the floor's own version.

        Two different releases signed under one version (equivocation) mean a
        key was misused or a release was rebuilt in place; only the operator
        can decide which one is real (``--lower-floor`` re-records the floor).
        """
        if self.path is not None:
            self._entries = self._load()  # another replica may have raised it
        found = self._applying(catalogue)
        if found is None or lower_floor:
            return
        key, entry = found
        if version == entry.version and manifest_digest != entry.manifest_digest:
            raise self._refused(
                f"{catalogue}@{version} was activated before as {entry.manifest_digest} ({self._where(key, entry)}); "
                "this is another release under the same version. Publish a new version, or pass --lower-floor once "
                "you know which is real",
                catalogue=catalogue,
                version=version,
                floor_digest=entry.manifest_digest,
                digest=manifest_digest,
            )
        if semver_key(version) < semver_key(entry.version):
            raise self._refused(
                f"{catalogue}@{version} is below the activation floor {entry.version} {self._where(key, entry)}; pass "
                "--lower-floor to roll back deliberately (it records the lower floor), or give an unrelated "
                "deployment its own --state-dir",
                **asdict(BelowFloor(catalogue, version, entry.version)),
            )

    def _refused(self, message: str, **details: str) -> RegistryError:
        return RegistryError(
            FailureCode.ROLLBACK_REFUSED, message, path=str(self.path) if self.path else None, details=details
        )

    def record(self, catalogue: str, version: str, manifest_digest: str, *, lower_floor: bool = False) -> bool:
        """Raise the floor to ``version`` (or set it lower with ``lower_floor``); True if it changed.

        Checked again against the file as it is now, and again under the lock before the write: a floor
        another replica raised meanwhile refuses ``version`` here (``rollback_refused``) rather than being
        overwritten.
        """
        if self.path is None:
            return self._set(catalogue, version, manifest_digest, lower_floor=lower_floor)
        self.check(catalogue, version, manifest_digest, lower_floor=lower_floor)
        if not self._changes(catalogue, version, manifest_digest, lower_floor=lower_floor):
            return False
        try:
            with _locked(self.path):
                self.check(catalogue, version, manifest_digest, lower_floor=lower_floor)
                return self._set(catalogue, version, manifest_digest, lower_floor=lower_floor)
        except OSError as exc:
            if self._only_carries(catalogue, version, lower_floor=lower_floor):
                _log.warning(  # the earlier deployment's entry still holds this floor: nothing is lost
                    "inherited activation floor not recorded for this deployment",
                    extra={"catalogue": catalogue, "floor": version, "path": str(self.path), "reason": str(exc)},
                )
                return False
            raise RegistryError(
                FailureCode.IO_ERROR,
                f"cannot record {catalogue}@{version} in the activation floor ({exc.strerror or exc}); "
                "it is not activated",
                path=str(self.path),
                next_step=io_next_step(
                    exc,
                    str(self.path.parent),
                    otherwise="make the state directory writable by the server, or give it a writable --state-dir",
                ),
            ) from None

    def _changes(self, catalogue: str, version: str, manifest_digest: str, *, lower_floor: bool) -> bool:
        found = self._applying(catalogue)
        if found is not None and not lower_floor:
            below = semver_key(version) < semver_key(found[1].version)
            if below or (version == found[1].version and not self._inherited(found[0])):
                return False  # an inherited floor is recorded under this deployment when it activates
        scoped = self._entries.get(self._key(catalogue))
        return scoped is None or scoped.version != version or scoped.manifest_digest != manifest_digest

    def _only_carries(self, catalogue: str, version: str, *, lower_floor: bool) -> bool:
        """Whether recording ``version`` would only copy an inherited floor at that very version to this deployment.

        Such a write raises nothing: when it cannot be made (a read-only state directory), the release still
        activates, as it would at its own deployment's floor.
        """
        found = None if lower_floor else self._applying(catalogue)
        return found is not None and self._inherited(found[0]) and found[1].version == version

    def _set(self, catalogue: str, version: str, manifest_digest: str, *, lower_floor: bool) -> bool:
        if not self._changes(catalogue, version, manifest_digest, lower_floor=lower_floor):
            return False
        own = self._key(catalogue)
        if lower_floor:
            self._say_lowered(catalogue, version, manifest_digest)
        if lower_floor and self.deployment is not None:  # the operator decided: legacy and inherited floors give way
            for key in [k for k, e in self._entries.items() if k == catalogue or self._succeeds(k, e, own)]:
                del self._entries[key]
        d = self.deployment
        self._entries[own] = FloorEntry(
            version, manifest_digest, int(time.time()), d.label if d else "", d.keys if d else (), d.mode if d else ""
        )
        self._save()
        return True

    def _say_lowered(self, catalogue: str, version: str, manifest_digest: str) -> None:
        """One warning when ``--lower-floor`` records a floor below (or another release than) the one it replaces."""
        found = self._applying(catalogue)
        if found is None:
            return
        entry = found[1]
        below = semver_key(version) < semver_key(entry.version)
        if below or (version == entry.version and manifest_digest != entry.manifest_digest):
            _log.warning(  # a deliberate rollback is the floor's one way down: it must leave a trace
                "activation floor lowered",
                extra={
                    "catalogue": catalogue,
                    "from": f"{entry.version} ({entry.manifest_digest})",
                    "to": f"{version} ({manifest_digest})",
                    "path": str(self.path) if self.path is not None else None,
                },
            )

    def to_json(self) -> dict[str, Any]:
        return {
            **self._others,
            "format": FLOOR_FORMAT,
            "catalogues": {
                name: {
                    **dict(e.others),
                    "version": e.version,
                    "manifest_digest": e.manifest_digest,
                    "activated_at": e.activated_at,
                    **({"deployment": e.deployment} if e.deployment else {}),
                    **({"trust_keys": list(e.trust_keys), "mode": e.mode} if e.trust_keys else {}),
                }
                for name, e in sorted(self._entries.items())
            },
        }

    def _save(self) -> None:
        if self.path is None:
            return
        replace_whole(self.path, json.dumps(self.to_json(), indent=2) + "\n", prefix=".floor-", mode=0o644)
        _fsync_directory(self.path.parent)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold the exclusive lock of the floor file ``path`` (its lock file is created once and never removed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.with_name(path.name + LOCK_SUFFIX), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


_NOT_SYNCED: set[str] = set()  # state directories already warned of as not readable, so not synced


def _fsync_directory(directory: Path) -> None:
    """Make the rename durable: the directory entry, not only the file's bytes.

    Syncing opens the directory for reading. One the server may write but not read (mode 0300) holds the floor
    already renamed into place: it is recorded, so the release activates, and one warning says what to give."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except PermissionError:
        if str(directory) not in _NOT_SYNCED:
            _NOT_SYNCED.add(str(directory))
            _log.warning(
                "state directory not synced",
                extra={
                    "path": str(directory),
                    "reason": "this user may write the state directory but not read it, so the activation floor's "
                    "rename cannot be made durable: a crash just after it may lose the floor just recorded",
                    "next": f"give the server's user read access to {directory} (e.g. chmod 700 {directory})",
                },
            )
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
