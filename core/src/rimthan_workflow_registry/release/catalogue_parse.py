"""Parsing the TOML a release engineer writes into the typed records of ``catalogue``.

Closed parsing: every key of a table must be taken, types and id patterns are
checked, and a problem is a ``CatalogueError`` naming the file and key, never
silently ignored. Files are size- and depth-limited before they are parsed
(``rimthan_workflow_registry.limits``).
"""

from __future__ import annotations

import re
from typing import Any

from rimthan_workflow_registry.errors import CatalogueError, FailureCode, closest_name
from rimthan_workflow_registry.limits import MAX_CATALOGUE_FILE_BYTES, parse_bounded_toml
from rimthan_workflow_registry.release.catalogue import (
    ASSET_KINDS,
    CATALOGUE_FORMAT,
    DELIVERY_KINDS,
    ID_PATTERN,
    MEDIA_TYPES,
    PREDICATE_OPERATORS,
    SEMVER_PATTERN,
    WRITE_POLICIES,
    AssetDefinition,
    Branch,
    HostAdapter,
    OutputDeclaration,
    Predicate,
    Question,
    Scalar,
    Scope,
    StepDefinition,
    ValidatorDefinition,
    WorkflowDefinition,
)
from rimthan_workflow_registry.release.format import CATALOGUE_MANIFEST_NAME

# matched with fullmatch: "$" would also take a value that ends in a newline
_ID = re.compile(ID_PATTERN)
_DOTTED_ID = re.compile(r"[a-z0-9][a-z0-9.-]{0,127}")
_CAPABILITY = re.compile(r"[a-z0-9][a-z0-9.-]{0,63}")

# What each authoring pattern expects, in words an author can act on.
_EXPECTED: dict[re.Pattern[str], tuple[str, str]] = {
    SEMVER_PATTERN: ("version", "MAJOR.MINOR.PATCH, optionally -PRERELEASE and +BUILD (e.g. 1.0.0, 1.0.0-rc.1)"),
    _ID: ("identifier", "lowercase letters, digits and hyphens, starting with a letter or digit (e.g. my-flow)"),
    _DOTTED_ID: ("name", "lowercase letters, digits, dots and hyphens (e.g. example.my-flow)"),
    _CAPABILITY: ("capability", "lowercase letters, digits, dots and hyphens (e.g. workspace.write)"),
}


