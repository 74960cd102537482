"""The source layout ``catalogues/NAME/VERSION`` (init's): a version folder names its catalogue and version.

A source in a folder named as a version (``0.5.0``) is read as ``NAME``
(its parent's name) at that version, by ``rimthan-pack init`` when it makes
one and by ``rimthan-pack build`` when it builds one: a ``catalogue.toml``
that says another name or version is refused (``catalogue_invalid``), not
warned about. A copied folder whose identity was never changed would
otherwise sign and publish a release under a name or version nobody meant,
found only later (``release_exists``, ``oci_tag_exists``, a fleet serving
the wrong catalogue); a warning scrolls past in CI and a signed release
cannot be taken back. A folder named as no version is not read at all.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING

from rimthan_workflow_registry.errors import (
    CatalogueError,
    FailureCode,
    RegistryError,
    closest_name,
    collected,
    quoted,
    shell_word,
)
from rimthan_workflow_registry.release import (
    CATALOGUE_MANIFEST_NAME,
    ID_PATTERN,
    identity_problem,
    is_semver,
    next_version,
    semver_key,
)
from rimthan_workflow_registry.strict_json import parse_strict_json

if TYPE_CHECKING:
    from rimthan_workflow_registry.release import Catalogue

    from .source import SourceFiles
    from .unreferenced_schema import UnreferencedSchema

_NAME = re.compile(ID_PATTERN)  # the catalogue rule for a name, matched whole


def version_folder(root: Path) -> tuple[str, str] | None:
    """``(NAME, VERSION)`` when ``root`` is ``.../NAME/VERSION`` (a folder named as a version), else ``None``.

    NAME is ``""`` for a version folder at the file system's root (``/0.1.0``), which names no catalogue.
    """
    folder = root.absolute()
    if not is_semver(folder.name):
        return None
    return folder.parent.name, folder.name


def catalogue_folder(root: Path, name: str) -> Path:
    """Where the catalogue ``name`` goes beside the one ``root`` (a version folder) is in, as the user wrote it."""
    above = root.parent.parent if root.parent.name else root.absolute().parent.parent
    return above / name


def refuse_folder_mismatch(root: Path, name: str, version: str) -> None:
    """Refuse a version folder whose ``catalogue.toml`` declares another version, or another name than its parent's."""
    layout = version_folder(root)
    if layout is None:
        return
    if layout[1] != version:
        raise _version_mismatch(root, layout[1], version)
    if layout[0] and layout[0] != name:
        raise _name_mismatch(root, layout[0], name, version)


def _version_mismatch(root: Path, folder: str, version: str) -> CatalogueError:
    renamed = shell_word(root.absolute().parent / version)
    return _mismatch(
        root,
        f"the source folder names version {folder} but [catalogue].version is {version!r}: "
        f"the build would publish {version}, not {folder}",
        f'set version = "{folder}" under [catalogue] in catalogue.toml, or, if {version} is meant, '
        f"move the source to {renamed} (a version folder holds that version's source)",
    )


def _name_mismatch(root: Path, parent: str, name: str, version: str) -> CatalogueError:
    moved = shell_word(catalogue_folder(root, name) / version)
    move = f"move the source to {moved} (a version folder's parent names its catalogue)"
    return _mismatch(
        root,
        f"the source folder {parent}/{version} names catalogue {parent!r} but [catalogue].name is {name!r}: "
        f"the build would publish {name}-{version}, not {parent}-{version}",
        f'set name = "{parent}" under [catalogue] in catalogue.toml, or, if {name} is meant, {move}'
        if _NAME.fullmatch(parent)
        else move,  # the folder's name is no catalogue name: only moving the source helps
    )


def _mismatch(root: Path, message: str, next_step: str) -> CatalogueError:
    return CatalogueError(
        FailureCode.CATALOGUE_INVALID, message, path=str(root / CATALOGUE_MANIFEST_NAME), next_step=next_step
    )


def new_version_step(root: Path, name: str, version: str) -> str | None:
    """What to do when ``root``'s version is already built, for a version folder (``None`` for any other source).

    Bumping ``[catalogue].version`` in place would be refused (the folder names the old version), and the
    old version's source is what its release was built from: the new version is a copy in a folder of its own.
    The version named is one build takes (the bounds build checks, ``identity_problem``); when the next
    version is past them (a long pre-release at the bound, ``-rc.9`` bumped to ``-rc.10``), none is named
    and the step says why.
    """
    if version_folder(root) is None:
        return None
    bumped = next_version(version)  # a version folder's name is a semantic version, and so is its catalogue's
    here, copy = (shell_word(folder) for folder in (root.absolute(), root.absolute().parent / bumped))
    problem = identity_problem("its release id", f"the next version, {bumped},", bumped, f"{name}@{bumped}")
    if problem is not None:
        return (
            f"releases are immutable: copy the source to a new version folder named as a version above {version} "
            f"and set that version under [catalogue] in its catalogue.toml; none is suggested: {problem}, so "
            f"choose a shorter one{_shorter_hint(version)}"
        )
    return (
        f"releases are immutable: copy the source to a new version folder (cp -r {here} {copy}), "
        f'set version = "{bumped}" under [catalogue] in its catalogue.toml, and build that'
    )


def _shorter_hint(version: str) -> str:
    """For a pre-release, the release it leads to: shorter, and above every pre-release of it."""
    release, dash, _pre = version.partition("+")[0].partition("-")
    return f" ({release}, the release it leads to, sorts above every pre-release of it)" if dash else ""


# The folders of the layout that hold definitions, the catalogue.toml key listing them, what each file defines
_DEFINITION_FOLDERS = (("workflows/", "workflows", "workflow"), ("adapters/", "host_adapters", "host adapter"))


