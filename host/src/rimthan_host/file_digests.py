"""Files a JSON output names by path and SHA-256: the bridge computes the digests, the model never does.

A JSON output may bind other files of the project by path and digest (the
decision record's ``basis``: ``{"artifact_id", "path", "sha256"}``). The
protocol leaves such bindings to the workflow's validators; but the bridge
sees the workspace, so before a step's files go to the verifier it reads
every file so named from disk and:

- fills in ``sha256`` where the model left it out (absent, null or empty),
  rewriting the output (JSON, two-space indent) - the step's reply says so;
- refuses a ``sha256`` the model wrote that is not the file's on disk
  (``file_digest_mismatch``), and a named file it cannot read (``file_missing``);
- refuses a file named with the ``artifact_id`` of an artifact this run
  validated earlier (one a submitted round attested and the verifier took:
  the run's state file keeps each one's id, path and digest, so this holds across a restart and
  ``resume_run``) whose bytes changed since (``input_binding_mismatch``): the
  output would rest on evidence nobody validated. Such a file is found by
  its id or by its path; its id named at another path is refused too;
- refuses a path not written as the project path it names (``./``, ``//``),
  through ``..``, outside the project or through a symbolic link (``path_unsafe``).

Nothing is sent while any of these stands. An object is such a binding when
it has a string ``path`` and an ``artifact_id`` or ``sha256`` member; a
document that is not strict JSON is left to the verifier, which refuses it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from jsonpointer import escape  # (RFC 6901: ``~`` and ``/`` in a key; a dependency of the core already)
from rimthan_workflow_registry.canonical import sha256_hex
from rimthan_workflow_registry.errors import FailureCode, RegistryError, quoted
from rimthan_workflow_registry.limits import MAX_JSON_DEPTH, MAX_STEP_ARTIFACT_BYTES
from rimthan_workflow_registry.strict_json import parse_strict_json

from .project_files import ProjectFiles
from .protocol import HarnessError

JSON_MEDIA_TYPE = "application/json"


@dataclass(frozen=True)
class Evidence:
    """A file this run validated: its artifact id, path and SHA-256 as attested (kept in the run's state file)."""

    artifact_id: str
    path: str
    sha256: str

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "sha256": self.sha256}


def evidence_from_json(value: Any) -> dict[str, Evidence] | None:
    """The evidence a state file keeps (``{artifact_id: {"path", "sha256"}}``), None if it is not that shape."""
    if not isinstance(value, dict):
        return None
    out = {}
    for artifact_id, entry in value.items():
        if not (isinstance(entry, dict) and set(entry) == {"path", "sha256"}
                and all(isinstance(entry[k], str) for k in entry)):  # fmt: skip
            return None
        out[artifact_id] = Evidence(artifact_id, entry["path"], entry["sha256"])
    return out


@dataclass
class Digests:
    """What checking an output's named files found: the digests filled in, or why nothing may be sent."""

    filled: list[str] = field(default_factory=list)  # "<output>: <pointer> (<path>)"
    problems: list[tuple[FailureCode, str]] = field(default_factory=list)
    rewritten: dict[str, bytes] = field(default_factory=dict)  # path -> the bytes written, the digests filled in
    read: dict[str, str] = field(default_factory=dict)  # path -> its SHA-256, each named file read once per check


def check_named_files(
    files: ProjectFiles,
    outputs: Sequence[Mapping[str, Any]],
    validated: Mapping[str, Evidence],
    read: Mapping[str, bytes] | None = None,
) -> Digests:
    """Check (and fill in) the digests of the files each JSON output of the step names; rewrite those filled.

    ``read``: the outputs' bytes as just read, by path (``outputs.read_step_files``): not read again. The bytes of
    each output rewritten are in :attr:`Digests.rewritten`."""
    found = Digests()
    rewrites: list[tuple[Mapping[str, Any], Any]] = []
    for output in outputs:
        document = _document(files, output, read)
        if document is None:
            continue
        before = len(found.filled)
        for pointer, binding in _bindings(document, ""):
            _check(files, output, pointer, binding, validated, found)
        if len(found.filled) > before:
            rewrites.append((output, document))
    if not found.problems:
        for output, document in rewrites:
            text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
            written = files.write(str(output["id"]), str(output["path"]), str(output["media_type"]), text)
            found.rewritten[written.path] = written.text.encode("utf-8")
    return found


def _document(files: ProjectFiles, output: Mapping[str, Any], read: Mapping[str, bytes] | None) -> Any:
    """The JSON output's value, None if it is no JSON output, not written yet or not strict JSON (the verifier's)."""
    path = str(output["path"])
    if output.get("media_type") != JSON_MEDIA_TYPE:
        return None
    try:
        data = read.get(path) if read is not None else files.read_written(path, max_bytes=int(output["max_bytes"]))
        if data is None:
            return None
        return parse_strict_json(data, where="", code=FailureCode.JSON_PARSE_FAILED, max_depth=MAX_JSON_DEPTH)
    except (HarnessError, RegistryError):
        return None