class _Table:
    """A TOML table being consumed: every key must be taken, types are checked."""

    def __init__(self, data: Any, where: str, path: str) -> None:
        if not isinstance(data, dict):
            raise _error(path, f"{where} must be a table")
        self._data = dict(data)
        self._asked: list[str] = []  # every key this table takes, for naming the one a misspelt key meant
        self.where = where
        self.path = path

    def _get(self, key: str, kind: type | tuple[type, ...], required: bool, default: Any) -> Any:
        self._asked.append(key)
        if key not in self._data:
            if required:
                raise self._missing(key)
            return default
        value = self._data.pop(key)
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
            raise _error(self.path, f"{self.where}.{key} has the wrong type ({type(value).__name__})")
        return value

    def text(
        self, key: str, *, required: bool = True, default: str | None = None, pattern: re.Pattern[str] | None = None
    ) -> Any:
        value = self._get(key, str, required, default)
        if value is not None and pattern is not None and not pattern.fullmatch(value):
            noun, form = _EXPECTED.get(pattern, ("value", f"text matching {pattern.pattern}"))
            raise _error(self.path, f"{self.where}.{key}: {value!r} is not a valid {noun}: expected {form}")
        return value

    def positive_int(self, key: str, *, required: bool = True, default: int | None = None) -> Any:
        value = self._get(key, int, required, default)
        if value is not None and value <= 0:
            raise _error(self.path, f"{self.where}.{key} must be a positive integer")
        return value

    def strs(self, key: str, *, pattern: re.Pattern[str] | None = None) -> tuple[str, ...]:
        values = self._get(key, list, False, [])
        for value in values:
            if not isinstance(value, str) or (pattern is not None and not pattern.fullmatch(value)):
                raise _error(self.path, f"{self.where}.{key} holds an invalid entry {value!r}")
        twice = next((value for index, value in enumerate(values) if value in values[:index]), None)
        if twice is not None:
            raise _error(
                self.path,
                f"{self.where}.{key} lists an entry twice: {twice!r}",
                f"in {self.path}, keep one {twice!r} in {key}",
            )
        return tuple(values)

    def choices(self, key: str) -> tuple[Scalar, ...]:
        """A closed list of strings, integers or booleans: at least one, none twice (a branch predicate's values)."""
        values = self._get(key, list, True, None)
        if not values or not all(isinstance(value, str | int) for value in values):
            raise _error(self.path, f"{self.where}.{key} must list strings, integers or booleans (at least one)")
        if len({(type(value), value) for value in values}) != len(values):
            raise _error(self.path, f"{self.where}.{key} lists a choice twice")
        return tuple(values)

    def tables(self, key: str) -> list[Any]:
        tables: list[Any] = self._get(key, list, False, [])
        return tables

    def table(self, key: str, *, required: bool = False) -> Any:
        return self._get(key, dict, required, None)

    def done(self) -> None:
        if self._data:
            unknown = ", ".join(sorted(self._data))
            meant = {key: closest_name(key, self._asked) for key in sorted(self._data)}
            renames = [f"{key!r} to {name!r}" for key, name in meant.items() if name is not None]
            hint = f" (a misspelling? {self.where} takes {', '.join(repr(k) for k in sorted(set(self._asked)))})"
            raise _error(
                self.path,
                f"{self.where}: unknown key(s) {unknown}" + (hint if self._asked else ""),
                self._rename(", ".join(renames)) if renames else None,
            )

    def _missing(self, key: str) -> CatalogueError:
        """A required key is absent: name the key written in its place, if one looks like a misspelling of it."""
        written = closest_name(key, [k for k in self._data if k not in self._asked])
        if written is None:
            return _error(self.path, f"{self.where}: missing required key {key!r}")
        return _error(
            self.path,
            f"{self.where}: missing required key {key!r} (found {written!r} instead, a misspelling?)",
            self._rename(f"{written!r} to {key!r}"),
        )

    def _rename(self, renames: str) -> str:
        """The next step for a misspelt key: the file, the table when it is not the file's top level, the renames."""
        table = f" ({self.where})" if "[" in self.where else ""
        return f"in {self.path}{table}, rename {renames}"


def _error(path: str, message: str, next_step: str | None = None) -> CatalogueError:
    return CatalogueError(FailureCode.CATALOGUE_INVALID, message, path=path, next_step=next_step)


def _parse_toml(data: bytes, path: str) -> dict[str, Any]:
    """A catalogue TOML file within the size and nesting limits (``rimthan_workflow_registry.limits``)."""
    if len(data) > MAX_CATALOGUE_FILE_BYTES:
        raise _error(path, f"{path} is {len(data)} bytes; a catalogue file holds at most {MAX_CATALOGUE_FILE_BYTES}")
    return parse_bounded_toml(
        data, lambda message, step: _error(path, message, step), unreadable="not valid TOML", name=path
    )


