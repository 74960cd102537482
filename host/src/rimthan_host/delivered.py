"""What the bridge delivered into the project, so it never overwrites what the user owns.

Setup installs the release's prompt, skill, subagents and adapter at
project-local paths (``.claude/agents/<id>.md`` and the like) that a user may
also use for files of their own. Like git refusing to overwrite an untracked
file, the bridge writes at such a path only if it is free, already holds the
asset's exact bytes, or holds exactly what the bridge delivered there before
(``.rimthan/delivered.json``: path -> SHA-256, replaced atomically, written
and read only through real directories and files). Every path is checked
before any is written: a clash refuses the whole setup, nothing delivered.

Runs on different releases share those paths: a newer run's setup replaces the
prompt, skill, subagents and adapter an older run's model is told by (the
packaged 1.3.0 skill says to assess options and write a decision record, a step
1.2.0 does not have). So the record also keeps, per release (by manifest
digest), each asset's install path and digest, and the texts the bridge
delivered (``.rimthan/assets/<sha256>``); when a run is resumed,
:func:`restore_release` puts its own release's assets back where another
release's are, and before a run's validators are named to the model,
:func:`restore_subagents` does so for their subagents (only files that are the
bridge's own), or refuses in words. A subagent file found otherwise after its
validator was named (edited while the validators run) is no validator of the
release: :func:`put_back_edited` keeps what is there and puts the release's back.
A text whose kept copy is gone is :class:`CopyGone`: :mod:`.kept_copies` fetches
it again from the verifier, checked against the digest delivered.
"""

from __future__ import annotations

import errno
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from rimthan_workflow_registry.canonical import SHA256_HEX_PATTERN, sha256_hex
from rimthan_workflow_registry.errors import FailureCode, RegistryError
from rimthan_workflow_registry.limits import MAX_CATALOGUE_FILE_BYTES
from rimthan_workflow_registry.strict_json import parse_strict_json

from .files import FileTooLarge, file_status, read_regular
from .project_files import ProjectFiles
from .protocol import HarnessError

RECORD_NAME = "delivered.json"
RECORD_PATH = f".rimthan/{RECORD_NAME}"
STORE_DIR = ".rimthan/assets"  # the texts delivered, by SHA-256
MAX_RECORD_BYTES = 1 << 20  # far past any catalogue's assets; a larger record is refused as damaged
_RECORD_DEPTH = 4  # the record, a release's assets, an asset's path and digest: a deeper record is damaged
_SHA256_HEX = re.compile(SHA256_HEX_PATTERN)
# An asset is a catalogue file, so never larger: a file past it at an asset path is neither the asset nor a delivery.
MAX_ASSET_BYTES = MAX_CATALOGUE_FILE_BYTES
NOTHING_CHANGED = "Nothing was changed"  # what a refusal to put an asset back says first, unless it says more
# Who delivers, as a refusal names it: to the bridge's model, to a caller of the host library.
BRIDGE_WRITER, LIBRARY_WRITER = "the bridge", "the host kit"
# Which call to make again once the delivery record can be read: the host library's, the bridge's.
_LIBRARY_AGAIN = "HostSession.set_up_workspace for a run at its setup step."
_BRIDGE_AGAIN = "resume_run for a run waiting at its setup or being resumed, step_done for validators not started."


class AssetClash(HarnessError):
    """Setup refused: a file at an asset's path is not the host's to replace; nothing was delivered.

    Its text is what a caller of the host library is told (:meth:`HostSession.set_up_workspace` raised it: the
    argument or call to change); ``bridge_words`` what the bridge tells its model (its tools), the same text
    where only the bridge raises it (putting a run's assets back)."""

    def __init__(self, message: str, *, bridge: str | None = None) -> None:
        super().__init__(message)
        self.bridge_words = message if bridge is None else bridge


class CopyGone(AssetClash):
    """An asset cannot be put back: the copy the bridge kept of its text is gone or altered (``digests``: the
    SHA-256 of each such text; :mod:`.kept_copies` fetches them again from the verifier; ``then``: the call that
    goes on once the file is back)."""

    def __init__(self, message: str, digests: Sequence[str], then: str) -> None:
        super().__init__(message)
        self.digests, self.then = tuple(digests), then


@dataclass(frozen=True)
class Restored:
    """An asset put back: its path, and whether the file was missing (moved or deleted) or another release's."""

    path: str
    missing: bool

    def line(self, release: str) -> str:
        """What the model is told, ``release`` saying whose asset it is (``"this run's release"``)."""
        if self.missing:
            return f"Re-installed {self.path}: it was missing ({release} delivers it there)."
        return f"Re-installed {self.path}: {release} delivered it otherwise (another run's setup had replaced it)."


