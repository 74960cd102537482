"""A step's files as the model wrote them: what is missing, misplaced or unusable, said so it can be fixed.

Before the bridge attests a step's outputs it looks at each declared path
the way :class:`~rimthan_host.project_files.ProjectFiles` will read it: inside the
project, through no symbolic link, a regular UTF-8 file with content. Each
problem is one sentence naming the file and what to do. After the verifier
checked the files, its refusals are grouped by file with the copy of the
file's JSON Schema; before the last verdict is submitted, the files are
compared with what the validators were given, and a file refused again with the bytes refused the last time
is said to be unchanged (:class:`RefusedFiles`).
"""

from __future__ import annotations

import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from rimthan_workflow_registry.canonical import sha256_hex
from rimthan_workflow_registry.errors import quoted

from .files import file_status, first_symlink
from .project_files import ProjectFiles, WrittenFile, link_words
from .protocol import HarnessError


@dataclass(frozen=True)
class StepFiles:
    """The step's declared outputs, each read from disk once: the bytes of each that can be used (by path), and one
    sentence per one that cannot (:func:`read_step_files`). The check, the digests and the attestation share them."""

    read: dict[str, bytes]
    problems: list[str]

    def changed(self, artifacts: Sequence[WrittenFile]) -> list[str]:
        """The attested files whose bytes, as read here, are no longer what the validators were given (or unread)."""
        return [a.path for a in artifacts if a.path not in self.read or sha256_hex(self.read[a.path]) != a.sha256]


def read_step_files(files: ProjectFiles, outputs: Sequence[Mapping[str, Any]]) -> StepFiles:
    """Each declared output read once (:func:`_read`): its bytes, or why it cannot be read as the step's file."""
    read: dict[str, bytes] = {}
    problems: list[str] = []
    for output in outputs:
        path = str(output["path"])
        found = _read(files, path, int(output["max_bytes"]))
        if isinstance(found, bytes):
            read[path] = found
        else:
            problems.append(found)
    return StepFiles(read, problems)


def unwritten(files: ProjectFiles, outputs: Sequence[Mapping[str, Any]]) -> list[str]:
    """The paths of the declared outputs not written yet: told by what is at each (:func:`_written`), never by
    reading it; what else is wrong with one, the read at step_done says (:func:`read_step_files`)."""
    return [str(o["path"]) for o in outputs if not _written(files, str(o["path"]), int(o["max_bytes"]))]


def _written(files: ProjectFiles, rel_path: str, max_bytes: int) -> bool:
    """Whether a regular file with content, within ``max_bytes``, is at ``rel_path`` inside the project (its status,
    found through the walk: outside the project, a link or a folder swapped for one is not written)."""
    try:
        found = file_status(files.at(rel_path))
    except (HarnessError, OSError):
        return False
    return found is not None and stat.S_ISREG(found.st_mode) and 0 < found.st_size <= max_bytes


def _read(files: ProjectFiles, rel_path: str, max_bytes: int) -> bytes | str:
    """The bytes of the step's file at ``rel_path``, or the sentence saying why it cannot be used and what to do."""
    path = quoted(rel_path)  # as every refusal names a path: one line, whatever it holds
    if rel_path.startswith("/") or ".." in rel_path.split("/"):
        return f"{path} is outside the project; the bridge reads only files inside {quoted(files.root)}."
    current = files.root / rel_path
    link = first_symlink(files.root, PurePosixPath(rel_path))
    if link == current:
        return link_words(rel_path)
    if link is not None:
        where = quoted(link.relative_to(files.root).as_posix())
        return (
            f"{where} is a symbolic link, so {path} would be read from outside the project. "
            f"Replace {where} with a real directory and write {path} inside the project."
        )
    try:
        data = files.read_written(rel_path, max_bytes=max_bytes)  # (the walk; never blocks; too large: never read)
    except HarnessError as exc:
        return str(exc)
    if data is None:
        return f"{path} does not exist. Write it at exactly this path in the project directory {quoted(files.root)}."
    if not data.strip():
        return f"{path} is empty. Write its full content."
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return f"{path} is not UTF-8 text. Write it again as UTF-8."
    return data


def refusal_words(
    failures: Sequence[Mapping[str, Any]], outputs: Sequence[Mapping[str, Any]], schemas: Mapping[str, str]
) -> list[str]:
    """The verifier's findings on the step's files, grouped by file, with the schema copy to read.

    ``schemas`` maps an output's path to its JSON Schema's copy in the project.
    """
    by_artifact = {str(o["id"]): str(o["path"]) for o in outputs}
    grouped: dict[str, list[str]] = {}
    for failure in failures:
        path = by_artifact.get(str(failure.get("artifact_id")), "")
        where = f" at {failure['pointer']}" if failure.get("pointer") not in (None, "", "/") else ""
        grouped.setdefault(path, []).append(f"  - {failure.get('code')}{where}: {failure.get('message')}")
    lines = []
    for path, findings in grouped.items():
        schema = f" (its JSON Schema: {schemas[path]}; read it and match it)" if path in schemas else ""
        lines += [f"{path or 'The step'}{schema}:", *findings]
    return lines


def changed_files(files: ProjectFiles, artifacts: Sequence[WrittenFile]) -> list[str]:
    """The attested files whose bytes on disk are no longer what the validators were given.

    A file is read up to its attested size: a larger one has changed, unread.
    """
    changed = []
    for artifact in artifacts:
        try:
            data = files.read_back(artifact.path, max_bytes=artifact.size)
        except HarnessError:
            changed.append(artifact.path)
            continue
        if sha256_hex(data) != artifact.sha256:
            changed.append(artifact.path)
    return changed


@dataclass
class RefusedFiles:
    """The SHA-256 of each file the verifier refused in the last check, by run, step and path."""

    last: dict[tuple[str, str, str], str] = field(default_factory=dict)

    def note(
        self, run: str, step: str, read: Sequence[WrittenFile], failures: Sequence[Mapping[str, Any]]
    ) -> list[str]:
        """Keep the files ``failures`` refuse (none: a check that passed); one line per file refused in the last
        check too with the same bytes: the model called step_done again without changing it."""
        ids = {str(f.get("artifact_id")) for f in failures}
        now = {(run, step, w.path): w.sha256 for w in read if w.artifact_id in ids}
        same = [key[2] for key, digest in now.items() if self.last.get(key) == digest]
        self.last = now
        return [
            f"{path} is unchanged since the last attempt: the verifier refused these same bytes before; change the "
            "file as said above first."
            for path in same
        ]