def parse_catalogue_manifest(data: bytes, path: str = CATALOGUE_MANIFEST_NAME) -> tuple[dict[str, Any], Scope]:
    """Parse ``catalogue.toml``: identity, scope and the files it names."""
    top = _Table(_parse_toml(data, path), CATALOGUE_MANIFEST_NAME, path)
    fmt = top._get("format", int, True, None)
    if fmt != CATALOGUE_FORMAT:
        raise _error(path, f"format = {fmt} is not supported (expected {CATALOGUE_FORMAT})")
    cat = _Table(top.table("catalogue", required=True), "[catalogue]", path)
    scope_t = _Table(top.table("scope", required=True), "[scope]", path)
    info = {
        "workflows": top.strs("workflows"),
        "host_adapters": top.strs("host_adapters"),
        "name": cat.text("name", pattern=_ID),
        "version": cat.text("version", pattern=SEMVER_PATTERN),
        "title": cat.text("title"),
        "description": cat.text("description", required=False, default=""),
    }
    scope = Scope(name=scope_t.text("name", pattern=_DOTTED_ID), profile=scope_t.text("profile", pattern=_ID))
    for table in (top, cat, scope_t):
        table.done()
    if not info["workflows"]:
        raise _error(path, "catalogue.toml names no workflows")
    return info, scope


def parse_workflow(data: bytes, path: str) -> WorkflowDefinition:
    t = _Table(_parse_toml(data, path), "workflow", path)
    workflow = WorkflowDefinition(
        id=t.text("id", pattern=_ID),
        version=t.text("version", pattern=SEMVER_PATTERN),
        owner=t.text("owner", pattern=_DOTTED_ID),
        title=t.text("title"),
        summary=t.text("summary", required=False, default=""),
        entry_aliases=t.strs("entry_aliases", pattern=_ID),
        confirmed_state_schema=t.text("confirmed_state_schema"),
        required_capabilities=t.strs("required_capabilities", pattern=_CAPABILITY),
        host_adapters=t.strs("host_adapters"),
        assets=tuple(_parse_asset(a, i, path) for i, a in enumerate(t.tables("assets"))),
        validators=tuple(_parse_validator(v, i, path) for i, v in enumerate(t.tables("validators"))),
        steps=tuple(_parse_step(s, i, path) for i, s in enumerate(t.tables("steps"))),
        source=path,
    )
    t.done()
    return workflow


def _parse_asset(data: Any, index: int, path: str) -> AssetDefinition:
    t = _Table(data, f"assets[{index}]", path)
    asset = AssetDefinition(id=t.text("id", pattern=_ID), kind=t.text("kind"), file=t.text("file"))
    t.done()
    if asset.kind not in ASSET_KINDS:
        raise _error(path, f"assets[{index}].kind {asset.kind!r} is not one of {', '.join(ASSET_KINDS)}")
    return asset


def _parse_validator(data: Any, index: int, path: str) -> ValidatorDefinition:
    t = _Table(data, f"validators[{index}]", path)
    validator = ValidatorDefinition(
        id=t.text("id", pattern=_ID),
        version=t.text("version", pattern=SEMVER_PATTERN),
        instruction=t.text("instruction"),
        subagent=t.text("subagent", pattern=_ID),
        required_capabilities=t.strs("required_capabilities", pattern=_CAPABILITY),
    )
    t.done()
    return validator


def _parse_step(data: Any, index: int, path: str) -> StepDefinition:
    where = f"steps[{index}]"
    t = _Table(data, where, path)
    question_t = t.table("question")
    step = StepDefinition(
        id=t.text("id", pattern=_ID),
        title=t.text("title"),
        instruction=t.text("instruction"),
        next=t.text("next", required=False, pattern=_ID),
        branches=tuple(_parse_branch(b, f"{where}.branches[{i}]", path) for i, b in enumerate(t.tables("branches"))),
        question=_parse_question(question_t, f"{where}.question", path) if question_t is not None else None,
        outputs=tuple(_parse_output(o, f"{where}.outputs[{i}]", path) for i, o in enumerate(t.tables("outputs"))),
        validators=t.strs("validators"),
        inputs=t.strs("inputs", pattern=_ID),
        host_assets=t.strs("host_assets", pattern=_ID),
        max_total_bytes=t.positive_int("max_total_bytes", required=False),
        definition=data,
        requires_confirmed=t.strs("requires_confirmed"),
    )
    t.done()
    if step.next is not None and step.branches:
        raise _error(path, f"{where} ({step.id}) has both `next` and `branches`")
    if step.question is not None and not step.branches:
        raise _error(path, f"{where} ({step.id}) has a `question` but no `branches`")
    return step


