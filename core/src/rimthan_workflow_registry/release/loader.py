"""``ReleaseLoader``: turn catalogue files into a validated :class:`Catalogue`.

The loader sees files only through :class:`CatalogueFiles`, so the packager
(reading a source directory) and the verifier (reading a release whose bytes
were already checked against the signed manifest) share one implementation of
the catalogue rules: a catalogue that builds is a catalogue that loads.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from rimthan_workflow_registry.errors import CatalogueError, FailureCode, RegistryError, collected
from rimthan_workflow_registry.limits import MAX_CATALOGUE_FILE_BYTES, first_not_utf8, save_as_utf8_step
from rimthan_workflow_registry.release import catalogue_bounds as bounds
from rimthan_workflow_registry.release import catalogue_references as references
from rimthan_workflow_registry.release import catalogue_routes as routes
from rimthan_workflow_registry.release import catalogue_rules as rules
from rimthan_workflow_registry.release import confirmable_values as values
from rimthan_workflow_registry.release import write_paths
from rimthan_workflow_registry.release.catalogue import Catalogue
from rimthan_workflow_registry.release.catalogue_parse import (
    parse_catalogue_manifest,
    parse_host_adapter,
    parse_workflow,
)
from rimthan_workflow_registry.release.format import CATALOGUE_MANIFEST_NAME
from rimthan_workflow_registry.release.schema_checks import SCHEMA_CHECKS
from rimthan_workflow_registry.strict_json import parse_strict_json

if TYPE_CHECKING:
    from rimthan_workflow_registry.release.catalogue_schema import CatalogueSchema

T = TypeVar("T")


class CatalogueFiles(Protocol):
    """Read access to a catalogue's files (POSIX paths relative to its root)."""

    @property
    def paths(self) -> frozenset[str]: ...

    def read(self, path: str) -> bytes: ...


class CompiledSchemas(Mapping[str, "CatalogueSchema"]):
    """A catalogue's schemas by path, each compiled on first use and then kept.

    A build only copies the schemas, so it never compiles one and never imports
    jsonschema for them; the server compiles each on the first call that needs it.
    """

    def __init__(self, documents: Mapping[str, Any]) -> None:
        self._documents = documents
        self._compiled: dict[str, CatalogueSchema] = {}

    def __getitem__(self, path: str) -> CatalogueSchema:
        compiled = self._compiled.get(path)
        if compiled is None:
            from rimthan_workflow_registry.release.catalogue_schema import CatalogueSchema

            compiled = self._compiled.setdefault(path, CatalogueSchema(self._documents[path]))
        return compiled

    def __iter__(self) -> Iterator[str]:
        return iter(self._documents)

    def __len__(self) -> int:
        return len(self._documents)


@dataclass(frozen=True, repr=False)  # compared, never shown (test_build_dataclasses)
class SchemaSet:
    """Every JSON Schema of a catalogue, parsed once and compiled at most once."""

    documents: Mapping[str, Any]
    validators: Mapping[str, CatalogueSchema] = field(repr=False)

    def validator(self, path: str) -> CatalogueSchema:
        return self.validators[path]


@dataclass(frozen=True, repr=False)  # compared, never shown (test_build_dataclasses)
class LoadedCatalogue:
    """A catalogue that passed every rule, with its compiled schemas."""

    catalogue: Catalogue
    schemas: SchemaSet


