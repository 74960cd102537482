"""What a model needs to write a valid JSON output: the output's JSON Schema from the verified release.

A step's outputs name their schema by a release-file URI; the bridge reads it
from the verifier (which serves only files of releases it verified), writes it
into the project under ``.rimthan/schemas/<release>/`` for the model to read
with its own tools, and says the required top-level fields in the step's
words. The full schema stays out of the tool results, which keeps them small.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from rimthan_workflow_registry.limits import MAX_CATALOGUE_FILE_BYTES

from .project_files import ProjectFiles
from .protocol import HarnessError, ResourceReader

SCHEMA_DIR = ".rimthan/schemas"
_ENUM_SHOWN = 6


@dataclass(frozen=True)
class OutputSchema:
    """One output's schema as the model gets it: where to read it, and its required fields in short."""

    path: str | None  # project-relative copy of the full schema; None when it could not be fetched
    required: str  # "name (type), ..." for the top-level required fields, or why there is none
    binds_files: bool = False  # the schema has a sha256 member: a file named by path and digest (file_digests)

    def words(self) -> str:
        if self.path is None:
            return f"  ({self.required})"
        said = f"  JSON Schema: {self.path} (read it before writing); required fields: {self.required}"
        if self.binds_files:
            said += (". Where it names a file by path and sha256, leave sha256 out: step_done fills it in from the "
                     "file on disk (never compute or copy a digest)")  # fmt: skip
        return said


def summarize(schema: Mapping[str, Any]) -> str:
    """The schema's top-level required fields, each with its type, constant or choices."""
    properties = schema.get("properties") if isinstance(schema.get("properties"), Mapping) else {}
    assert isinstance(properties, Mapping)
    required = [str(name) for name in schema.get("required") or []]
    return ", ".join(f"{name} ({_kind(properties.get(name) or {})})" for name in required) or "none"


def _kind(prop: Mapping[str, Any]) -> str:
    if "const" in prop:
        return f"= {json.dumps(prop['const'])}"
    choices = prop.get("enum")
    if isinstance(choices, list):
        shown = ", ".join(json.dumps(c) for c in choices[:_ENUM_SHOWN])
        return f"one of {shown}{', ...' if len(choices) > _ENUM_SHOWN else ''}"
    kind = prop.get("type")
    if isinstance(kind, list):
        return "/".join(map(str, kind))
    return str(kind) if kind else "see the schema"


async def output_schema(
    read: ResourceReader, files: ProjectFiles, release_id: str, output: Mapping[str, Any]
) -> OutputSchema | None:
    """Fetch ``output``'s schema from the verifier and put a copy in the project (None if it has none)."""
    uri, name = output.get("schema_uri"), output.get("schema")
    if not uri or not name:
        return None
    try:
        text = await read(str(uri))
        size = len(text.encode("utf-8"))
        if size > MAX_CATALOGUE_FILE_BYTES:  # (the verifier's word: a catalogue schema is never larger)
            return OutputSchema(None, f"the schema {name} is {size} bytes, past any catalogue file's; not copied")
        schema = json.loads(text)
    except Exception as exc:  # a missing schema only costs the model a hint; the verifier still checks the file
        return OutputSchema(None, f"the schema {name} could not be fetched ({type(exc).__name__}: {exc})")
    path = f"{SCHEMA_DIR}/{release_id}/{PurePosixPath(str(name)).name}"
    try:  # (the move it describes went through: a copy that cannot be written is a hint lost, not an error)
        files.write("output-schema", path, "application/schema+json", text)
    except (HarnessError, OSError) as exc:
        return OutputSchema(None, f"its schema {name} could not be copied into the project: {exc}")
    summary = summarize(schema) if isinstance(schema, Mapping) else "see the schema"
    return OutputSchema(path, summary, binds_files='"sha256"' in text)
