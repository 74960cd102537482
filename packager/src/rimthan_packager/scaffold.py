"""``rimthan-pack init``: a minimal catalogue source that builds as it is.

The scaffold exercises every kind of file the format has - catalogue and
workflow TOML (written with tomli-w), JSON Schemas, Markdown instructions,
prompt, subagent and validator assets, one host adapter - and a workflow with
the three kinds of step: ``setup-workspace`` (workspace manifest), one
ungated step, and one gated terminal step with a JSON output and a validator.
It is a small but complete example: its adapter tells the model how to use
the four tools, its subagent answers in the report schema's ``pass``/``fail``,
and ``examples/`` lets the scripted host kit run it end to end.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import tomli_w
from rimthan_workflow_registry.errors import CatalogueError, FailureCode, RegistryError, shell_word
from rimthan_workflow_registry.protocol_names import WORKFLOW_ENGINE_PROFILE
from rimthan_workflow_registry.release import CATALOGUE_MANIFEST_NAME, ID_PATTERN, identity_problem, is_semver
from rimthan_workflow_registry.remediation import io_refusal

from .fsutil import create_file, make_dirs, remove_made_dirs
from .layout import catalogue_folder, version_folder

_NAME = re.compile(ID_PATTERN)  # the catalogue rule for a name, matched whole
ADAPTER_ID = "claude-code"
ADAPTER_VERSION = "1.0.0"

WORKSPACE_MANIFEST_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "Rimthan workspace manifest",
    "description": "Written by the harness at setup-workspace: host, adapter, capabilities, and the path and "
    "SHA-256 of every asset it delivered into the project.",
    "type": "object",
    "additionalProperties": False,
    "required": ["harness", "adapter", "capabilities", "delivered", "symlink_free"],
    "properties": {
        "harness": {"type": "string"},
        "adapter": {
            "type": "object",
            "additionalProperties": False,
            "required": ["id", "version"],
            "properties": {"id": {"type": "string"}, "version": {"type": "string"}},
        },
        "capabilities": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        "delivered": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["asset", "kind", "path", "sha256"],
                "properties": {
                    "asset": {"type": "string"},
                    "kind": {"enum": ["prompt", "skill", "subagent", "adapter"]},
                    "path": {"type": "string"},
                    "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
                },
            },
        },
        "symlink_free": {"const": True},
    },
}

CONFIRMED_STATE_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "Confirmed state",
    "description": "Values the user has confirmed, one top-level field at a time.",
    "type": "object",
    "additionalProperties": False,
    "required": ["goal"],
    "properties": {
        "goal": {
            "type": "string",
            "minLength": 1,
            "maxLength": 500,
            "description": "What this run should achieve, in the user's words.",
        }
    },
}

SUMMARY_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "Summary",
    "type": "object",
    "additionalProperties": False,
    "required": ["goal", "outcome", "next_steps"],
    "properties": {
        "goal": {"type": "string", "minLength": 1},
        "outcome": {"type": "string", "minLength": 1},
        "next_steps": {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1},
    },
}

MARKDOWN: dict[str, str] = {
    "assets/instructions/setup-workspace.md": """# Set up the workspace

Install every asset this step delivers at the path your host adapter names,
byte for byte, then write `.rimthan/workspace-manifest.json` listing your
harness, the adapter id and version, your capabilities, and the path and
SHA-256 of every file you wrote. Confirm the workspace holds no symlinks.
""",
    "assets/instructions/plan.md": """# Plan the work

Read the confirmed `goal`. Write down, for yourself, what a good outcome
looks like and the two or three things you must check before summarising.
This step produces no files; continue when you are ready.
""",
    "assets/instructions/write-summary.md": """# Write the summary

Write `out/summary.json` with the confirmed `goal`, the `outcome` you reached
in one paragraph, and at least one concrete `next_steps` entry. Then prepare
validation and run the `reviewer` validator as an isolated subagent.
""",
    "assets/prompts/brief.md": """# Brief

Start the workflow with the user's goal in one sentence and confirm it with
them before doing anything else.
""",
    "assets/subagents/reviewer.md": """---
name: reviewer
description: Isolated Rimthan validator; reviews a summary against the confirmed goal, returns one JSON report.
---