def _parse_output(data: Any, where: str, path: str) -> OutputDeclaration:
    t = _Table(data, where, path)
    output = OutputDeclaration(
        id=t.text("id", pattern=_ID),
        path=t.text("path"),
        media_type=t.text("media_type"),
        max_bytes=t.positive_int("max_bytes"),
        schema=t.text("schema", required=False),
        write_policy=t.text("write_policy", required=False, default="create_or_replace"),
    )
    t.done()
    if output.media_type not in MEDIA_TYPES:
        raise _error(path, f"{where}.media_type {output.media_type!r} is not one of {', '.join(MEDIA_TYPES)}")
    if output.write_policy not in WRITE_POLICIES:
        raise _error(path, f"{where}.write_policy {output.write_policy!r} is not one of {WRITE_POLICIES}")
    if (output.media_type == "application/json") != (output.schema is not None):
        raise _error(path, f"{where}: a JSON output needs a `schema`, and only JSON outputs may have one")
    return output


def _parse_branch(data: Any, where: str, path: str) -> Branch:
    t = _Table(data, where, path)
    target = t.text("target", pattern=_ID)
    when = _parse_predicate(t.table("when", required=True), f"{where}.when", path)
    t.done()
    return Branch(target=target, when=when)


def _parse_predicate(data: Any, where: str, path: str) -> Predicate:
    """Closed vocabulary: ``field`` plus exactly one of ``equals`` / ``one_of``."""
    if not isinstance(data, dict):
        raise CatalogueError(FailureCode.BRANCH_PREDICATE_INVALID, f"{where} must be a table", path=path)
    operators = [k for k in data if k != "field"]
    if "field" not in data or len(operators) != 1 or operators[0] not in PREDICATE_OPERATORS:
        raise CatalogueError(
            FailureCode.BRANCH_PREDICATE_INVALID,
            f"{where} must be {{field = ..., equals = V}} or {{field = ..., one_of = [...]}}, got keys {sorted(data)}",
            path=path,
        )
    operator = operators[0]
    raw = data[operator]
    if operator == "one_of" and not isinstance(raw, list):
        raise CatalogueError(FailureCode.BRANCH_PREDICATE_INVALID, f"{where}.one_of must be a list", path=path)
    values = tuple(raw) if operator == "one_of" else (raw,)
    if not isinstance(data["field"], str) or not values or not all(isinstance(v, str | int) for v in values):
        raise CatalogueError(
            FailureCode.BRANCH_PREDICATE_INVALID,
            f"{where}: field must be a string and values strings, integers or booleans",
            path=path,
        )
    return Predicate(field=data["field"], operator=operator, values=values)


def _parse_question(data: Any, where: str, path: str) -> Question:
    t = _Table(data, where, path)
    question = Question(field=t.text("field"), prompt=t.text("prompt"), choices=t.choices("choices"))
    t.done()
    return question


def parse_host_adapter(data: bytes, path: str) -> HostAdapter:
    t = _Table(_parse_toml(data, path), "host adapter", path)
    paths_t = _Table(t.table("paths", required=True), "[paths]", path)
    paths = {kind: paths_t.text(kind) for kind in DELIVERY_KINDS}
    paths_t.done()
    adapter = HostAdapter(
        id=t.text("id", pattern=_ID),
        version=t.text("version", pattern=SEMVER_PATTERN),
        harness=t.text("harness", pattern=_ID),
        title=t.text("title"),
        instruction=t.text("instruction"),
        capabilities=t.strs("capabilities", pattern=_CAPABILITY),
        validator_capabilities=t.strs("validator_capabilities", pattern=_CAPABILITY),
        paths=paths,
        source=path,
    )
    t.done()
    return adapter