@dataclass
class Record:
    """What the bridge delivered: path -> SHA-256; per release digest, asset key -> (install path, SHA-256).

    An asset's key is its subagent id for a subagent (what a validator names), ``<kind>:<id>`` for the others.
    """

    delivered: dict[str, str] = field(default_factory=dict)
    releases: dict[str, dict[str, tuple[str, str]]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        releases = {k: {a: {"path": p, "sha256": d} for a, (p, d) in v.items()} for k, v in self.releases.items()}
        return {"delivered": dict(sorted(self.delivered.items())), "releases": releases}


def load_record(files: ProjectFiles) -> Record:
    """The delivery record; empty if there is none; :class:`AssetClash` (damaged) if it is not one."""
    try:
        data = read_regular(files.at(RECORD_PATH), MAX_RECORD_BYTES, own=True)
    except FileNotFoundError:
        return Record()
    except FileTooLarge as exc:
        raise _damaged(f"it is {exc.size} bytes, past {exc.limit}") from None
    except OSError as exc:
        if exc.errno == errno.EPERM:  # (refuse_foreign: another user's, or others may write it)
            said = f"{RECORD_PATH}: {exc.strerror}; nothing was delivered or changed. Once that is fixed, call again: "
            raise AssetClash(said + _LIBRARY_AGAIN, bridge=said + _BRIDGE_AGAIN) from None
        raise _damaged(f"it cannot be read as a file: {exc.strerror}") from None
    try:  # strictly: of a key written twice, NaN or nesting past the decoder, nothing is guessed
        value = parse_strict_json(data, where=RECORD_PATH, code=FailureCode.JSON_PARSE_FAILED, max_depth=_RECORD_DEPTH)
        return _record(value)
    except (RegistryError, ValueError, TypeError, KeyError, AttributeError):
        raise _damaged("it is not a map of paths to SHA-256 digests") from None


def _record(value: Any) -> Record:
    """The record in ``value``; ValueError, TypeError, KeyError or AttributeError if it is not one."""
    delivered = value["delivered"]
    releases = {
        str(k): {str(a): (str(e["path"]), e["sha256"]) for a, e in v.items()}
        for k, v in value.get("releases", {}).items()
    }
    digests = [*delivered.values(), *(d for v in releases.values() for _, d in v.values())]
    if not isinstance(delivered, dict) or not all(_is_digest(d) for d in digests):
        raise ValueError("not a record")
    return Record({str(k): str(v) for k, v in delivered.items()}, releases)


def _is_digest(value: Any) -> bool:
    return isinstance(value, str) and _SHA256_HEX.fullmatch(value) is not None


def _damaged(why: str) -> AssetClash:
    def said(writer: str, again: str) -> str:
        return (
            f"{RECORD_PATH} is damaged ({why}); nothing was delivered or changed. It lists the files {writer} "
            f"delivered; delete it ({writer} then replaces only files identical to the release's) and try again: "
            + again
        )

    return AssetClash(said(LIBRARY_WRITER, _LIBRARY_AGAIN), bridge=said(BRIDGE_WRITER, _BRIDGE_AGAIN))


def save_record(files: ProjectFiles, record: Record) -> None:
    """Replace the delivery record atomically (a temporary file, fsynced, renamed over it)."""
    data = json.dumps(record.to_json(), indent=1, sort_keys=True).encode("utf-8")
    files.replace(RECORD_PATH, f"{RECORD_NAME}.tmp", data)


def keep_release(files: ProjectFiles, record: Record, release: str, assets: Sequence[Mapping[str, Any]]) -> None:
    """Keep ``release``'s assets (install path, digest, text) for :func:`restore_release` and the validators."""
    for asset in assets:
        files.write(asset["id"], f"{STORE_DIR}/{asset['sha256']}", asset["media_type"], asset["text"])
    record.releases[release] = {_key(a): (a["install_path"], a["sha256"]) for a in assets}
    save_record(files, record)


def _key(asset: Mapping[str, Any]) -> str:
    return str(asset["id"]) if asset["kind"] == "subagent" else f"{asset['kind']}:{asset['id']}"


@dataclass(frozen=True)
class NotAFile:
    """What is at an asset's path and is no file the host may read there: the user's own (too large to be an
    asset), or no regular file; :meth:`why` says it as a clash."""

    path: str
    regular: bool

    def why(self, writer: str) -> str:
        """The clash in words, ``writer`` delivering the assets (``"the bridge"``, ``"the host kit"``)."""
        return _users_own(self.path, writer) if self.regular else f"{self.path} is there and is not a regular file"


# What one look at an asset's path found: the SHA-256 of the regular file there, something that is no such file
# (:class:`NotAFile`), or None: nothing there (a folder on the way missing too).
Found: TypeAlias = str | NotAFile | None


def clash(
    files: ProjectFiles, path: str, sha256: str, record: Mapping[str, str], writer: str = BRIDGE_WRITER
) -> str | None:
    """Why the file at ``path`` must not be replaced by the asset of digest ``sha256``, or None if it may be
    (``writer``: who delivers, as the words name it)."""
    return _clash(path, sha256, record, _digest_at(files, path), writer)


def _clash(path: str, sha256: str, record: Mapping[str, str], found: Found, writer: str = BRIDGE_WRITER) -> str | None:
    """:func:`clash`, ``found`` being what a look at ``path`` just found (not looked at again)."""
    if isinstance(found, NotAFile):
        return found.why(writer)
    if found is None or found == sha256:
        return None
    if path not in record:
        return _users_own(path, writer)
    if record[path] != found:
        return f"{path} was changed since {writer} delivered it"
    return None


def check_free(files: ProjectFiles, assets: Sequence[Mapping[str, Any]], record: Record) -> None:
    """Every asset's path may be written; else :class:`AssetClash` naming each file, before anything is written."""
    found = {str(a["install_path"]): (_digest_at(files, a["install_path"]), a["sha256"]) for a in assets}

    def listed(writer: str) -> str:
        said = (_clash(p, d, record.delivered, f, writer) for p, (f, d) in found.items())
        return "\n".join(f"- {c}" for c in said if c is not None)

    if listed(BRIDGE_WRITER):
        library = "Move or rename each of these files (keep their content elsewhere), then call "
        library += "HostSession.set_up_workspace again (the run waits at its setup step)."
        bridge = "Ask the user to move or rename each of these files (keep their content elsewhere), then call "
        bridge += "resume_run to set up the workspace again."
        raise AssetClash(
            f"{_not_free(LIBRARY_WRITER, listed(LIBRARY_WRITER))}\n{library}",
            bridge=f"{_not_free(BRIDGE_WRITER, listed(BRIDGE_WRITER))}\n{bridge}",
        )


def _not_free(writer: str, listed: str) -> str:
    return (
        "The workspace was not set up and nothing was delivered: the release installs its prompt, skill and "
        f"subagents at paths where {writer} found files it will not overwrite:\n{listed}"
    )


def restore_subagents(files: ProjectFiles, release: str, subagents: Sequence[str]) -> list[Restored]:
    """Put ``release``'s own ``subagents`` back where another's are; the paths re-installed.

    A subagent file that is neither the release's nor the bridge's own is
    :class:`AssetClash`, before anything is written. A release the record
    does not know (set up before the bridge kept records) is left as it is.
    """
    head = (
        "The validators were not started: this run's release defines their subagents, and the bridge will not "
        "overwrite these files to put them back:"
    )
    return _restore(files, release, subagents, head, "step_done again")


def restore_release(files: ProjectFiles, release: str, run: str) -> list[Restored]:
    """Put every asset ``release`` delivered back where it is missing or another release's (resuming ``run``)."""
    head = (
        f"Run {run} was not resumed: its release installs its own prompt, skill, subagents and adapter, and the "
        "bridge will not overwrite these files to put them back:"
    )
    return _restore(files, release, None, head, f"resume_run {run} again")


def _restore(
    files: ProjectFiles,
    release: str,
    keys: Sequence[str] | None,
    head: str,
    then: str,
    undone: str = NOTHING_CHANGED,
    known: Mapping[str, Found] | None = None,
) -> list[Restored]:
    """Re-install ``release``'s assets of ``keys`` (``None``: every one the record keeps) where the file differs;
    :class:`AssetClash` naming every clash (``undone``: what a refusal says was not done, when the text kept of
    one is gone). ``known``: what is at paths just looked at, not looked at again."""
    record = load_record(files)
    kept = record.releases.get(release, {})
    pinned = [kept.get(k) for k in (sorted(kept) if keys is None else keys)]
    known = known or {}
    found = {p: known[p] if p in known else _digest_at(files, p) for p, _ in (x for x in pinned if x is not None)}
    stale = [(p, d) for p, d in (x for x in pinned if x is not None) if found[p] != d]
    clashes = [c for p, d in stale if (c := _clash(p, d, record.delivered, found[p])) is not None]
    if clashes:
        raise AssetClash(
            head + "\n" + "\n".join(f"- {c}" for c in clashes) + "\nAsk the user to move or rename each of "
            f"these files (keep their content elsewhere), then call {then}."
        )
    texts = {d: t for _, d in stale if (t := _kept_text(files, d)) is not None}
    gone = [(p, d) for p, d in stale if d not in texts]
    if gone:
        raise _copy_gone(gone, found[gone[0][0]] is None, then, undone)
    for path, digest in stale:
        written = files.write(path, path, "text/markdown", texts[digest])
        record.delivered[written.path] = written.sha256
        save_record(files, record)
    return [Restored(path, found[path] is None) for path, _ in stale]


def _users_own(path: str, writer: str) -> str:
    return f"{path} is there and is not a file {writer} delivered (it is the user's own)"


def _digest_at(files: ProjectFiles, path: str) -> Found:
    return _digest(_bytes_at(files, path))


def _digest(data: bytes | NotAFile | None) -> Found:
    return sha256_hex(data) if isinstance(data, bytes) else data


def _bytes_at(files: ProjectFiles, path: str) -> bytes | NotAFile | None:
    """The bytes of the regular file at ``path``, read once; what else is there as a clash; None if nothing is."""
    try:
        return read_regular(files.at(path), MAX_ASSET_BYTES)  # (a link at ``path`` is there: never followed)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except FileTooLarge:  # larger than any asset the bridge delivers: the user's, and not read
        return NotAFile(path, regular=True)
    except OSError:
        return NotAFile(path, regular=False)


# A file as it is at one moment: device, inode, size, modification and change times (ns). A file written since has
# another, even one written back to the same bytes: the change time moves on with every write, and only the kernel
# sets it.
FileMark = tuple[int, int, int, int, int]


def subagent_marks(
    files: ProjectFiles, release: str, subagents: Sequence[str]
) -> dict[str, tuple[str, FileMark | None]]:
    """Each of ``subagents``' files, where ``release`` installs it, and as it is now (None: nothing there)."""
    pinned = load_record(files).releases.get(release, {})
    return {s: (pinned[s][0], _mark(files, pinned[s][0])) for s in subagents if s in pinned}


def _mark(files: ProjectFiles, path: str) -> FileMark | None:
    try:
        st = file_status(files.at(path))
    except OSError:
        return None
    return None if st is None else (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


@dataclass(frozen=True)
class PutBack:
    """A subagent file found otherwise than its release delivers it, put back; ``kept``: whether what was there is
    kept (in :data:`STORE_DIR`, by its SHA-256), False if nothing was there to keep (missing, or no file)."""

    subagent: str
    path: str
    kept: bool


def put_back_edited(files: ProjectFiles, release: str, subagents: Sequence[str]) -> list[PutBack]:
    """Each of ``subagents`` whose file is not ``release``'s (edited, replaced or removed after its validator was
    named), put back as the release delivers it, what was there kept first; [] if every one is the release's.

    A file that cannot be put back (a folder or link there, the text kept of the release's gone) is
    :class:`AssetClash`. A release the record does not know (set up before the bridge kept records) is not checked.
    """
    record = load_record(files)
    pinned = record.releases.get(release, {})
    out: list[PutBack] = []
    known: dict[str, Found] = {}  # (each path read once: _restore takes these)
    for subagent in dict.fromkeys(s for s in subagents if s in pinned):
        path, digest = pinned[subagent]
        data = _bytes_at(files, path)
        found = known[path] = _digest(data)
        if found == digest:
            continue
        if isinstance(data, bytes) and isinstance(found, str):  # kept, so the bridge may replace it: not lost
            files.replace(f"{STORE_DIR}/{found}", f"{found}.tmp", data)
            record.delivered[path] = found
        out.append(PutBack(subagent, path, isinstance(data, bytes)))
    if out:
        save_record(files, record)
        undone = "Nothing was recorded, and the verdicts recorded already for this step are discarded"
        head = (
            f"{undone}: these subagent files are not the ones this run's release delivers (changed after the "
            "validators were named), and the bridge will not overwrite them to put them back:"
        )
        then = "step_done again (it checks the step's files and names every validator again)"
        _restore(files, release, [p.subagent for p in out], head, then, undone, known)
    return out


def _kept_text(files: ProjectFiles, digest: str) -> str | None:
    """The text the bridge kept for ``digest``, checked against it; None if it is gone or altered."""
    try:
        data = read_regular(files.at(f"{STORE_DIR}/{digest}"), MAX_ASSET_BYTES)
        return data.decode("utf-8") if sha256_hex(data) == digest else None
    except (OSError, UnicodeDecodeError):
        return None


def _copy_gone(gone: Sequence[tuple[str, str]], missing: bool, then: str, undone: str) -> CopyGone:
    """The refusal to put back ``gone`` (path, digest), whose kept texts are gone or altered.

    It says what is at the first path (``missing``: nothing) and that the file put back as delivered lets
    ``then`` go on: the run is not lost while the user still has it (moved away, or in version control)."""
    path = gone[0][0]
    there = "is missing" if missing else "is not this run's release's file"
    return CopyGone(
        f"{undone}: {path} {there}, and the copy the bridge kept of it in {STORE_DIR} is gone or "
        "altered, so the bridge cannot put it back. If the user still has the file the bridge delivered there "
        f"(moved away, or in version control), ask them to put it back unchanged, then call {then}; if not, "
        "call start_run with new_run true for a new run.",
        [d for _, d in gone],
        then,
    )