class ReleaseLoader:
    """Parses and validates catalogues; the single home of the catalogue rules."""

    @classmethod
    def load_catalogue(cls, files: CatalogueFiles) -> Catalogue:
        return cls.load(files).catalogue

    @classmethod
    def load(cls, files: CatalogueFiles) -> LoadedCatalogue:
        paths = files.paths
        if CATALOGUE_MANIFEST_NAME not in paths:
            raise CatalogueError(
                FailureCode.CATALOGUE_INVALID, f"{CATALOGUE_MANIFEST_NAME} is missing", path=CATALOGUE_MANIFEST_NAME
            )
        info, scope = parse_catalogue_manifest(files.read(CATALOGUE_MANIFEST_NAME))  # (names the files parsed next)
        parsed = BrokenRules()  # each file parses alone: every one that does not is said
        workflows = parsed.each(info["workflows"], lambda p: parse_workflow(_read(files, p), p))
        adapters = parsed.each(info["host_adapters"], lambda p: parse_host_adapter(_read(files, p), p))
        parsed.raise_any()
        catalogue = Catalogue(
            name=info["name"],
            version=info["version"],
            title=info["title"],
            description=info["description"],
            scope=scope,
            workflows=workflows,
            host_adapters=adapters,
        )
        cls._validate_workflow_catalogue(catalogue, paths)
        rules.check_text_files(catalogue, files.read)
        schemas = _compile_schemas(catalogue, files)
        cls._validate_workflow_schemas(catalogue, schemas)
        return LoadedCatalogue(catalogue=catalogue, schemas=schemas)

    @staticmethod
    def _validate_workflow_catalogue(catalogue: Catalogue, paths: frozenset[str]) -> None:
        """Structural rules that need no file contents beyond the TOML: every broken one said.

        A rule that presupposes another (routes need every step reference resolved, write paths every pinned
        adapter too) runs only when that one passed, so no failure is the echo of another.
        """
        found = BrokenRules()
        found.check(rules.check_files_exist, catalogue, paths)
        found.check(rules.check_aliases, catalogue.workflows)
        adapters = found.check(references.check_host_adapters, catalogue)
        found.check(bounds.check_identities, catalogue)
        found.check(bounds.check_host_lists, catalogue)
        for workflow in catalogue.workflows:
            resolved = found.check(rules.check_first_step, workflow) & found.check(
                references.check_workflow_references, workflow
            )
            if resolved and adapters:
                found.check(write_paths.check_write_paths, catalogue, workflow)
            found.check(rules.check_step_shapes, workflow)
            if resolved:
                found.check(rules.check_reachability, workflow)
                found.check(routes.check_input_routes, workflow)
        found.raise_any()

    @staticmethod
    def _validate_workflow_schemas(catalogue: Catalogue, schemas: SchemaSet) -> None:
        """Rules that read the schemas: state fields a tool call carries, branch fields declared, values confirmable.

        A question's choices must each take a branch, and every choice and
        branch value must be one its field's schema accepts (``confirmable_values``);
        those run once the branches passed (their field is declared). Every broken rule is said.

        Validity (``check_schemas``) already ran in ``_compile_schemas`` on these
        very documents; against the 2020-12 metaschema it costs ~25 ms per schema,
        so it runs once per load, not twice.
        """
        found = BrokenRules()
        for workflow in catalogue.workflows:
            state_schema = schemas.documents[workflow.confirmed_state_schema]
            found.check(bounds.check_state_fields, workflow, state_schema)
            found.check(values.check_required_confirmed, workflow, state_schema)
            if found.check(rules.check_branches, workflow, state_schema):
                found.check(bounds.check_confirmable_values, workflow, state_schema)
                found.check(values.check_choices_lead_somewhere, workflow)
                found.check(values.check_values_accepted, workflow, state_schema)
        found.raise_any()


