"""What the docs a newcomer reads point at is there: links, repository paths, make targets and test names.

The docs are README.md, keys/README.md, releases/README.md and every ``.md`` under docs/. In them:

- a relative Markdown link names a file or folder of the repository and, with ``#anchor``, a heading of that
  file (the anchor GitHub makes of it);
- a repository path (``core/...``, ``tests/...``, ``docs/...``, in backticks or in prose) that names a file by
  its extension, or a folder by its trailing ``/``, exists; ``...`` stands for folders; a ``.py`` file named
  in backticks from inside its package (``release/paths.py``, ``bridge_server.py``) ends some file's path.
  Not checked: a placeholder (``NAME``, ``<id>``, ``{id}``, the ``my-flow`` a reader scaffolds) and what a
  command or the reader makes (MADE_BY_A_COMMAND);
- ``make TARGET`` (in backticks, or at the start of a line of a fenced shell block) is a target of the Makefile, and
  every target of the Makefile is listed by ``make help`` and named in the README;
- a test named (``test_...``) is a test function or a test file under tests/;
- a command shown in backticks in the text (``rimthan-pack check SOURCE --releases-dir DIR``) names a real
  subcommand and only options it takes (the fenced blocks run as written: test_doc_examples.py);
- a dotted name of one of our packages in backticks (``rimthan_workflow_registry.remediation.FOR_A_HARNESS``)
  imports, and each name after the module is an attribute of what comes before.

docs/performance-history.md is a dated log: its links are checked, not the paths and names it gives, which
were true on their day.
"""

from __future__ import annotations

import fnmatch
import importlib
import os
import re
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path

import click
import rimthan_packager.cli_author
import rimthan_packager.cli_inspect
import rimthan_packager.cli_oci  # noqa: F401  (these three register their subcommands on the group)
from rimthan_host.serve import main as host_cli
from rimthan_packager.cli import cli as pack_cli
from rimthan_workflow_mcp.cli import main as mcp_cli
from support.doc_examples import markdown_examples, reader_docs