You review artifacts you did not write. You receive a validator instruction,
the validator id and version, the artifacts (id, path, SHA-256) and the
confirmed state values; judge only those, following the instruction.

- Read-only: do not create, edit or delete any file and do not call any
  Rimthan tool. Hash each file first (`sha256sum`); a digest that differs
  from the one you were given is an `error` finding on that artifact.
- Each finding names the `artifact_id`, where in it (a JSON Pointer such as
  `/next_steps/0`) and what would fix it, with `severity` `error` or `warning`.
- The outcome is `fail` if there is at least one `error` finding and `pass`
  otherwise.

Reply with exactly one JSON object and nothing else:

{"validator_id": "reviewer", "version": "<version from the instruction>", "outcome": "pass", "findings": []}
""",
    "assets/validators/reviewer.md": """# Reviewer

Pass the summary only if:

- `goal` is the confirmed goal, unchanged;
- `outcome` answers that goal rather than restating it;
- every `next_steps` entry is an action someone can take.

Otherwise fail it and name each problem as a finding.
""",
    f"adapters/{ADAPTER_ID}.md": """# Rimthan adapter for Claude Code (claude-code 1.0.0)

You are driving a Rimthan workflow from Claude Code. Rimthan tells you which
step is active and checks what you produce; all run state lives in the
checkpoint token it returns plus the confirmed state you send.

## Host binding

Send the same `host` object on every call: harness `claude-code`, adapter id
`claude-code` version `1.0.0`, capabilities `workspace.write` and `subagents`
(only those you really have), validator capabilities
`subagent.isolated-context`, and the repository policy the user gave you.
Asset paths: prompts `.claude/commands/<id>.md`, skills
`.claude/skills/<id>/SKILL.md`, subagents `.claude/agents/<id>.md`, this
adapter `.claude/rimthan/claude-code.md`.

## Confirmed state

Ask the user for each field of the confirmed-state schema, repeat the value
back, and record their confirmation (the value's digest and the time they
said yes). Send the whole state with every call; never fill a field yourself.

## The four tools

1. `rimthan.start_workflow`: workflow id, `confirmed_state`, `host`. The answer
   is always the `setup-workspace` step.
2. `rimthan.continue_workflow`: checkpoint + confirmed state, after an ungated
   step (no outputs, no validators) or to answer a question.
3. `rimthan.prepare_step_validation`: checkpoint, confirmed state, host and
   every declared artifact of the active step with its read-back attestation.
4. `rimthan.submit_step_validation`: checkpoint, confirmed state, the bundle
   from step 3 unchanged, and one report per validator the bundle requires.

Follow each tool's input schema exactly (`tools/list`).

## Answers

- `active`: do what the step's instruction says. `advanced`: keep the new
  checkpoint; the next step is active.
- `blocked` or `deterministic_validation_failed`: read each failure code, fix
  what it names, call again; tell the user if you cannot.
- `validation_failed`: show the user every finding, repair, prepare again.
- `completed`: tell the user where the outputs are. The run is over.

## Validators

