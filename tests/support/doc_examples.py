"""Shell examples as the docs and ``--help`` show them, turned into commands a test can run.

Functions
    reader_docs(root) -> tuple[Path, ...]
        the Markdown a user reads: README.md, keys/README.md, releases/README.md and every ``.md`` under docs/
    markdown_examples(path, root) -> list[Example]
        every command in the fenced ``sh``/``bash``/``console``/``shell`` blocks of
        ``path`` (also fences indented inside lists), named ``<path>:<line>``
    help_examples(name, group) -> list[Example]
        the commands of every ``Examples:`` / ``Typical flow:`` block in the ``--help``
        of ``group`` (a click group) and of each of its subcommands, recursively
    prepare(command, substitutions) -> Prepared
        placeholders substituted, ``uv run X`` mapped to the installed ``X``, a leading
        ``VAR=value`` taken out as environment

A command is one logical line: continuation lines joined, ``$ `` prompts and
comments stripped. A ``cd DIR`` line in a block is not a command of its own:
the commands after it in that block run in ``DIR``.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import click
from click.testing import CliRunner

FENCE = re.compile(r"^(\s*)```(sh|bash|console|shell)\s*$")
FENCE_END = re.compile(r"^\s*```\s*$")
HELP_BLOCK = re.compile(r"^\s*(Examples|Typical flow):\s*$")
COMMENT = re.compile(r"(^|\s)#.*$")
ENV_PREFIX = re.compile(r"^([A-Z_][A-Z0-9_]*)=(\S+)\s+")
UV_RUN = re.compile(r"(^|&&\s*|\|\s*)uv run (--locked )?")


@dataclass(frozen=True)
class Example:
    """One documented command: where it is shown, the command, and the directory its block ``cd``'d to."""

    where: str
    command: str
    cd: str = ""


@dataclass(frozen=True)
class Prepared:
    """A command ready to run: its words (or a shell script), and the environment it sets."""

    script: str
    env: dict[str, str] = field(default_factory=dict)

    @property
    def argv(self) -> list[str]:
        return shlex.split(self.script)


def _logical_lines(numbered: Iterable[tuple[int, str]]) -> list[tuple[int, str]]:
    """Join continuation lines; drop prompts, comments and blank lines. Keeps the first line's number."""
    commands: list[tuple[int, str]] = []
    parts: list[str] = []
    start = 0
    for number, raw in numbered:
        text = raw.strip()
        text = text[2:] if text.startswith("$ ") else text
        text = COMMENT.sub("", text).rstrip()
        if not parts:
            start = number
        if text.endswith("\\"):
            parts.append(text[:-1].strip())
            continue
        parts.append(text)
        command = " ".join(p for p in parts if p)
        parts = []
        if command:
            commands.append((start, command))
    return commands


def _block_examples(where: str, numbered: list[tuple[int, str]]) -> list[Example]:
    examples: list[Example] = []
    cd = ""
    for number, command in _logical_lines(numbered):
        if command.startswith("cd "):
            cd = command[3:].strip()
            continue
        examples.append(Example(where=f"{where}:{number}", command=command, cd=cd))
    return examples


def reader_docs(root: Path) -> tuple[Path, ...]:
    return (
        root / "README.md",
        root / "keys" / "README.md",
        root / "releases" / "README.md",
        *sorted((root / "docs").rglob("*.md")),
    )


def markdown_examples(path: Path, root: Path) -> list[Example]:
    lines = path.read_text("utf-8").splitlines()
    name = path.relative_to(root).as_posix()
    examples: list[Example] = []
    index = 0
    while index < len(lines):
        if FENCE.match(lines[index]):
            end = index + 1
            while end < len(lines) and not FENCE_END.match(lines[end]):
                end += 1
            examples += _block_examples(name, [(n + 1, lines[n]) for n in range(index + 1, end)])
            index = end
        index += 1
    return examples


def _help_text(group: click.Command, path: list[str], name: str) -> str:
    result = CliRunner().invoke(group, [*path, "--help"], prog_name=name, terminal_width=200)
    assert result.exit_code == 0, result.output
    return result.output


def _help_blocks(text: str) -> list[list[tuple[int, str]]]:
    lines = text.splitlines()
    blocks: list[list[tuple[int, str]]] = []
    for index, line in enumerate(lines):
        if HELP_BLOCK.match(line):
            end = index + 1
            while end < len(lines) and lines[end].strip():
                end += 1
            blocks.append([(n + 1, lines[n]) for n in range(index + 1, end)])
    return blocks


def help_examples(name: str, group: click.Command, path: tuple[str, ...] = ()) -> list[Example]:
    """Every help example of ``name [path...]`` and of its subcommands (named ``name path --help:<line>``)."""
    where = " ".join((name, *path, "--help"))
    examples = [e for block in _help_blocks(_help_text(group, list(path), name)) for e in _block_examples(where, block)]
    command = group
    for word in path:
        assert isinstance(command, click.Group)
        found = command.get_command(click.Context(command), word)  # a command another module registers, too
        assert found is not None, (name, path)
        command = found
    if isinstance(command, click.Group):
        for sub in command.list_commands(click.Context(command)):
            examples += help_examples(name, group, (*path, sub))
    return examples


def substitute(text: str, substitutions: Mapping[str, str]) -> str:
    """Replace each placeholder (a regular expression) in order."""
    for pattern, value in substitutions.items():
        text = re.sub(pattern, _literally(value), text)
    return text


def _literally(value: str) -> Callable[[re.Match[str]], str]:
    """A ``re.sub`` replacement that inserts ``value`` as it is (no group references)."""
    return lambda _match: value


def prepare(command: str, substitutions: Mapping[str, str]) -> Prepared:
    """Substitute placeholders, run ``uv run X`` as the installed X, take a leading ``VAR=value`` as env."""
    script = UV_RUN.sub(lambda m: m.group(1), substitute(command, substitutions))
    env: dict[str, str] = {}
    while match := ENV_PREFIX.match(script):
        env[match.group(1)] = match.group(2)
        script = script[match.end() :]
    return Prepared(script=script, env=env)