REPO = Path(__file__).resolve().parents[2]
HISTORY = REPO / "docs" / "performance-history.md"
DOCS = reader_docs(REPO)
CURRENT_DOCS = tuple(doc for doc in DOCS if doc != HISTORY)
NOT_WALKED = frozenset({".git", ".venv", "node_modules", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"})
TOP = r"(?:core|clikit|packager|server|host|tests|benchmarks|interop|deploy|docs|catalogues|keys|releases|\.ci)/"
REPO_PATH = re.compile(rf"(?<![\w./~-]){TOP}[\w./-]*")
MODULE_FILE = re.compile(r"`([\w.-]+(?:/[\w.-]+)*\.py)`")  # ``release/paths.py``, ``bridge_server.py``
FILE_OR_FOLDER = re.compile(r"\.(?:py|md|toml|json|mjs|mts|lock|txt|sh|pub|yml|yaml)$|/$")
PLACEHOLDER = re.compile(r"[<{]|\b[A-Z][A-Z_]+\b|\bmy-flow\b|\bother-flow\b")
# paths absent from a fresh clone, made by a command or by the reader: the path -> who makes it
MADE_BY_A_COMMAND = {
    "keys/trust.toml": "the trust file keys/README.md shows an operator how to write",
    "benchmarks/out/": "make bench writes its results there",
    "benchmarks/work/": "make bench's scratch folder",
    "keys/local/": "make demo's trust directory (git-ignored)",
    "releases/research-decision-": "make demo builds the packaged releases there",
    "keys/team/": "the trust directory docs/packager.md's walkthrough has keygen make",
}
MAKE_IN_TEXT = re.compile(r"`make ([a-z][\w-]*)")
OUR_NAME = re.compile(
    r"`((?:rimthan_workflow_registry|rimthan_workflow_mcp|rimthan_host|rimthan_packager|rimthan_clikit)(?:\.\w+)*)"
)
CLIS: dict[str, click.Group] = {"rimthan-pack": pack_cli, "rimthan-mcp": mcp_cli, "rimthan-host": host_cli}
INLINE_COMMAND = re.compile(r"`(rimthan-pack|rimthan-mcp|rimthan-host) ([^`]*)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
TEST_NAME = re.compile(r"\btest_\w*[a-z0-9]\b")


def _text(doc: Path) -> str:
    return doc.read_text("utf-8")


def _where(doc: Path) -> str:
    return str(doc.relative_to(REPO))


@cache
def _repo_entries() -> tuple[str, ...]:
    """Every file (``a/b.py``) and folder (``a/``) of the repository, generated and tool folders left out."""
    entries: list[str] = []
    for folder, subfolders, files in os.walk(REPO):
        subfolders[:] = [s for s in subfolders if s not in NOT_WALKED]
        here = Path(folder).relative_to(REPO).as_posix()
        prefix = "" if here == "." else here + "/"
        entries += [prefix + s + "/" for s in subfolders] + [prefix + f for f in files]
    return tuple(entries)


def _exists(path: str) -> bool:
    if "..." not in path:
        return (REPO / path).exists()
    pattern = path.replace("...", "*")
    return any(fnmatch.fnmatch(entry, pattern) for entry in _repo_entries())


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation but ``-`` and ``_`` dropped, spaces as ``-``."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(doc: Path) -> set[str]:
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    in_block = False
    for line in _text(doc).splitlines():
        in_block ^= line.startswith("```")
        heading = re.match(r"#{1,6}\s+(.*)", line)
        if heading and not in_block:
            slug = _slug(heading.group(1))
            anchors.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
            seen[slug] = seen.get(slug, 0) + 1
    return anchors


def _broken_link(doc: Path, target: str) -> str:
    """Why ``target``, a link in ``doc``, leads nowhere; empty when it leads somewhere (or off the repository)."""
    if re.match(r"[a-z][a-z0-9+.-]*:", target):
        return ""
    file, _, anchor = target.partition("#")
    into = (doc.parent / file).resolve() if file else doc
    if not into.exists():
        return f"{file} does not exist"
    if anchor and into.suffix == ".md" and anchor not in _anchors(into):
        return f"{into.relative_to(REPO)} has no heading #{anchor}"
    return ""


def test_every_link_in_the_docs_leads_to_a_file_and_heading_that_exist() -> None:
    broken = [
        f"{_where(doc)}: ({target}): {why}"
        for doc in DOCS
        for target in LINK.findall(_text(doc))
        if (why := _broken_link(doc, target))
    ]
    assert broken == [], "\n".join(broken)


def _checked_paths(text: str) -> set[str]:
    shown = {m.group(0).rstrip(".") for m in REPO_PATH.finditer(text)}
    return {
        path
        for path in shown
        if FILE_OR_FOLDER.search(path)
        and not PLACEHOLDER.search(path)
        and not any(path.startswith(made) for made in MADE_BY_A_COMMAND)
    }


def _module_files(text: str) -> set[str]:
    """Each ``.py`` file named in backticks without its top folder: the end of some file's path."""
    return {name for name in MODULE_FILE.findall(text) if not re.match(TOP, name)}


def test_every_repository_path_the_docs_name_exists() -> None:
    files = [entry for entry in _repo_entries() if entry.endswith(".py")]
    missing = _not_found(_checked_paths, _exists)
    missing += _not_found(_module_files, lambda name: any(f"/{file}".endswith(f"/{name}") for file in files))
    assert missing == [], "the docs name paths that are not in the repository:\n" + "\n".join(missing)


def _makefile_targets() -> set[str]:
    return set(re.findall(r"^([a-z][a-z0-9-]*):(?!=)", _text(REPO / "Makefile"), flags=re.MULTILINE))


def _make_in_shell_blocks(doc: Path) -> list[str]:
    """The target of each ``make`` command in the doc's fenced shell blocks, as tests/docs runs them."""
    commands = (example.command.split() for example in markdown_examples(doc, REPO))
    return [words[1] for words in commands if len(words) > 1 and words[0] == "make"]


def test_every_make_target_the_docs_name_is_in_the_makefile() -> None:
    targets = _makefile_targets()
    named = [
        (doc, target)
        for doc in DOCS
        for target in MAKE_IN_TEXT.findall(" ".join(_text(doc).split())) + _make_in_shell_blocks(doc)
    ]
    unknown = sorted({f"{_where(doc)}: make {target}" for doc, target in named if target not in targets})
    assert unknown == [], "no such Makefile target:\n" + "\n".join(unknown)


def test_every_makefile_target_is_in_make_help_and_in_the_readme() -> None:
    targets = _makefile_targets()
    helped = set(re.findall(r'@echo "make ([a-z][\w-]*)', _text(REPO / "Makefile")))
    readme = " ".join(_text(REPO / "README.md").split())
    unsaid = sorted(t for t in targets if f"`make {t}" not in readme and f"`{t}`" not in readme)
    assert sorted(targets - helped) == [], "make help does not list these targets"
    assert unsaid == [], "README.md does not name these make targets"


@cache
def _test_names() -> frozenset[str]:
    sources = sorted((REPO / "tests").rglob("test_*.py"))
    functions = {name for path in sources for name in re.findall(r"^\s*(?:async )?def (test_\w+)", _text(path), re.M)}
    return frozenset(functions | {path.stem for path in sources})


def _not_found(find: Callable[[str], Iterable[str]], exists: Callable[[str], bool]) -> list[str]:
    """``doc: name`` for each name ``find`` gives in a doc (but the dated history) that does not ``exist``."""
    return sorted({f"{_where(doc)}: {name}" for doc in CURRENT_DOCS for name in find(_text(doc)) if not exists(name)})


def test_every_test_the_docs_name_exists() -> None:
    unknown = _not_found(TEST_NAME.findall, _test_names().__contains__)
    assert unknown == [], "the docs name tests that do not exist:\n" + "\n".join(unknown)


def _resolves(dotted: str) -> bool:
    """Whether the longest importable module of ``dotted`` has the rest as attributes, one after another."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(found, name):
                return False
            found = getattr(found, name)
        return True
    return False


def test_every_module_and_name_of_ours_the_docs_give_resolves() -> None:
    unknown = _not_found(OUR_NAME.findall, _resolves)
    assert unknown == [], "the docs name modules or names that do not exist:\n" + "\n".join(unknown)


def _command_mistakes(program: str, words: list[str]) -> list[str]:
    """What in ``program words`` the CLI does not take: an unknown subcommand, or an option its command lacks."""
    command: click.Command = CLIS[program]
    while isinstance(command, click.Group) and words and not words[0].startswith("-"):
        sub = command.get_command(click.Context(command), words[0])
        if sub is None:
            return [f"{program} has no subcommand {words[0]}"]
        command, words = sub, words[1:]
    takes = {"--help", "-h"} | {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
    before_its_own = words[: words.index("--")] if "--" in words else words  # after ``--``: another program's
    shown = (word.split("=")[0].rstrip(".,;:)") for word in before_its_own)
    return [f"{command.name} takes no {flag}" for flag in shown if flag.startswith("--") and flag not in takes]


def test_every_command_the_text_shows_names_a_real_subcommand_and_its_options() -> None:
    mistakes = sorted(
        {
            f"{_where(doc)}: {shown.group(0)}: {mistake}"
            for doc in CURRENT_DOCS
            for shown in INLINE_COMMAND.finditer(" ".join(_text(doc).split()))
            for mistake in _command_mistakes(shown.group(1), shown.group(2).split())
        }
    )
    assert mistakes == [], "\n".join(mistakes)