Write each output at its declared path, read it back and attest the bytes
you read (path, size, SHA-256). For every validator that prepare lists, start
its subagent with the Task tool (one validator per subagent, never in your
own context), give it the instruction, the artifacts and the confirmed
state, and submit its JSON report (`outcome` `pass` or `fail`, `findings`)
unchanged. Never write a report yourself; never edit a checkpoint or bundle.
""",
}


EXAMPLE_STATE: dict[str, Any] = {"goal": "Decide whether to keep the weekly status meeting"}
EXAMPLE_SUMMARY: dict[str, Any] = {
    "goal": EXAMPLE_STATE["goal"],
    "outcome": "Replace it with a written update on Mondays and a monthly meeting for open questions.",
    "next_steps": ["Announce the change at the next meeting", "Review the written updates after one month"],
}
DEFAULT_VERSION = "0.1.0"


def _check_name(name: str, directory: str = "DIRECTORY") -> None:
    if not _NAME.fullmatch(name):
        raise CatalogueError(
            FailureCode.CATALOGUE_INVALID,
            f"{name!r} is not a valid catalogue name: expected lowercase letters, digits and hyphens "
            "([a-z0-9][a-z0-9-]*, at most 64 characters)",
            next_step=f"choose a name such as my-flow: rimthan-pack init {directory} --name my-flow",
        )


def scaffold_files(name: str, version: str = DEFAULT_VERSION) -> dict[str, bytes]:
    """Every file of a fresh catalogue source called ``name`` at ``version``, by path.

    Besides the catalogue it ships ``examples/`` (a confirmed state and the
    summary artifact), so the scripted host kit can walk it end to end.
    """
    _check_name(name)
    catalogue = {
        "format": 1,
        "workflows": [f"workflows/{name}.toml"],
        "host_adapters": [f"adapters/{ADAPTER_ID}.toml"],
        "catalogue": {
            "name": name,
            "version": version,
            "title": name.replace("-", " ").capitalize(),
            "description": "Describe for operators what this catalogue is for.",
        },
        "scope": {"name": f"example.{name}", "profile": WORKFLOW_ENGINE_PROFILE},
    }
    workflow = {
        "id": name,
        "version": version,
        "owner": f"example.{name}",
        "title": name.replace("-", " ").capitalize(),
        "summary": "Plan, then write a reviewed summary.",
        "entry_aliases": [],
        "confirmed_state_schema": "schemas/confirmed-state.schema.json",
        "required_capabilities": ["workspace.write", "subagents"],
        "host_adapters": [f"{ADAPTER_ID}@{ADAPTER_VERSION}"],
        "assets": [
            {"id": "brief", "kind": "prompt", "file": "assets/prompts/brief.md"},
            {"id": "reviewer", "kind": "subagent", "file": "assets/subagents/reviewer.md"},
        ],
        "validators": [
            {
                "id": "reviewer",
                "version": "1.0.0",
                "instruction": "assets/validators/reviewer.md",
                "subagent": "reviewer",
                "required_capabilities": ["subagent.isolated-context"],
            },
        ],
        "steps": [
            {
                "id": "setup-workspace",
                "title": "Set up the workspace",
                "instruction": "assets/instructions/setup-workspace.md",
                "host_assets": ["brief", "reviewer"],
                "next": "plan",
                "outputs": [
                    {
                        "id": "workspace-manifest",
                        "path": ".rimthan/workspace-manifest.json",
                        "media_type": "application/json",
                        "schema": "schemas/workspace-manifest.schema.json",
                        "max_bytes": 65536,
                    }
                ],
            },
            {
                "id": "plan",
                "title": "Plan the work",
                "instruction": "assets/instructions/plan.md",
                "next": "write-summary",
            },
            {
                "id": "write-summary",
                "title": "Write the summary",
                "instruction": "assets/instructions/write-summary.md",
                "validators": ["reviewer@1.0.0"],
                "outputs": [
                    {
                        "id": "summary",
                        "path": "out/summary.json",
                        "media_type": "application/json",
                        "schema": "schemas/summary.schema.json",
                        "max_bytes": 65536,
                    }
                ],
            },
        ],
    }
    adapter = {
        "id": ADAPTER_ID,
        "version": ADAPTER_VERSION,
        "harness": ADAPTER_ID,
        "title": "Claude Code",
        "instruction": f"adapters/{ADAPTER_ID}.md",
        "capabilities": ["workspace.write", "subagents"],
        "validator_capabilities": ["subagent.isolated-context"],
        "paths": {
            "prompt": ".claude/commands/{id}.md",
            "skill": ".claude/skills/{id}/SKILL.md",
            "subagent": ".claude/agents/{id}.md",
            "adapter": ".claude/rimthan/{id}.md",
        },
    }
    files = {
        CATALOGUE_MANIFEST_NAME: tomli_w.dumps(catalogue).encode("utf-8"),
        f"workflows/{name}.toml": tomli_w.dumps(workflow).encode("utf-8"),
        f"adapters/{ADAPTER_ID}.toml": tomli_w.dumps(adapter).encode("utf-8"),
        "schemas/workspace-manifest.schema.json": _json(WORKSPACE_MANIFEST_SCHEMA),
        "schemas/confirmed-state.schema.json": _json(CONFIRMED_STATE_SCHEMA),
        "schemas/summary.schema.json": _json(SUMMARY_SCHEMA),
        "examples/confirmed-state.json": _json(EXAMPLE_STATE),
        "examples/summary.json": _json(EXAMPLE_SUMMARY),
    }
    files.update({path: text.encode("utf-8") for path, text in MARKDOWN.items()})
    return files


def _json(value: Any) -> bytes:
    return (json.dumps(value, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def default_identity(directory: Path) -> tuple[str, str]:
    """Catalogue name and version from where the source goes.

    ``catalogues/my-flow/0.1.0`` (the layout the README recommends) is
    ``my-flow`` at 0.1.0: a folder named like a version takes its name from
    the parent. Any other folder gives its own name at 0.1.0.
    """
    folder = directory.absolute()
    if is_semver(folder.name):
        return folder.parent.name, folder.name
    return folder.name, DEFAULT_VERSION


def _check_identity(name: str, version: str, directory: Path) -> None:
    """The version the folder names, and ``name@version``, fit a tool call as a build requires (catalogue_bounds)."""
    problem = identity_problem("release id", "the version this folder names", version, f"{name}@{version}")
    if problem is not None:
        raise CatalogueError(
            FailureCode.CATALOGUE_INVALID,
            problem,
            path=str(directory),
            next_step=f"name the version folder with a shorter version: rimthan-pack init "
            f"{shell_word(directory.parent / DEFAULT_VERSION)}",
        )


def _check_version_folder(directory: Path, parent: str, version: str, name: str | None) -> None:
    """A version folder's parent names the catalogue (a build refuses another name): --name may only agree."""
    if name in (None, parent) and _NAME.fullmatch(parent):
        return
    wanted = name if name is not None and _NAME.fullmatch(name) else "my-flow"
    moved = shell_word(catalogue_folder(directory, wanted) / version)
    problem = (
        f"cannot name the catalogue after the folder {parent!r}: expected lowercase letters, digits and hyphens"
        if name is None or name == parent
        else f"--name {name!r} disagrees with the folder {parent!r}"
    )
    raise CatalogueError(
        FailureCode.CATALOGUE_INVALID,
        f"{problem}; in the layout catalogues/NAME/{version} the folder NAME names the catalogue "
        "(a build refuses a catalogue.toml that says another name)",
        path=str(directory),
        next_step=f"init the catalogue in a folder named after it: rimthan-pack init {moved}",
    )


