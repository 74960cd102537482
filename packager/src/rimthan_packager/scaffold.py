"""``rimthan-pack init``: a minimal catalogue source that builds as it is.

The scaffold exercises every kind of file the format has - catalogue and
workflow TOML (written with tomli-w), JSON Schemas, Markdown instructions,
prompt, subagent and validator assets, one host adapter - and a workflow with
the three kinds of step: ``setup-workspace`` (workspace manifest), one
ungated step, and one gated terminal step with a JSON output and a validator.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import tomli_w
from rimthan_workflow_registry.errors import CatalogueError, FailureCode, RegistryError

from .fsutil import create_file

_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
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
description: Reviews a summary against the confirmed goal, in an isolated context.
---

You review one artifact. You see only what the validation bundle gives you.
Report `passed` or `failed` with findings; never edit the artifact.
""",
    "assets/validators/reviewer.md": """# Reviewer

Pass the summary only if:

- `goal` is the confirmed goal, unchanged;
- `outcome` answers that goal rather than restating it;
- every `next_steps` entry is an action someone can take.

Otherwise fail it and name each problem as a finding.
""",
    f"adapters/{ADAPTER_ID}.md": """# Claude Code adapter

Prompts go to `.claude/commands/`, skills to `.claude/skills/<id>/SKILL.md`,
subagents to `.claude/agents/`. Run validators with the Task tool so each
gets an isolated context.
""",
}


def scaffold_files(name: str) -> dict[str, bytes]:
    """Every file of a fresh catalogue source called ``name``, by path."""
    if not _NAME.match(name):
        raise CatalogueError(
            FailureCode.CATALOGUE_INVALID, f"catalogue name {name!r} must match [a-z0-9][a-z0-9-]* (use --name)"
        )
    catalogue = {
        "format": 1,
        "workflows": [f"workflows/{name}.toml"],
        "host_adapters": [f"adapters/{ADAPTER_ID}.toml"],
        "catalogue": {
            "name": name,
            "version": "0.1.0",
            "title": name.replace("-", " ").capitalize(),
            "description": "Describe for operators what this catalogue is for.",
        },
        "scope": {"name": f"example.{name}", "profile": "workflow-engine"},
    }
    workflow = {
        "id": name,
        "version": "0.1.0",
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
        "catalogue.toml": tomli_w.dumps(catalogue).encode("utf-8"),
        f"workflows/{name}.toml": tomli_w.dumps(workflow).encode("utf-8"),
        f"adapters/{ADAPTER_ID}.toml": tomli_w.dumps(adapter).encode("utf-8"),
        "schemas/workspace-manifest.schema.json": _json(WORKSPACE_MANIFEST_SCHEMA),
        "schemas/confirmed-state.schema.json": _json(CONFIRMED_STATE_SCHEMA),
        "schemas/summary.schema.json": _json(SUMMARY_SCHEMA),
    }
    files.update({path: text.encode("utf-8") for path, text in MARKDOWN.items()})
    return files


def _json(value: Any) -> bytes:
    return (json.dumps(value, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def default_name(directory: Path) -> str:
    """A catalogue name from the directory name (``My Flow`` -> ``my-flow``)."""
    return re.sub(r"[^a-z0-9-]+", "-", directory.absolute().name.lower()).strip("-") or "catalogue"


def init_catalogue(directory: Path | str, name: str | None = None) -> list[Path]:
    """Write a new catalogue source into ``directory`` (absent or empty); never overwrite."""
    directory = Path(directory)
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise RegistryError(FailureCode.DESTINATION_EXISTS, "exists and is not an empty directory", path=str(directory))
    files = scaffold_files(name or default_name(directory))
    written: list[Path] = []
    for path, data in sorted(files.items()):
        target = directory / path
        target.parent.mkdir(parents=True, exist_ok=True)
        create_file(target, data)
        written.append(target)
    return written