def refuse_unlisted_definitions(source: SourceFiles, catalogue: Catalogue) -> None:
    """Refuse a ``.toml`` in ``workflows/`` or ``adapters/`` that ``catalogue.toml`` does not list.

    Only the listed files are read: an unlisted one (a new workflow never added to the list) would ship,
    signed, and never be served, found when a client's start is refused ``workflow_not_found``. One failure
    per file, each with its own next step (the first raised, the others in ``also``).
    """
    listed = {w.source for w in catalogue.workflows} | {a.source for a in catalogue.host_adapters}
    found = [
        _unlisted(source, path, key, what)
        for folder, key, what in _DEFINITION_FOLDERS
        for path in sorted(p for p in source.paths if p.startswith(folder) and p.endswith(".toml"))
        if path not in listed
    ]
    if found:
        raise collected(found)


def _unlisted(source: SourceFiles, path: str, key: str, what: str) -> CatalogueError:
    return CatalogueError(
        FailureCode.CATALOGUE_INVALID,
        f"a {what} file catalogue.toml does not list in {key}: only the files listed there are read, so it would "
        "ship, signed, and never be served",
        path=source.where(path),
        details={"definition": path, "list": key},
        next_step=f"add {json.dumps(path)} to {key} in catalogue.toml, or delete the file from the source",
    )


KEEP_MARK = "x-rimthan-unreferenced"
"""The top-level annotation that keeps a schema file no workflow references: its value says why it ships."""


def unreferenced_schemas(source: SourceFiles, catalogue: Catalogue) -> tuple[UnreferencedSchema, ...]:
    """The source's schema files (``schemas/*.json``, ``*.schema.json``) no workflow references and none marks kept."""
    referenced = {w.confirmed_state_schema for w in catalogue.workflows} | {
        o.schema for w in catalogue.workflows for s in w.steps for o in s.outputs if o.schema is not None
    }
    marks = {
        path: _keep_mark(source.read(path))
        for path in sorted(source.paths - referenced)
        if (path.startswith("schemas/") and path.endswith(".json")) or path.endswith(".schema.json")
    }
    found = {path: mark for path, mark in marks.items() if not (isinstance(mark, str) and mark.strip())}
    if not found:  # a non-empty string says why it ships: kept
        return ()
    from .unreferenced_schema import UnreferencedSchema  # defined only when a schema is unreferenced

    return tuple(
        UnreferencedSchema(path, closest_name(path, referenced), None if mark is _NO_MARK else quoted(json.dumps(mark)))
        for path, mark in found.items()
    )


_NO_MARK = object()


def _keep_mark(data: bytes) -> object:
    """A schema file's top-level ``x-rimthan-unreferenced`` value, or ``_NO_MARK`` (none, or not a JSON object)."""
    try:
        document = parse_strict_json(data, where="schema", code=FailureCode.SCHEMA_INVALID)
    except RegistryError:
        return _NO_MARK
    return document.get(KEEP_MARK, _NO_MARK) if isinstance(document, dict) else _NO_MARK


def refuse_unreferenced_schemas(source: SourceFiles, catalogue: Catalogue) -> None:
    """Refuse schema files no workflow references: each would ship, signed, and never check anything.

    Most often a reference still names the file it meant to replace (``decision-record.schema.json`` edited
    as ``decision-record-v2.schema.json``): runs then check the old schema. A file kept on purpose (a contract
    published for harness authors, a schema for a workflow still being written) says so with a top-level
    ``"x-rimthan-unreferenced": "<why>"``. One failure per file, each with its closest referenced name and
    its own next step, collected into the one refusal raised (the first, the others in ``also``).
    """
    found = unreferenced_schemas(source, catalogue)
    if found:
        raise _unreferenced(source, found[0], also=[_unreferenced(source, u) for u in found[1:]])


def _unreferenced(
    source: SourceFiles, schema: UnreferencedSchema, also: list[CatalogueError] | None = None
) -> CatalogueError:
    close = f" (closest referenced name: {schema.closest})" if schema.closest else ""
    keep = f'delete it, or, to ship it on purpose, add a top-level "{KEEP_MARK}": "<why it ships>" to it'
    said = f"no workflow references this JSON Schema{close}, so it would ship, signed, and never check anything"
    next_step = (
        f"if the reference to {schema.closest} meant this file, change it to {schema.path}; otherwise {keep}"
        if schema.closest
        else f"reference it from a workflow (confirmed_state_schema or an output's schema), {keep}"
    )
    if schema.mark is not None:  # meant to be kept, but the mark says no reason
        said += f'; its "{KEEP_MARK}" is {schema.mark}, not a non-empty string saying why it ships'
        next_step = f'set "{KEEP_MARK}" in it to a non-empty string saying why it ships, or delete the file'
    return CatalogueError(
        FailureCode.CATALOGUE_INVALID,
        said,
        path=source.where(schema.path),
        details={"schema": schema.path, "closest_referenced": schema.closest},
        next_step=next_step,
        also=also or (),
    )


def newer_releases(releases: Path, name: str, version: str) -> list[str]:
    """The versions of catalogue ``name`` above ``version`` that ``releases`` holds, newest first, by their folder
    names (``NAME-VERSION``, as build names them; an unreadable or missing directory holds none).

    A verifier that has served one of them keeps it as its activation floor, and refuses ``version`` below it
    (``rollback_refused``) unless its operator lowers the floor on purpose.
    """
    prefix = f"{name}-"
    try:
        found = [e.name.removeprefix(prefix) for e in releases.iterdir() if e.name.startswith(prefix) and e.is_dir()]
    except OSError:
        return []
    below = semver_key(version)
    newer = [v for v in found if is_semver(v) and semver_key(v) > below]
    return sorted(newer, key=semver_key, reverse=True)