def init_catalogue(directory: Path | str, name: str | None = None) -> list[Path]:
    """Write a new catalogue source into ``directory`` (absent or empty); never overwrite."""
    directory = Path(directory)
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise RegistryError(
            FailureCode.DESTINATION_EXISTS,
            "exists and is not an empty directory",
            path=str(directory),
            next_step="pass a new or empty directory; init never writes over existing files",
        )
    derived, version = default_identity(directory)
    shown = shell_word(directory)
    if version_folder(directory) is not None:
        _check_version_folder(directory, derived, version, name)
    elif name is None and not _NAME.fullmatch(derived):
        raise CatalogueError(
            FailureCode.CATALOGUE_INVALID,
            f"cannot name the catalogue after the folder {derived!r}: expected lowercase letters, digits and hyphens",
            path=str(directory),
            next_step=f"name it: rimthan-pack init {shown} --name my-flow",
        )
    _check_name(name or derived, shown)
    _check_identity(name or derived, version, directory)
    return _write_scaffold(directory, scaffold_files(name or derived, version))


def _write_scaffold(directory: Path, files: dict[str, bytes]) -> list[Path]:
    """Write ``files`` under ``directory``; a failure (a full disk) takes back every file and directory it made."""
    written: list[Path] = []
    made: list[Path] = []
    try:
        for path, data in sorted(files.items()):
            target = directory / path
            made += make_dirs(target.parent)
            create_file(target, data)
            written.append(target)
    except BaseException as exc:
        for target in written:
            target.unlink(missing_ok=True)
        remove_made_dirs(sorted(made, key=lambda d: len(d.parts)))
        if isinstance(exc, OSError) and not exc.filename:  # a write on a full disk names no file: name the source
            raise io_refusal(exc, str(directory), "writing the scaffold, so nothing was left") from None
        raise
    return written