def _bindings(value: Any, pointer: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every object in ``value`` that binds a file: a string ``path`` with an ``artifact_id`` or ``sha256``."""
    if isinstance(value, dict):
        if isinstance(value.get("path"), str) and ("artifact_id" in value or "sha256" in value):
            yield pointer, value
        for key, item in value.items():
            yield from _bindings(item, f"{pointer}/{escape(key)}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _bindings(item, f"{pointer}/{index}")


def _check(
    files: ProjectFiles,
    output: Mapping[str, Any],
    pointer: str,
    binding: dict[str, Any],
    validated: Mapping[str, Evidence],
    found: Digests,
) -> None:
    where, path = f"{quoted(output['path'])} at {quoted(pointer or '/')}", str(binding["path"])
    if path == output["path"]:
        return
    problem = _path_problem(files, where, path)
    try:
        actual = _digest_of(files, path, found.read) if problem is None else ""
    except HarnessError as exc:
        problem = FailureCode.FILE_MISSING, f"{where} names {quoted(path)}, which cannot be read: {exc}"
    problem = problem or _evidence_problem(where, path, binding, validated)
    if problem is not None:
        found.problems.append(problem)
        return
    earlier = validated.get(str(binding.get("artifact_id"))) or next(
        (e for e in validated.values() if e.path == path), None
    )  # (by its id, or by its path: a binding naming another id, or none, names the same file)
    if earlier is not None and earlier.sha256 != actual:
        found.problems.append(
            (FailureCode.INPUT_BINDING_MISMATCH,
             f"{quoted(path)} ({earlier.artifact_id}) changed after this run validated it: {where} would rest on "
             "evidence nobody validated. Put the file back as it was validated (or ask the user how to go on)")
        )  # fmt: skip
        return
    given = binding.get("sha256")
    if given is None or given == "":
        binding["sha256"] = actual
        found.filled.append(f"{where} ({quoted(path)})")
    elif given != actual:
        found.problems.append(
            (FailureCode.FILE_DIGEST_MISMATCH,
             f"{where}: its sha256 is not the SHA-256 of {quoted(path)} as it is on disk. Do not compute or copy "
             "digests: delete the sha256 member and the bridge fills it in from the file")
        )  # fmt: skip


def _digest_of(files: ProjectFiles, path: str, read: dict[str, str]) -> str:
    """The SHA-256 of the file at ``path``, read once however many bindings name it (a record naming one 2 MiB
    file a thousand times is one read, and every binding gets the digest of the same bytes)."""
    if path not in read:
        read[path] = sha256_hex(files.read_back(path, max_bytes=MAX_STEP_ARTIFACT_BYTES))
    return read[path]


def _path_problem(files: ProjectFiles, where: str, path: str) -> tuple[FailureCode, str] | None:
    """Why ``path`` names no file of the project as written (outside it, through a link, spelled another way)."""
    canonical = PurePosixPath(path).as_posix()
    if canonical == ".":  # "", ".", "./": the project directory itself (an empty path quoted would show nothing)
        said = f"{where}: path {quoted(path) if path else '(empty)'} names the project directory, not a file in it"
        return FailureCode.PATH_UNSAFE, f"{said}; name a file inside the project (a path such as notes/basis.md)"
    if canonical != path:
        said = f"{where}: path {quoted(path)} is not a project path as the verifier compares it"
        return FailureCode.PATH_UNSAFE, f"{said}; write it as {quoted(canonical)} (no ./, // or trailing /)"
    if PurePosixPath(path).is_absolute():
        inside = _inside(files, PurePosixPath(path))
        spelled = f"write it as {quoted(inside)}" if inside else "name a file inside the project, relative to it"
        return (
            FailureCode.PATH_UNSAFE,
            f"{where}: path {quoted(path)} is absolute; {spelled} (the project's paths are relative to its directory)",
        )
    try:
        files.safe_path(path)
    except HarnessError as exc:
        return FailureCode.PATH_UNSAFE, f"{where} names {quoted(path)}: {exc}. Name a file inside the project"
    return None


def _inside(files: ProjectFiles, path: PurePosixPath) -> str | None:
    """``path``'s spelling relative to the project directory, if it lies inside it (without ``..``)."""
    for root in (files.root.absolute(), files.root.resolve()):
        if ".." not in path.parts and path.is_relative_to(root.as_posix()) and path != PurePosixPath(root.as_posix()):
            return path.relative_to(root.as_posix()).as_posix()
    return None


def _evidence_problem(
    where: str, path: str, binding: Mapping[str, Any], validated: Mapping[str, Evidence]
) -> tuple[FailureCode, str] | None:
    """A validated artifact's id at another file than the one this run validated under it."""
    earlier = validated.get(str(binding.get("artifact_id")))
    if earlier is None or earlier.path == path:
        return None
    return (FailureCode.INPUT_BINDING_MISMATCH,
            f"{where} names {earlier.artifact_id} at {quoted(path)}, but this run validated {earlier.artifact_id} "
            f"at {quoted(earlier.path)}: name it at {quoted(earlier.path)}")  # fmt: skip
