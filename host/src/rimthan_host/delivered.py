"""What the bridge delivered into the project, so it never overwrites what the user owns.

Setup installs the release's prompt, skill, subagents and adapter at
project-local paths (``.claude/agents/<id>.md`` and the like) that a user may
also use for files of their own. Like git refusing to overwrite an untracked
file, the bridge writes at such a path only if it is free, already holds the
asset's exact bytes, or holds exactly what the bridge delivered there before
(``.rimthan/delivered.json``: path -> SHA-256, replaced atomically, written
and read only through real directories and files). Every path is checked
before any is written: a clash refuses the whole setup, nothing delivered.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from rimthan_workflow_registry.canonical import sha256_hex

from .files import FileTooLarge, ProjectFiles, open_own, read_regular
from .protocol import HarnessError

RECORD_PATH = ".rimthan/delivered.json"
MAX_RECORD_BYTES = 1 << 20  # far past any catalogue's assets; a larger record is refused as damaged
_SHA256_HEX = 64


class AssetClash(HarnessError):
    """Setup refused: a file at an asset's path is not the bridge's to replace; nothing was delivered."""


def load_record(files: ProjectFiles) -> dict[str, str]:
    """The delivery record (path -> SHA-256 of what the bridge wrote there); empty if there is none."""
    target = files.safe_path(RECORD_PATH)
    try:
        data = read_regular(target, MAX_RECORD_BYTES)
    except FileNotFoundError:
        return {}
    except FileTooLarge as exc:
        raise _damaged(f"it is {exc.size} bytes, past {exc.limit}") from None
    except OSError as exc:
        raise _damaged(f"it cannot be read as a file: {exc.strerror}") from None
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise _damaged("it is not JSON") from None
    record = value.get("delivered") if isinstance(value, dict) else None
    if not isinstance(record, dict) or not all(_is_digest(v) for v in record.values()):
        raise _damaged("it is not a map of paths to SHA-256 digests")
    return {str(k): str(v) for k, v in record.items()}


def _is_digest(value: Any) -> bool:
    return isinstance(value, str) and len(value) == _SHA256_HEX and all(c in "0123456789abcdef" for c in value)


def _damaged(why: str) -> AssetClash:
    return AssetClash(
        f"{RECORD_PATH} is damaged ({why}); the workspace was not set up, nothing was delivered. It lists the files "
        f"the bridge delivered; delete it (the bridge then replaces only files identical to the release's) and call "
        "resume_run to set up the workspace again."
    )


def save_record(files: ProjectFiles, record: Mapping[str, str]) -> None:
    """Replace the delivery record atomically (a temporary file, fsynced, renamed over it)."""
    target = files.safe_path(RECORD_PATH)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = files.safe_path(RECORD_PATH + ".tmp")
    data = json.dumps({"delivered": dict(sorted(record.items()))}, indent=1).encode("utf-8")
    with os.fdopen(open_own(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, target)  # (a symbolic link at the record's path is replaced, not followed)


def clash(files: ProjectFiles, path: str, sha256: str, record: Mapping[str, str]) -> str | None:
    """Why the file at ``path`` must not be replaced by the asset of digest ``sha256``, or None if it may be."""
    target = files.safe_path(path)
    if not target.exists() and not target.is_symlink():
        return None
    try:
        found = sha256_hex(read_regular(target))
    except OSError:
        return f"{path} is there and is not a regular file"
    if found == sha256:
        return None
    if path not in record:
        return f"{path} is there and is not a file the bridge delivered (it is the user's own)"
    if record[path] != found:
        return f"{path} was changed since the bridge delivered it"
    return None


def check_free(files: ProjectFiles, assets: Sequence[Mapping[str, Any]], record: Mapping[str, str]) -> None:
    """Every asset's path may be written; else :class:`AssetClash` naming each file, before anything is written."""
    clashes = [c for a in assets if (c := clash(files, a["install_path"], a["sha256"], record)) is not None]
    if clashes:
        raise AssetClash(
            "The workspace was not set up and nothing was delivered: the release installs its prompt, skill and "
            "subagents at paths where the bridge found files it will not overwrite:\n"
            + "\n".join(f"- {c}" for c in clashes)
            + "\nAsk the user to move or rename each of these files (keep their content elsewhere), "
            "then call resume_run to set up the workspace again."
        )