class BrokenRules:
    """The catalogue rules a load found broken (or the files it could not parse), in the order they ran: each a
    failure of its own, the first raised with the others (at most ``MAX_SAID_FAILURES`` in all) in its ``also``."""

    def __init__(self) -> None:
        self.found: list[RegistryError] = []

    def check(self, rule: Callable[..., None], *args: Any) -> bool:
        """Run ``rule``: whether it passed (a refusal it raises is kept, never lost)."""
        try:
            rule(*args)
        except RegistryError as exc:
            self._keep(exc)
            return False
        return True

    def each(self, paths: Iterable[str], parse: Callable[[str], T]) -> tuple[T, ...]:
        """``parse`` of each of ``paths`` that parses (a refusal it raises is kept): whole only once
        :meth:`raise_any` raised nothing."""
        done: list[T] = []
        for path in paths:
            try:
                done.append(parse(path))
            except RegistryError as exc:
                self._keep(exc)
        return tuple(done)

    def _keep(self, refused: RegistryError) -> None:
        """``refused`` and each failure its rule collected with it, each its own: :func:`collected` keeps the
        ``also`` of none of the failures it collects, so one left there would be lost."""
        self.found += [failure.with_also(()) for failure in refused.failures]

    def raise_any(self) -> None:
        if self.found:
            raise collected(self.found)


def _read(files: CatalogueFiles, path: str) -> bytes:
    if path not in files.paths:
        why = f"{CATALOGUE_MANIFEST_NAME} names missing file {path!r}"
        fix = f"create {path} next to {CATALOGUE_MANIFEST_NAME}, or remove {path!r} from its list there"
        raise rules.unresolved(CATALOGUE_MANIFEST_NAME, why, path, files.paths, fix=fix)
    return files.read(path)


def _compile_schemas(catalogue: Catalogue, files: CatalogueFiles) -> SchemaSet:
    referenced = sorted(
        {w.confirmed_state_schema for w in catalogue.workflows}
        | {o.schema for w in catalogue.workflows for s in w.steps for o in s.outputs if o.schema is not None}
    )
    raw = {p: files.read(p) for p in referenced}
    parsed = BrokenRules()  # each schema parses alone: every one that does not is said
    found = parsed.each(referenced, lambda p: _schema_document(raw[p], p))
    parsed.raise_any()
    documents = dict(zip(referenced, found, strict=True))
    rules.check_schemas({p: doc for p, doc in documents.items() if not SCHEMA_CHECKS.passed(raw[p])})
    SCHEMA_CHECKS.remember(raw.values())  # reached only when every schema passed
    return SchemaSet(documents=documents, validators=CompiledSchemas(documents))


def _schema_document(data: bytes, path: str) -> Any:
    """A catalogue JSON Schema within the size and nesting limits, parsed strictly."""
    if len(data) > MAX_CATALOGUE_FILE_BYTES:
        raise CatalogueError(
            FailureCode.SCHEMA_INVALID,
            f"{path} is {len(data)} bytes; a catalogue file holds at most {MAX_CATALOGUE_FILE_BYTES}",
            path=path,
            next_step=f"shorten {path} to at most {MAX_CATALOGUE_FILE_BYTES} bytes (long descriptions and "
            "examples belong in the step's instruction)",
        )
    try:
        return parse_strict_json(data, where=path, code=FailureCode.SCHEMA_INVALID)
    except RegistryError as exc:
        bad = first_not_utf8(data)
        if bad is not None:
            message = f"not valid JSON: {bad} is not UTF-8"
            raise CatalogueError(exc.code, message, path=path, next_step=save_as_utf8_step(path, bad)) from None
        next_step = _json_next_step(data, path, exc.message)
        if next_step is None:
            raise
        raise CatalogueError(exc.code, exc.message, path=path, next_step=next_step) from None


def _json_next_step(data: bytes, path: str, message: str) -> str | None:
    """What fixes a schema file that is not strict JSON: where its syntax breaks, or its repeated key."""
    duplicate = "duplicate JSON key "
    if message.startswith(duplicate):
        return (
            f"in {path}, keep one {message.removeprefix(duplicate)} member in its object: JSON names each key "
            "of an object once, and readers differ on which of two they keep"
        )
    try:
        json.loads(data.decode("utf-8"))
    except json.JSONDecodeError as exc:
        return (
            f"fix the JSON syntax in {path} at line {exc.lineno}, column {exc.colno}, or just before it "
            "(a missing or extra comma is reported at the token after it)"
        )
    except (ValueError, RecursionError):
        return None
    return None
